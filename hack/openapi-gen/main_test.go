package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/gengo/v2/types"
)

// The checked-in api/generated/openapi/zz_generated.openapi.go is what the generator writes
// from the types as they are: a change to a type of the API, or to its doc
// comment, needs `make generate`.
func TestGeneratedOpenAPIIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("parsing the API's packages takes half a minute; make test checks the generated file")
	}
	dir := t.TempDir()
	require.NoError(t, generate(dir))
	want, err := os.ReadFile(filepath.Join(dir, outputFile))
	require.NoError(t, err)
	checkedIn := filepath.Join("..", "..", filepath.FromSlash(outputDir), outputFile)
	got, err := os.ReadFile(checkedIn)
	require.NoError(t, err)
	if string(got) == string(want) {
		return
	}
	wantLines, gotLines := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range min(len(wantLines), len(gotLines)) {
		if wantLines[i] != gotLines[i] {
			t.Fatalf("%s/%s is stale: run make generate. First difference, line %d:\ngenerated:  %s\nchecked in: %s", outputDir, outputFile, i+1, wantLines[i], gotLines[i])
		}
	}
	t.Fatalf("%s/%s is stale: run make generate. The generated file has %d lines, the checked-in one %d", outputDir, outputFile, len(wantLines), len(gotLines))
}

// A root that names no type says what to do.
func TestMissingRootIsNamed(t *testing.T) {
	_, err := reachable(types.Universe{}, []string{typesPackage}, []types.Name{{Package: typesPackage, Name: "NoSuchKind"}})
	require.EqualError(t, err, "github.com/kube-sunset/sunset/api/v1 declares no type NoSuchKind: remove it from roots in hack/openapi-gen/main.go, or name the type it became")
}
