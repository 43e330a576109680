package selfsigned

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// caPEM makes a CA for owner at now, as a replica's cert dir would hold it.
func caPEM(t *testing.T, owner string, now time.Time) []byte {
	t.Helper()
	p, err := Ensure(Options{Dir: t.TempDir(), Owner: owner, Now: clock(now)})
	require.NoError(t, err)
	return p.CAPEM
}

func commonNames(t *testing.T, bundle []byte) []string {
	t.Helper()
	var out []string
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return out
		}
		c, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		out = append(out, c.Subject.CommonName)
	}
}

// Replicas share one bundle: each CA once, a replica's new CA replacing
// its old one, expired CAs and anything that is not a certificate
// dropped, in one order whoever writes.
func TestMergeBundle(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	zero, one := caPEM(t, "sunset-0", now), caPEM(t, "sunset-1", now)

	b, err := MergeBundle(nil, one, now)
	require.NoError(t, err)
	require.Equal(t, one, b)
	b, err = MergeBundle(b, zero, now)
	require.NoError(t, err)
	require.Equal(t, append(append([]byte{}, zero...), one...), b, "sorted by owner")
	again, err := MergeBundle(b, one, now)
	require.NoError(t, err)
	require.Equal(t, b, again, "nothing new: the same bytes")
	other, err := MergeBundle(one, zero, now)
	require.NoError(t, err)
	require.Equal(t, b, other, "the same CAs make the same bytes whoever merges")

	newZero := caPEM(t, "sunset-0", now.Add(time.Hour))
	b, err = MergeBundle(b, newZero, now.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, append(append([]byte{}, newZero...), one...), b, "sunset-0's new CA replaces its old one")

	garbage := append([]byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"), one...)
	b, err = MergeBundle(garbage, zero, now)
	require.NoError(t, err)
	require.Equal(t, []string{"sunset-ca@sunset-0", "sunset-ca@sunset-1"}, commonNames(t, b))

	b, err = MergeBundle(one, zero, now.Add(CAValidity+time.Hour))
	require.NoError(t, err)
	require.Equal(t, []string{"sunset-ca@sunset-0"}, commonNames(t, b), "sunset-1's CA has ended")

	_, err = MergeBundle(nil, append(zero, one...), now)
	require.EqualError(t, err, "the CA to publish must be one PEM certificate")
}

func TestParseSecretRef(t *testing.T) {
	ref, err := ParseSecretRef("sunset/sunset-ca")
	require.NoError(t, err)
	require.Equal(t, SecretRef{Namespace: "sunset", Name: "sunset-ca"}, ref)
	require.Equal(t, "sunset/sunset-ca", ref.String())
	for in, want := range map[string]string{
		"sunset-ca":        `"sunset-ca" is not namespace/name (for example sunset/sunset-ca)`,
		"a/b/c":            `"a/b/c" is not namespace/name (for example sunset/sunset-ca)`,
		"Sunset/sunset-ca": `namespace "Sunset": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		"sunset/":          `name "": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
	} {
		_, err := ParseSecretRef(in)
		require.EqualError(t, err, want, in)
	}
}
