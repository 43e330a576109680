// Package access decides who may read and reset Sunset's API and scrape its
// metrics. It authenticates each caller and authorizes each request with
// k8s.io/apiserver's own filters, the way metrics-server and other
// aggregated API servers do:
//
//   - delegated to kube-apiserver: bearer tokens through TokenReview,
//     decisions through SubjectAccessReview, and the front-proxy headers
//     of calls the aggregator proxies (--requestheader-*);
//   - without a cluster: a token file and client certificates, with reads
//     and resets allowed by group.
//
// The audit webhook does not come here: it keeps its own credentials.
package access

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/authorization/path"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/options"

	"github.com/kube-sunset/sunset/internal/httpjson"
)

// Default groups of the local authorizer, used without a cluster.
const (
	DefaultReadGroup  = "sunset:readers"
	DefaultResetGroup = "sunset:admins"
)

// DefaultAlwaysAllowPaths are open to anyone, as kube components leave
// their health checks: a kubelet probe carries no credentials.
var DefaultAlwaysAllowPaths = []string{"/-/healthy", "/-/ready", "/healthz", "/readyz", "/livez"}

// RequestHeader configures trust in the front-proxy headers that
// kube-apiserver's aggregator sets on the calls it proxies.
type RequestHeader struct {
	ClientCAFile        string
	AllowedNames        []string
	UsernameHeaders     []string
	UIDHeaders          []string
	GroupHeaders        []string
	ExtraHeaderPrefixes []string
}

// Options configure New. The names follow the kube component flags.
type Options struct {
	// Open skips authentication and authorization: anyone who reaches the
	// port may read and reset.
	Open bool
	// AuthenticationKubeconfig reaches kube-apiserver for TokenReview and
	// for the extension-apiserver-authentication ConfigMap; empty means
	// the in-cluster config when running in a pod.
	AuthenticationKubeconfig string
	// AuthorizationKubeconfig reaches kube-apiserver for
	// SubjectAccessReview; empty means the in-cluster config in a pod.
	AuthorizationKubeconfig string
	// SkipLookup does not read client-ca-file and the requestheader
	// settings from the extension-apiserver-authentication ConfigMap.
	SkipLookup bool
	// ClientCAFile verifies client certificates: the CN is the user, the
	// organizations its groups.
	ClientCAFile  string
	RequestHeader RequestHeader
	// TokenAuthFile holds static bearer tokens in kube-apiserver's
	// --token-auth-file CSV format: token,user,uid,"group1,group2".
	TokenAuthFile string
	// ReadGroups and ResetGroups are allowed to read (get, list) and to
	// reset (delete) when no cluster authorizes: without an authorization
	// kubeconfig and outside a pod.
	ReadGroups  []string
	ResetGroups []string
	// AlwaysAllowPaths are open to anyone; a trailing * matches a prefix.
	AlwaysAllowPaths []string
	// ServiceAccountTokenFile is where a pod's service-account token is
	// mounted; empty means DefaultServiceAccountTokenFile. Tests point it
	// elsewhere.
	ServiceAccountTokenFile string
	Logger                  zerolog.Logger
}

// DefaultServiceAccountTokenFile is where kubelet mounts a pod's
// service-account token, and where client-go's in-cluster config reads it.
const DefaultServiceAccountTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// InCluster reports whether Sunset runs in a pod that can reach
// kube-apiserver with the in-cluster config: the Service environment
// variables are set and a service-account token is mounted.
//
// The variables alone are not enough: kubelet injects them into static
// pods too once it has synced Services (after a restart, say), and a
// static pod has no service account. Delegating then would make every
// read and /metrics answer 401, where the same pod answered them after a
// cold boot.
func (o Options) InCluster() bool {
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" || os.Getenv("KUBERNETES_SERVICE_PORT") == "" {
		return false
	}
	path := o.ServiceAccountTokenFile
	if path == "" {
		path = DefaultServiceAccountTokenFile
	}
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// Authenticates reports whether o identifies callers at all. Sunset does
// not listen beyond loopback without that, unless told to be open.
func (o Options) Authenticates() bool {
	return o.TokenAuthFile != "" || o.ClientCAFile != "" || o.RequestHeader.ClientCAFile != "" || o.DelegatesAuthentication()
}

// DelegatesAuthentication reports whether kube-apiserver's TokenReview
// checks bearer tokens: authentication-kubeconfig is set, or Sunset runs
// in a pod with a service-account token.
func (o Options) DelegatesAuthentication() bool {
	return o.AuthenticationKubeconfig != "" || o.InCluster()
}

// AcceptsBearerTokens reports whether readers authenticate with bearer
// tokens, which must not cross the network in cleartext.
func (o Options) AcceptsBearerTokens() bool {
	return o.TokenAuthFile != "" || o.DelegatesAuthentication()
}

// delegatesAuthorization reports whether kube-apiserver's
// SubjectAccessReview decides.
func (o Options) delegatesAuthorization() bool {
	return o.AuthorizationKubeconfig != "" || o.InCluster()
}

// Access authenticates and authorizes requests.
type Access struct {
	open          bool
	alwaysAllow   func(path string) bool
	authn         authenticator.Request
	authz         authorizer.UnconditionalAuthorizer
	requestHeader *server.AuthenticationInfo
	clientCA      dynamiccertificates.CAContentProvider
	log           zerolog.Logger
}

// New builds the authenticator and authorizer. Client CAs from the cluster
// are read once here, so a wrong kubeconfig fails at startup.
func New(ctx context.Context, o Options) (*Access, error) {
	a := &Access{open: o.Open, log: o.Logger.With().Str("component", "access").Logger(), alwaysAllow: pathMatcher(o.AlwaysAllowPaths)}
	if o.Open {
		return a, nil
	}
	authn, err := o.authenticator(a)
	if err != nil {
		return nil, err
	}
	a.authn = authn
	if a.authz, err = o.authorizer(); err != nil {
		return nil, err
	}
	if runner, ok := a.clientCA.(dynamiccertificates.ControllerRunner); ok {
		if err := runner.RunOnce(ctx); err != nil {
			return nil, fmt.Errorf("loading client CAs: %w", err)
		}
	}
	return a, nil
}

func (o Options) authenticator(a *Access) (authenticator.Request, error) {
	delegated := o.DelegatesAuthentication()
	d := options.NewDelegatingAuthenticationOptions()
	d.RemoteKubeConfigFile = o.AuthenticationKubeconfig
	d.RemoteKubeConfigFileOptional = true
	d.SkipInClusterLookup = o.SkipLookup || !delegated
	d.ClientCert.ClientCA = o.ClientCAFile
	rh := &d.RequestHeader
	rh.ClientCAFile, rh.AllowedNames = o.RequestHeader.ClientCAFile, o.RequestHeader.AllowedNames
	for dst, src := range map[*[]string][]string{&rh.UsernameHeaders: o.RequestHeader.UsernameHeaders, &rh.UIDHeaders: o.RequestHeader.UIDHeaders,
		&rh.GroupHeaders: o.RequestHeader.GroupHeaders, &rh.ExtraHeaderPrefixes: o.RequestHeader.ExtraHeaderPrefixes} {
		if len(src) > 0 {
			*dst = src
		}
	}
	if errs := d.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var info server.AuthenticationInfo
	var serving server.SecureServingInfo
	if !delegated && o.ClientCAFile == "" && o.RequestHeader.ClientCAFile == "" && o.TokenAuthFile != "" {
		// Only the token file: nothing for the delegating authenticator.
		info.Authenticator = authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) { return nil, false, nil })
	} else if err := d.ApplyTo(&info, &serving, nil); err != nil {
		return nil, fmt.Errorf("authentication: %w", err)
	}
	a.requestHeader, a.clientCA = &info, serving.ClientCA
	chain := []authenticator.Request{withoutAnonymous(info.Authenticator)}
	if o.TokenAuthFile != "" {
		tokens, err := tokenfile.NewCSV(o.TokenAuthFile)
		if err != nil {
			return nil, fmt.Errorf("token-auth-file: %w", err)
		}
		chain = append([]authenticator.Request{bearertoken.New(tokens)}, chain...)
	}
	return union.New(chain...), nil
}

// withoutAnonymous turns the anonymous user the delegating authenticator
// falls back to into no user at all, so a caller without credentials gets
// 401 rather than 403.
func withoutAnonymous(inner authenticator.Request) authenticator.Request {
	return authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		resp, ok, err := inner.AuthenticateRequest(r)
		if ok && resp.User.GetName() == user.Anonymous {
			return nil, false, err
		}
		return resp, ok, err
	})
}

func (o Options) authorizer() (authorizer.UnconditionalAuthorizer, error) {
	if !o.delegatesAuthorization() {
		// Not built through the delegating options, which would try the
		// in-cluster config whenever the Service variables are set.
		paths, err := path.NewAuthorizer(o.AlwaysAllowPaths)
		if err != nil {
			return nil, fmt.Errorf("authorization-always-allow-paths: %w", err)
		}
		// system:masters may do anything, as the delegating options
		// would have it.
		return firstOpinion{authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup), paths,
			groupAuthorizer{read: sets.New(o.ReadGroups...), reset: sets.New(o.ResetGroups...)}}, nil
	}
	d := options.NewDelegatingAuthorizationOptions()
	d.RemoteKubeConfigFile = o.AuthorizationKubeconfig
	d.RemoteKubeConfigFileOptional = true
	d.AlwaysAllowPaths = o.AlwaysAllowPaths
	var info server.AuthorizationInfo
	if err := d.ApplyTo(&info); err != nil {
		return nil, fmt.Errorf("authorization: %w", err)
	}
	return info.Authorizer, nil
}

// Wrap puts authentication and authorization in front of h. Callers without
// credentials get 401; callers without permission get 403; both as
// metav1 Status.
func (a *Access) Wrap(h http.Handler) http.Handler {
	if a.open {
		return h
	}
	codecs := httpjson.Codecs.WithoutConversion()
	guarded := filters.WithAuthorization(h, a.authz, codecs)
	guarded = filters.WithAuthentication(guarded, a.authn, filters.Unauthorized(codecs), nil, a.requestHeader.RequestHeaderConfig)
	guarded = filters.WithRequestInfo(guarded, &request.RequestInfoFactory{APIPrefixes: sets.NewString("apis", "api"), GrouplessAPIPrefixes: sets.NewString("api")})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Kubelet probes carry no credentials; kube components let
		// them through as system:anonymous, which Sunset does not have.
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && a.alwaysAllow(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// Permits reports whether the caller of r is allowed verb on the
// non-resource path: it authenticates r and asks the authorizer, as Wrap
// would for a request to path. Anyone is, when access is open. It serves
// answers that only some callers of an open path may see in full.
func (a *Access) Permits(r *http.Request, verb, path string) bool {
	if a.open {
		return true
	}
	resp, ok, err := a.authn.AuthenticateRequest(r)
	if err != nil || !ok {
		return false
	}
	d, _, err := a.authz.Authorize(r.Context(), authorizer.AttributesRecord{User: resp.User, Verb: verb, Path: path})
	return err == nil && d == authorizer.DecisionAllow
}

// pathMatcher matches a path against paths, a trailing * matching any
// suffix, as --authorization-always-allow-paths does.
func pathMatcher(paths []string) func(string) bool {
	return func(p string) bool {
		for _, allowed := range paths {
			if prefix, ok := strings.CutSuffix(allowed, "*"); ok && strings.HasPrefix(p, prefix) || p == allowed {
				return true
			}
		}
		return false
	}
}

// ClientCABundle is the PEM bundle of the CAs whose client certificates
// identify callers, current at the time of the call; nil if none.
func (a *Access) ClientCABundle() []byte {
	if a.clientCA == nil {
		return nil
	}
	return a.clientCA.CurrentCABundleContent()
}

// Run keeps client CAs read from files or the cluster up to date until ctx
// is done.
func (a *Access) Run(ctx context.Context) {
	if runner, ok := a.clientCA.(dynamiccertificates.ControllerRunner); ok {
		runner.Run(ctx, 1)
	}
}

// Open reports whether anyone may read and reset.
func (a *Access) Open() bool { return a.open }

// firstOpinion asks each authorizer in turn; the first that allows or
// denies decides.
type firstOpinion []authorizer.UnconditionalAuthorizer

func (f firstOpinion) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	var errs []error
	for _, a := range f {
		d, reason, err := a.Authorize(ctx, attrs)
		if err != nil {
			errs = append(errs, err)
		}
		if d != authorizer.DecisionNoOpinion {
			return d, reason, err
		}
	}
	return authorizer.DecisionNoOpinion, "", errors.Join(errs...)
}

// groupAuthorizer allows reads to read and reset groups and resets to reset
// groups, on Sunset's resources and on non-resource paths (/metrics, the
// page, discovery). It has no opinion on anything else.
type groupAuthorizer struct {
	read, reset sets.Set[string]
}

// readVerbs are what `get`, `list` and a Table ask for.
var readVerbs = []string{"get", "list", "watch"}

func (g groupAuthorizer) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	u := attrs.GetUser()
	if u == nil {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if attrs.IsResourceRequest() && attrs.GetAPIGroup() != "sunset.dev" {
		return authorizer.DecisionNoOpinion, "", nil
	}
	groups := u.GetGroups()
	inAny := func(s sets.Set[string]) bool { return slices.ContainsFunc(groups, s.Has) }
	verb := attrs.GetVerb()
	switch {
	case slices.Contains(readVerbs, verb) && (inAny(g.read) || inAny(g.reset)):
		return authorizer.DecisionAllow, "", nil
	case verb == "delete" && attrs.IsResourceRequest() && inAny(g.reset):
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, fmt.Sprintf("%q is in none of the groups allowed to %s (read: %v, reset: %v)",
		u.GetName(), verb, sets.List(g.read), sets.List(g.reset)), nil
}
