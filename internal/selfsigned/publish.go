package selfsigned

import (
	"bytes"
	"cmp"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kube-sunset/sunset/internal/backoff"
)

// BundleKey is the Secret's key that holds the CAs: the key cert-manager's
// CA injector reads (cert-manager.io/inject-ca-from-secret) and
// Prometheus Operator's tlsConfig names.
const BundleKey = "ca.crt"

// AllowInjection is the annotation without which cert-manager's CA
// injector refuses to read a Secret it did not write.
const AllowInjection = "cert-manager.io/allow-direct-injection"

// SecretRef names the Secret the CA is published in.
type SecretRef struct{ Namespace, Name string }

func (r SecretRef) String() string { return r.Namespace + "/" + r.Name }

// ParseSecretRef reads namespace/name.
func ParseSecretRef(s string) (SecretRef, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || strings.Contains(name, "/") {
		return SecretRef{}, fmt.Errorf("%q is not namespace/name (for example sunset/sunset-ca)", s)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return SecretRef{}, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return SecretRef{}, fmt.Errorf("name %q: %s", name, strings.Join(errs, "; "))
	}
	return SecretRef{Namespace: ns, Name: name}, nil
}

// MergeBundle returns bundle with ca in it, for replicas that share one
// Secret: each replica's CA once, its older CAs (the same common name)
// and every expired CA dropped, sorted by common name and start so that
// the same CAs always make the same bytes. What in bundle is not a
// certificate is dropped too: only CAs made here belong there.
func MergeBundle(bundle, ca []byte, now time.Time) ([]byte, error) {
	mine, err := parseCerts(ca)
	if err != nil || len(mine) != 1 {
		return nil, fmt.Errorf("the CA to publish must be one PEM certificate")
	}
	out := []*x509.Certificate{mine[0]}
	rest := bundle
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil || block.Type != "CERTIFICATE" || now.After(c.NotAfter) ||
			c.Subject.CommonName == mine[0].Subject.CommonName || slices.ContainsFunc(out, c.Equal) {
			continue
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *x509.Certificate) int {
		return cmp.Or(strings.Compare(a.Subject.CommonName, b.Subject.CommonName), a.NotBefore.Compare(b.NotBefore))
	})
	var b bytes.Buffer
	for _, c := range out {
		b.Write(pemCert(c.Raw))
	}
	return b.Bytes(), nil
}

func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out, nil
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}

// publishAttempts bounds the retries when other replicas write the Secret
// at the same time.
const publishAttempts = 5

// Publish keeps ca in the BundleKey of the Secret ref, creating the
// Secret when it is missing, and reports whether it wrote. Replicas that
// publish at once each add their own CA: a write that lost the race (409)
// reads the Secret again and merges anew. The verbs it needs on that
// Secret are get, create and update.
func Publish(ctx context.Context, secrets corev1client.SecretsGetter, ref SecretRef, ca []byte, now time.Time) (bool, error) {
	api := secrets.Secrets(ref.Namespace)
	for range publishAttempts {
		s, err := api.Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			bundle, err := MergeBundle(nil, ca, now)
			if err != nil {
				return false, err
			}
			_, err = api.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace,
					Labels:      map[string]string{"app.kubernetes.io/name": "sunset", "app.kubernetes.io/component": "ca"},
					Annotations: map[string]string{AllowInjection: "true"}},
				Type: corev1.SecretTypeOpaque,
				Data: map[string][]byte{BundleKey: bundle},
			}, metav1.CreateOptions{FieldManager: "sunset"})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return false, fmt.Errorf("creating Secret %s: %w", ref, err)
			}
			return true, nil
		case err != nil:
			return false, fmt.Errorf("reading Secret %s: %w", ref, err)
		}
		bundle, err := MergeBundle(s.Data[BundleKey], ca, now)
		if err != nil {
			return false, err
		}
		if bytes.Equal(bundle, s.Data[BundleKey]) && s.Annotations[AllowInjection] == "true" {
			return false, nil
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Data[BundleKey], s.Annotations[AllowInjection] = bundle, "true"
		_, err = api.Update(ctx, s, metav1.UpdateOptions{FieldManager: "sunset"})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("updating Secret %s: %w", ref, err)
		}
		return true, nil
	}
	return false, fmt.Errorf("updating Secret %s: other writers changed it %d times in a row", ref, publishAttempts)
}

// Publisher keeps a Keeper's CA published while Sunset runs.
type Publisher struct {
	Keeper  *Keeper
	Secrets corev1client.SecretsGetter
	Ref     SecretRef
	Logger  zerolog.Logger
	// Every is how often the Secret is looked at again, so that a deleted
	// Secret or a CA another writer dropped comes back.
	Every time.Duration
}

// Run publishes at once, again after each renewal and every p.Every,
// until ctx is done. A failure (kube-apiserver unreachable, RBAC) is
// logged with what to do and retried with backoff, from 1s to 5m;
// serving goes on meanwhile.
func (p *Publisher) Run(ctx context.Context) {
	log := p.Logger.With().Str("component", "publish-ca").Str("secret", p.Ref.String()).Logger()
	retry := backoff.New(time.Second, 5*time.Minute)
	for {
		wrote, err := Publish(ctx, p.Secrets, p.Ref, p.Keeper.Current().CAPEM, time.Now())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn().Err(err).Dur("retry_in", retry.Peek()).
				Msg("cannot publish the CA: its clients (the APIService, Prometheus) cannot verify Sunset until it is; " +
					"grant get, create and update on this Secret to Sunset's service account, or set publish-ca-secret to empty and publish ca.crt of cert-dir yourself")
			if !retry.Wait(ctx) {
				return
			}
			continue
		}
		retry.Reset()
		if wrote {
			log.Info().Msg("published the CA")
		}
		t := time.NewTimer(p.Every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-p.Keeper.Renewed():
			t.Stop()
		}
	}
}
