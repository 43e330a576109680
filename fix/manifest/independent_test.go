package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/convert"
)

// An independent check of the goldens: each rewritten manifest, read as
// the apiserver's clients read it (apimachinery's document reader and
// sigs.k8s.io/yaml), holds field for field what convert.Table.Convert
// makes of the original's objects; an object the table does not move is
// as it was.
func TestGoldensAreTheConversion(t *testing.T) {
	cat, err := catalog.New(nil)
	require.NoError(t, err)
	table := convert.New(cat)
	moves := fixer(t, false).Moves
	checked := 0
	for _, rel := range []string{
		"manifests/commented.yaml", "manifests/crlf.yaml", "manifests/cronjob.json", "manifests/list.yaml",
		"kustomize/cronjob.yaml", "kustomize/cronjob-patch.yaml", "kustomize/ingress.yaml", "kustomize/ingress-patch.yaml", "kustomize/rbac.yaml",
	} {
		t.Run(rel, func(t *testing.T) {
			orig := objectsOf(t, filepath.Join("testdata", "tree", rel))
			got := objectsOf(t, filepath.Join("testdata", "golden", rel))
			require.Len(t, got, len(orig), rel)
			for i, o := range orig {
				want := o
				av, _ := o["apiVersion"].(string)
				kind, _ := o["kind"].(string)
				if moves(av, kind) {
					converted, err := table.Convert(o)
					require.NoError(t, err, "%s object %d", rel, i+1)
					want = viaJSON(t, converted)
					checked++
				}
				require.Equal(t, want, got[i], "%s object %d", rel, i+1)
			}
		})
	}
	require.Equal(t, 11, checked)
}

// objectsOf reads every object of a manifest file, a List's items one by
// one.
func objectsOf(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []map[string]any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if strings.TrimSpace(string(doc)) == "" {
			continue
		}
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal(doc, &obj), path)
		if obj == nil {
			continue
		}
		if items, ok := obj["items"].([]any); ok && strings.HasSuffix(obj["kind"].(string), "List") {
			for _, it := range items {
				out = append(out, it.(map[string]any))
			}
			continue
		}
		out = append(out, obj)
	}
}

// viaJSON is v as JSON decodes it, numbers as float64, as
// sigs.k8s.io/yaml reads the goldens.
func viaJSON(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}
