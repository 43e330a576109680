package webhook

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseTokens(t *testing.T) {
	tokens, err := ParseTokens(strings.NewReader(
		"tok-a,prod/master-0,uid-a,\"system:masters,other\"\n"+
			"tok-b, master-1 ,uid-b\n"+
			"\n"+
			"tok-c,prod/master-2,uid-c,\n"), "default")
	require.NoError(t, err)
	require.Equal(t, Tokens{
		"tok-a": {Cluster: "prod", Node: "master-0"},
		"tok-b": {Cluster: "default", Node: "master-1"},
		"tok-c": {Cluster: "prod", Node: "master-2"},
	}, tokens)

	// Every problem, by line, never quoting a token.
	_, err = ParseTokens(strings.NewReader(
		"secret-1,prod/master-0\n"+
			",prod/master-1,uid\n"+
			"secret-3,/master-3,uid\n"+
			"secret-4,prod/,uid\n"+
			"secret-5,a/b/c,uid\n"+
			"secret-6,prod/master-6,uid\n"+
			"secret-6,prod/master-7,uid\n"), "default")
	require.EqualError(t, err, strings.Join([]string{
		`line 1: 2 columns; want token,user,uid[,"groups"] as in kube-apiserver's --token-auth-file`,
		"line 2: the token is empty",
		"line 3: the user column must name the apiserver as <cluster>/<node> or <node>; the cluster is empty",
		"line 4: the user column must name the apiserver as <cluster>/<node> or <node>; the node is empty",
		"line 5: the node name in the user column must be at most 253 bytes, without spaces or further slashes",
		"line 7: the same token as line 6; each apiserver needs its own",
	}, "\n"))
	require.NotContains(t, err.Error(), "secret")

	_, err = ParseTokens(strings.NewReader("\n\n"), "default")
	require.EqualError(t, err, "holds no token")
	_, err = ParseTokens(strings.NewReader("secret,\"prod/master-0,uid\n"), "default")
	require.EqualError(t, err, `line 1: not valid CSV (extraneous or missing " in quoted-field)`)
}
