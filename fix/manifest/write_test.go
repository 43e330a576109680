package manifest

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A rewritten file keeps its owner, group and mode, setgid and sticky
// bits among it; a read-only file is listed and left as it was.
func TestWriteKeepsOwnerAndMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another owner takes root")
	}
	cronJob := "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: j}\nspec:\n  schedule: \"* * * * *\"\n  jobTemplate: {spec: {template: {spec: {containers: [{name: a, image: b}], restartPolicy: Never}}}}\n"
	dir := writeTree(t, map[string]string{"owned.yaml": cronJob, "readonly.yaml": cronJob})
	owned, readonly := filepath.Join(dir, "owned.yaml"), filepath.Join(dir, "readonly.yaml")
	require.NoError(t, os.Chown(owned, 65534, 65533))
	require.NoError(t, os.Chmod(owned, 0o640|fs.ModeSetgid|fs.ModeSticky))
	require.NoError(t, os.Chmod(readonly, 0o444))

	res := fixer(t, false).Fix(context.Background(), []string{dir})
	rewritten, notRewritten := relative(dir, res)
	require.Equal(t, []string{"owned.yaml line 1: CronJob j batch/v1beta1 -> batch/v1"}, rewritten)
	require.Equal(t, []string{"readonly.yaml: read-only (mode -r--r--r--): not rewritten; make it writable and run the fix again, or move it by hand"}, notRewritten)

	info, err := os.Stat(owned)
	require.NoError(t, err)
	st := info.Sys().(*syscall.Stat_t)
	require.Equal(t, [2]uint32{65534, 65533}, [2]uint32{st.Uid, st.Gid})
	require.Equal(t, 0o640|fs.ModeSetgid|fs.ModeSticky, info.Mode())
	require.Equal(t, "apiVersion: batch/v1\n"+cronJob[len("apiVersion: batch/v1beta1\n"):], readFile(t, owned))
	require.Equal(t, cronJob, readFile(t, readonly))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2, "no temporary file is left")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
