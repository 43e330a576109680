package tlsutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/testpki"
)

func TestLoadCertPool(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	bundle := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(bundle, ca.PEM, 0o600))
	pool, err := LoadCertPool(bundle)
	require.NoError(t, err)
	require.True(t, pool.Equal(ca.Pool()))

	missing := filepath.Join(dir, "missing.crt")
	_, err = LoadCertPool(missing)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, missing)

	empty := filepath.Join(dir, "empty.crt")
	require.NoError(t, os.WriteFile(empty, []byte("not a certificate\n"), 0o600))
	_, err = LoadCertPool(empty)
	require.ErrorIs(t, err, ErrNoCertificates)
	require.EqualError(t, err, empty+" holds no PEM certificate")
}
