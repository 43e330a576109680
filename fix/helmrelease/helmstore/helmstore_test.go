package helmstore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/kube-sunset/sunset/fix/helmrelease"
)

// Package helmrelease carries a record's custom labels to the next
// revision by its own list of Helm's: the SDK's.
func TestSystemLabelsAreHelms(t *testing.T) {
	require.Equal(t, driver.GetSystemLabels(), helmrelease.SystemLabels)
}

func TestOnlyWhatItDecodedIsWritten(t *testing.T) {
	err := Records{}.Create(fake.NewClientset(), "Secret", "shop", "sh.helm.release.v1.web.v2", helmrelease.Revision{Name: "web", Version: 2})
	require.EqualError(t, err, "helmstore: revision 2 of web was not decoded by helmstore")

	rev, err := Records{}.Decode(strings.NewReader(`{"name":"web","version":1,"info":{"status":"deployed"}}`))
	require.NoError(t, err)
	err = Records{}.Create(fake.NewClientset(), "Memory", "shop", "sh.helm.release.v1.web.v2", rev)
	require.EqualError(t, err, "helmstore: no Helm driver keeps records in objects of kind Memory")

	_, err = Records{}.Decode(strings.NewReader(`{"name":"web","version":1}`))
	require.EqualError(t, err, "it has no info")
}
