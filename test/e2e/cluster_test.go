package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The files kube-apiserver is given, exactly as shipped.
const (
	shippedPolicy  = "../../deploy/audit-policy.yaml"
	shippedWebhook = "../../deploy/audit-webhook.kubeconfig"
	shippedFlags   = "../../deploy/control-plane/kube-apiserver-flags.txt"
)

// What the apiserver calls itself when it posts to Sunset.
const (
	clusterName = "e2e"
	nodeName    = "apiserver-0"
)

// The users of the static token file, with their groups.
var users = map[string][]string{
	"admin":   {"system:masters"},
	"alice":   {"developers"},
	"bob":     {"developers"},
	"carol":   {"storage-admins"},
	"dave":    {"developers"},
	"erin":    {"developers"},
	"mallory": {"visitors"},
	"victor":  {"auditors"},
}

// sunsetServer is `sunset serve` with TLS, a webhook token and client
// certificate verification, restartable on the same port and data.
type sunsetServer struct {
	bin, dataDir, url string
	args              []string
	proc              *process
	client            *http.Client
}

// startSunset starts Sunset on a free port, with a new webhook token,
// and returns it ready, with the token.
func startSunset(t *testing.T, bin string, p *pki) (*sunsetServer, string) {
	t.Helper()
	token := randomToken(t)
	cert, key := p.issue(t, "sunset", "sunset", true)
	s := newSunsetOn(t, bin, p, token, freePort(t), cert, key)
	s.start(t)
	return s, token
}

// newSunsetOn is a Sunset to start on a chosen port, with its serving
// certificate and more flags.
func newSunsetOn(t *testing.T, bin string, p *pki, token string, port int, cert, key string, flags ...string) *sunsetServer {
	t.Helper()
	s := &sunsetServer{
		bin:     bin,
		dataDir: t.TempDir(),
		url:     "https://127.0.0.1:" + strconv.Itoa(port),
		client:  p.httpsClient(),
	}
	s.args = append([]string{"serve",
		"--data-dir=" + s.dataDir,
		"--listen=127.0.0.1:" + strconv.Itoa(port),
		"--tls-cert-file=" + cert,
		"--tls-key-file=" + key,
		"--tls-client-ca-file=" + p.CAFile,
		"--webhook-token-file=" + p.write(t, "webhook-token", []byte(token+"\n")),
		"--log-format=json",
	}, flags...)
	return s
}

func (s *sunsetServer) start(t *testing.T) {
	t.Helper()
	s.proc = start(t, "sunset", s.bin, s.args...)
	waitHTTP(t, s.proc, s.client, s.url+"/-/ready", "", time.Minute)
}

// webhookKubeconfig fills in the shipped webhook kubeconfig: the server
// address, the CA and the credentials, nothing else, so the test proves the
// shipped file works.
func webhookKubeconfig(t *testing.T, p *pki, server, token string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(shippedWebhook)
	if err != nil {
		t.Fatalf("loading %s: %v", shippedWebhook, err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		t.Fatalf("%s: current context %q is not defined", shippedWebhook, cfg.CurrentContext)
	}
	cluster, user := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
	if cluster == nil || user == nil {
		t.Fatalf("%s: context %q names a missing cluster or user", shippedWebhook, cfg.CurrentContext)
	}
	cluster.Server = server
	cluster.CertificateAuthority = p.CAFile
	// Sunset's profile for an apiserver's certificate: O=<cluster>,
	// CN=<node>, matching the cluster and node of the webhook path.
	cert, key := p.issue(t, "apiserver-webhook-client", nodeName, false, clusterName)
	user.Token = token
	user.ClientCertificate, user.ClientKey = cert, key
	path := filepath.Join(t.TempDir(), "audit-webhook.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// apiserver is a running kube-apiserver and how to reach it as each user.
type apiserver struct {
	proc     *process
	url      string
	caFile   string
	tokens   map[string]string
	auditLog string
}

// shippedAPIServerFlags reads the kube-apiserver flags the control-plane
// recipe ships, with the two file paths pointed at this test's files and a
// shorter batch wait to keep the test quick.
func shippedAPIServerFlags(t *testing.T, policy, webhookConfig string) []string {
	t.Helper()
	b, err := os.ReadFile(shippedFlags)
	if err != nil {
		t.Fatal(err)
	}
	override := map[string]string{
		"--audit-policy-file":            policy,
		"--audit-webhook-config-file":    webhookConfig,
		"--audit-webhook-batch-max-wait": "1s",
	}
	var flags []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "--") {
			continue
		}
		name, _, _ := strings.Cut(line, "=")
		if v, ok := override[name]; ok {
			line = name + "=" + v
			delete(override, name)
		}
		flags = append(flags, line)
	}
	if len(override) > 0 {
		t.Fatalf("%s lacks %v", shippedFlags, override)
	}
	return flags
}

// startAPIServer starts kube-apiserver with the shipped flags, the test's
// files and extra flags.
func startAPIServer(t *testing.T, bin string, db etcd, p *pki, webhookConfig string, extra ...string) *apiserver {
	t.Helper()
	policy, err := filepath.Abs(shippedPolicy)
	if err != nil {
		t.Fatal(err)
	}
	a := &apiserver{caFile: p.CAFile, tokens: map[string]string{}, auditLog: filepath.Join(t.TempDir(), "audit.log")}
	var tokenFile strings.Builder
	for name, groups := range users {
		a.tokens[name] = "token-" + name
		fmt.Fprintf(&tokenFile, "%s,%s,uid-%s,%q\n", a.tokens[name], name, name, strings.Join(groups, ","))
	}
	cert, key := p.issue(t, "apiserver", "kube-apiserver", true)
	saKey := p.serviceAccountKey(t)
	port := freePort(t)
	a.url = "https://127.0.0.1:" + strconv.Itoa(port)
	args := append(shippedAPIServerFlags(t, policy, webhookConfig),
		"--etcd-servers="+db.url,
		"--etcd-cafile="+p.CAFile,
		"--etcd-certfile="+db.certFile,
		"--etcd-keyfile="+db.keyFile,
		"--bind-address=127.0.0.1",
		// The address the apiserver writes into the kubernetes Endpoints,
		// which may not be a loopback address. Nothing dials it here.
		"--advertise-address=192.0.2.10",
		"--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+cert,
		"--tls-private-key-file="+key,
		"--client-ca-file="+p.CAFile,
		"--token-auth-file="+p.write(t, "tokens.csv", []byte(tokenFile.String())),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saKey,
		"--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--runtime-config=api/all=true",
		// The same events, written to a file: the ground truth.
		"--audit-log-path="+a.auditLog,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--cert-dir="+t.TempDir(),
	)
	args = append(args, extra...)
	a.proc = start(t, "kube-apiserver", bin, args...)
	waitHTTP(t, a.proc, p.httpsClient(), a.url+"/readyz", a.tokens["admin"], 2*time.Minute)
	return a
}

// as returns a clientset that calls the apiserver as user, with its own user
// agent.
func (a *apiserver) as(t *testing.T, user, userAgent string) *kubernetes.Clientset {
	t.Helper()
	return a.clientFor(t, a.tokens[user], userAgent)
}

func (a *apiserver) config(token, userAgent string) *rest.Config {
	return &rest.Config{
		Host:            a.url,
		BearerToken:     token,
		UserAgent:       userAgent,
		TLSClientConfig: rest.TLSClientConfig{CAFile: a.caFile},
		QPS:             -1,
	}
}

func (a *apiserver) clientFor(t *testing.T, token, userAgent string) *kubernetes.Clientset {
	t.Helper()
	c, err := kubernetes.NewForConfig(a.config(token, userAgent))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
