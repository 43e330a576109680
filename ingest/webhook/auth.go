package webhook

import (
	"crypto/subtle"
	"crypto/x509"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
)

// Binding is the one apiserver a credential may post as.
type Binding struct {
	Cluster, Node string
}

func (b Binding) String() string { return b.Cluster + "/" + b.Node }

// Tokens maps bearer tokens to the apiserver each belongs to.
type Tokens map[string]Binding

// LoadTokenFile reads a token file in kube-apiserver's --token-auth-file
// format: CSV lines of token, user, uid and optionally "groups". The user
// column names the apiserver the token belongs to, "<cluster>/<node>", or
// "<node>" for defaultCluster; uid and groups are read and ignored, so one
// file can serve both. Every problem is reported with its line.
func LoadTokenFile(path, defaultCluster string) (Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("webhook-token-auth-file: %w", err)
	}
	defer func() { _ = f.Close() }()
	tokens, err := ParseTokens(f, defaultCluster)
	if err != nil {
		return nil, fmt.Errorf("webhook-token-auth-file %s: %w", path, err)
	}
	return tokens, nil
}

// ParseTokens reads the token file format of LoadTokenFile. Error messages
// never quote a token.
func ParseTokens(r io.Reader, defaultCluster string) (Tokens, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	tokens := Tokens{}
	lines := map[string]int{}
	var errs []error
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				// Not err itself: its text can quote the line.
				return nil, fmt.Errorf("line %d: not valid CSV (%v)", pe.Line, pe.Err) //nolint:errorlint // Not wrapped: its text can quote the line.
			}
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) < 3 {
			errs = append(errs, fmt.Errorf("line %d: %d columns; want token,user,uid[,\"groups\"] as in kube-apiserver's --token-auth-file", line, len(rec)))
			continue
		}
		token, user := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
		if token == "" {
			errs = append(errs, fmt.Errorf("line %d: the token is empty", line))
			continue
		}
		b, err := parseBinding(user, defaultCluster)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", line, err))
			continue
		}
		if first, dup := lines[token]; dup {
			errs = append(errs, fmt.Errorf("line %d: the same token as line %d; each apiserver needs its own", line, first))
			continue
		}
		lines[token] = line
		tokens[token] = b
	}
	if len(tokens) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("holds no token"))
	}
	return tokens, errors.Join(errs...)
}

// parseBinding reads the user column: "<cluster>/<node>" or "<node>".
func parseBinding(user, defaultCluster string) (Binding, error) {
	b := Binding{Cluster: defaultCluster, Node: user}
	if c, n, ok := strings.Cut(user, "/"); ok {
		b = Binding{Cluster: c, Node: n}
	}
	for _, f := range []struct{ name, v string }{{"cluster", b.Cluster}, {"node", b.Node}} {
		switch {
		case f.v == "":
			return b, fmt.Errorf("the user column must name the apiserver as <cluster>/<node> or <node>; the %s is empty", f.name)
		case len(f.v) > maxNameBytes, strings.ContainsAny(f.v, "/ "):
			return b, fmt.Errorf("the %s name in the user column must be at most %d bytes, without spaces or further slashes", f.name, maxNameBytes)
		}
	}
	return b, nil
}

// credential is who a webhook request authenticated as.
type credential struct {
	// token is the binding of a token from the token file; nil for the
	// single unbound token or no token.
	token *Binding
	// cert is the verified client certificate, if any.
	cert *x509.Certificate
}

// authenticate checks the configured credentials. It returns a message
// saying what is missing or wrong, without echoing what was sent.
func (h *Handler) authenticate(r *http.Request) (credential, string) {
	var c credential
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		c.cert = r.TLS.VerifiedChains[0][0]
	}
	if h.requireCert && c.cert == nil {
		return c, "a client certificate signed by tls-client-ca-file is required (set client-certificate in the webhook kubeconfig)"
	}
	if len(h.token) == 0 && h.tokens == nil {
		return c, ""
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && len(h.token) > 0 && subtle.ConstantTimeCompare([]byte(got), h.token) == 1 {
		return c, ""
	}
	if b, found := h.tokens[got]; ok && found {
		c.token = &b
		return c, ""
	}
	switch {
	case h.tokens == nil:
		return c, "a valid bearer token is required (set token in the webhook kubeconfig to the contents of webhook-token-file)"
	case len(h.token) == 0:
		return c, "a valid bearer token is required (set token in the webhook kubeconfig to this apiserver's token in webhook-token-auth-file)"
	}
	return c, "a valid bearer token is required (set token in the webhook kubeconfig to this apiserver's token in webhook-token-auth-file, or to the contents of webhook-token-file)"
}

// authorize checks that the credential may post as the origin's cluster and
// node, and fills in what the path leaves out: a bound token names both, a
// client certificate's common name the node. pathNode and pathCluster say
// what the path named. It returns a message when the credential belongs to
// another apiserver.
//
// A client certificate follows the profile of kube-apiserver's own client
// certificates, with the cluster as organization: O=<cluster>, CN=<node>
// (the node may also be a DNS, IP or URI subject alternative name). A
// path that names a cluster needs that cluster among the certificate's
// organizations, so that the certificate of a node of one cluster cannot
// post as the node of the same name in another; a certificate without O
// never posts to such a path, the default cluster's name included. A path
// without a cluster posts to default-cluster and checks the node only
// (and, when the certificate has organizations, that default-cluster is
// one of them).
func (c credential) authorize(cluster, node string, pathNode, pathCluster bool) (string, string, string) {
	if c.token != nil {
		if !pathNode {
			cluster, node = c.token.Cluster, c.token.Node
		}
		if cluster != c.token.Cluster || node != c.token.Node {
			return cluster, node, fmt.Sprintf("this token belongs to apiserver %s and may not post as %s/%s; fix the URL path in its webhook kubeconfig (/audit/webhook/%s)",
				c.token, cluster, node, c.token)
		}
	}
	if c.cert != nil {
		if node == "" {
			node = c.cert.Subject.CommonName
		} else if !certNames(c.cert, node) {
			return cluster, node, fmt.Sprintf("the client certificate (CN %q) does not name node %q in its common name or subject alternative names; fix the URL path or issue the apiserver a certificate for its node",
				countkey.Truncate(c.cert.Subject.CommonName, maxNameBytes), node)
		}
		// A certificate that names clusters (O) posts only for one of
		// them, the default cluster included: dev's O=dev certificate
		// may not post to /audit/webhook/master-0 and count for prod.
		// One without O, bound to a node only, posts where no cluster is
		// named.
		orgs := c.cert.Subject.Organization
		if pathCluster && len(orgs) == 0 {
			// Said apart from the case below: the certificate is not
			// another cluster's, it was issued without one.
			cn, n := countkey.Truncate(c.cert.Subject.CommonName, maxNameBytes), countkey.Truncate(node, maxNameBytes)
			cl := countkey.Truncate(cluster, maxNameBytes)
			return cluster, node, fmt.Sprintf("the client certificate (CN %q) names no cluster (it has no O), so it may not post to a path that names cluster %q: "+
				"issue the apiserver a certificate with O=%s and CN=%s, or post to /audit/webhook/%s, which counts for the default cluster",
				cn, cl, cl, n, n)
		}
		if (pathCluster || len(orgs) > 0) && !slices.Contains(orgs, cluster) {
			return cluster, node, fmt.Sprintf("the client certificate (CN %q) is not issued for cluster %q: it needs O=%s and CN=%s (a path without a cluster posts to the default cluster); fix the URL path or issue the apiserver such a certificate",
				countkey.Truncate(c.cert.Subject.CommonName, maxNameBytes), countkey.Truncate(cluster, maxNameBytes),
				countkey.Truncate(cluster, maxNameBytes), countkey.Truncate(node, maxNameBytes))
		}
	}
	return cluster, node, ""
}

// share names the credential whose share of the batch slots a batch
// counts against (pace.go): a bound token's apiserver, a client
// certificate's subject, else, with one token for every apiserver or
// none, the apiserver the batch is from.
func (c credential) share(o classify.Origin) string {
	switch {
	case c.token != nil:
		return "token " + c.token.String()
	case c.cert != nil:
		return "certificate " + c.cert.Subject.String()
	}
	return "apiserver " + o.Cluster + "/" + o.Node
}

// certNames reports whether the certificate's common name or one of its
// DNS, IP or URI subject alternative names is node.
func certNames(cert *x509.Certificate, node string) bool {
	if cert.Subject.CommonName == node {
		return true
	}
	for _, n := range cert.DNSNames {
		if n == node {
			return true
		}
	}
	for _, ip := range cert.IPAddresses {
		if ip.String() == node {
			return true
		}
	}
	for _, u := range cert.URIs {
		if u.String() == node {
			return true
		}
	}
	return false
}
