package scan_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/convert"
	"github.com/kube-sunset/sunset/scan"
	"github.com/kube-sunset/sunset/scan/report"
)

// TestReplacementIsTheConversionTable judges one object of every catalog
// entry at a target that removes them all, and checks that each finding's
// replacement is the conversion table's, with or without a table given.
func TestReplacementIsTheConversionTable(t *testing.T) {
	cat, err := catalog.New(nil)
	require.NoError(t, err)
	table := convert.New(cat)
	withReplacement := 0
	for _, given := range []*convert.Table{table, nil} {
		t.Run(fmt.Sprintf("table given %t", given != nil), func(t *testing.T) {
			j := scan.Judge{Catalog: cat, Target: catalog.MustParseRelease("1.99"), Conversions: given}
			withReplacement = 0
			for _, c := range table.Conversions() {
				findings := j.Judge(scan.Object{APIVersion: c.From.APIVersion(), Kind: c.From.Kind, Name: "x"}, report.Origin{Path: "x.yaml"})
				require.Len(t, findings, 1, c.From.String())
				want := ""
				if c.HasReplacement() {
					want = c.To.String()
					withReplacement++
				}
				require.Equal(t, want, findings[0].Replacement, c.From.String())
			}
		})
	}
	// 96 entries, of which 35 name no replacement: the 33 package
	// convert's noReplacement lists, policy/v1beta1 PodSecurityPolicy and
	// extensions/v1beta1 PodSecurityPolicy, whose replacement is that one.
	require.Equal(t, 61, withReplacement)
}
