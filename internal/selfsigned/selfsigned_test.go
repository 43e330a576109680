package selfsigned

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// dirFiles reads the four files of a cert dir.
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range []string{CAFile, CAKey, CertFile, KeyFile} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		out[name] = raw
	}
	return out
}

func clock(t time.Time) func() time.Time { return func() time.Time { return t } }

// A new cert dir gets a CA and a serving certificate for the loopback
// names and the hosts asked for; a second Ensure keeps every byte.
func TestEnsureMakesThenKeeps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	o := Options{Dir: dir, Hosts: []string{"sunset.sunset.svc", "10.96.0.80"}, Owner: "sunset-0", Now: clock(now)}
	p, err := Ensure(o)
	require.NoError(t, err)
	require.Equal(t, "sunset-ca@sunset-0", p.CA.Subject.CommonName)
	require.True(t, p.CA.IsCA)
	require.Equal(t, now.Add(CAValidity), p.CA.NotAfter)
	require.Equal(t, now.Add(CertValidity), p.Leaf.NotAfter)
	require.Equal(t, now.Add(CertValidity-RenewBefore), p.RenewAt())
	require.Equal(t, []string{"localhost", "sunset.sunset.svc"}, p.Leaf.DNSNames)
	var ips []string
	for _, ip := range p.Leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	require.Equal(t, []string{"127.0.0.1", "::1", "10.96.0.80"}, ips)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(p.CAPEM))
	for _, host := range []string{"localhost", "127.0.0.1", "::1", "sunset.sunset.svc", "10.96.0.80"} {
		_, err := p.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: now})
		require.NoError(t, err, host)
	}
	for name, mode := range map[string]os.FileMode{CAKey: 0o600, KeyFile: 0o600, CAFile: 0o644, CertFile: 0o644} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, mode, fi.Mode().Perm(), name)
	}
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	first := dirFiles(t, dir)
	require.Equal(t, first[CAFile], p.CAPEM)
	// A day later, and a day before the renewal: the same bytes.
	for _, at := range []time.Time{now.Add(24 * time.Hour), p.RenewAt().Add(-24 * time.Hour)} {
		o.Now = clock(at)
		again, err := Ensure(o)
		require.NoError(t, err)
		require.Equal(t, first, dirFiles(t, dir), "kept at %s", at)
		require.Equal(t, p.Leaf.Raw, again.Leaf.Raw)
	}
}

// Within RenewBefore of its end, or for a host it lacks, the serving
// certificate is made again under the same CA; the CA itself is made again
// only once it would end before a new serving certificate.
func TestEnsureRenews(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	o := Options{Dir: dir, Owner: "sunset-0", Now: clock(now)}
	p, err := Ensure(o)
	require.NoError(t, err)
	first := dirFiles(t, dir)

	o.Now = clock(p.RenewAt().Add(time.Minute))
	renewed, err := Ensure(o)
	require.NoError(t, err)
	second := dirFiles(t, dir)
	require.Equal(t, first[CAFile], second[CAFile], "the same CA")
	require.Equal(t, first[CAKey], second[CAKey])
	require.NotEqual(t, first[CertFile], second[CertFile], "a new serving certificate")
	require.NotEqual(t, first[KeyFile], second[KeyFile], "and key")
	require.Equal(t, p.RenewAt().Add(time.Minute).Add(CertValidity), renewed.Leaf.NotAfter)

	o.Hosts = []string{"sunset.other.svc"}
	withHost, err := Ensure(o)
	require.NoError(t, err)
	require.Equal(t, []string{"localhost", "sunset.other.svc"}, withHost.Leaf.DNSNames)
	require.Equal(t, first[CAFile], dirFiles(t, dir)[CAFile])

	o.Now = clock(p.CA.NotAfter.Add(-CertValidity).Add(time.Minute))
	newCA, err := Ensure(o)
	require.NoError(t, err)
	require.NotEqual(t, p.CA.Raw, newCA.CA.Raw, "a CA that would end first is made again")
	require.NoError(t, newCA.Leaf.CheckSignatureFrom(newCA.CA), "with a serving certificate it signed")
}

// Files that do not belong together are replaced, never served: a key
// that is not the certificate's, a CA that did not sign it, garbage.
func TestEnsureReplacesWhatDoesNotFit(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for name, spoil := range map[string]func(dir string, other map[string][]byte){
		"garbage key":      func(dir string, _ map[string][]byte) { writeTestFile(t, dir, KeyFile, []byte("not a key")) },
		"another CA":       func(dir string, other map[string][]byte) { writeTestFile(t, dir, CAFile, other[CAFile]) },
		"another CA's key": func(dir string, other map[string][]byte) { writeTestFile(t, dir, CAKey, other[CAKey]) },
		"another's cert": func(dir string, other map[string][]byte) {
			writeTestFile(t, dir, CertFile, other[CertFile])
			writeTestFile(t, dir, KeyFile, other[KeyFile])
		},
		"missing cert": func(dir string, _ map[string][]byte) { require.NoError(t, os.Remove(filepath.Join(dir, CertFile))) },
	} {
		t.Run(name, func(t *testing.T) {
			otherDir := t.TempDir()
			_, err := Ensure(Options{Dir: otherDir, Owner: "other", Now: clock(now)})
			require.NoError(t, err)
			dir := t.TempDir()
			_, err = Ensure(Options{Dir: dir, Owner: "sunset-0", Now: clock(now)})
			require.NoError(t, err)
			spoil(dir, dirFiles(t, otherDir))
			p, err := Ensure(Options{Dir: dir, Owner: "sunset-0", Now: clock(now)})
			require.NoError(t, err)
			require.NoError(t, p.Leaf.CheckSignatureFrom(p.CA))
			require.Equal(t, dirFiles(t, dir)[CAFile], p.CAPEM)
			_, err = Ensure(Options{Dir: dir, Owner: "sunset-0", Now: clock(now)})
			require.NoError(t, err)
		})
	}
}

func writeTestFile(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
}

// While Sunset runs, the keeper renews at RenewAt and serves the new
// certificate from the next handshake on, with the CA unchanged (so no
// Renewed token), and a new CA once the old one nears its end.
func TestKeeperRenewsWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, err := NewKeeper(Options{Dir: t.TempDir(), Owner: "sunset-0"})
		require.NoError(t, err)
		first := k.Current()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { k.Run(ctx); close(done) }()

		time.Sleep(time.Until(first.RenewAt()) + time.Second)
		synctest.Wait()
		second := k.Current()
		require.NotEqual(t, first.Leaf.Raw, second.Leaf.Raw)
		require.Equal(t, first.CAPEM, second.CAPEM)
		served, err := k.GetCertificate(nil)
		require.NoError(t, err)
		require.Equal(t, second.Leaf.Raw, served.Leaf.Raw)
		require.Empty(t, k.Renewed(), "the CA did not change")

		// The last serving certificate under the old CA ends by the CA's
		// end, so it is renewed, under a new CA, RenewBefore that.
		time.Sleep(time.Until(first.CA.NotAfter.Add(-RenewBefore)) + time.Second)
		synctest.Wait()
		require.NotEqual(t, first.CAPEM, k.Current().CAPEM)
		require.Len(t, k.Renewed(), 1, "a new CA to publish")
		cancel()
		<-done
	})
}
