package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// oneConfigMap is the ConfigMap the getter returns next, or err.
type oneConfigMap struct {
	cm  *corev1.ConfigMap
	err error
}

func (o *oneConfigMap) Get(context.Context, string, metav1.GetOptions) (*corev1.ConfigMap, error) {
	return o.cm, o.err
}

func TestABadConfigMapKeepsTheLastGoodList(t *testing.T) {
	cms := &oneConfigMap{cm: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "sunset", Name: "exemptions"}, Data: map[string]string{
		"exemptions": "- api: cronjobs.v1beta1.batch\n  user: ci\n  reason: CHG-1\n  expires: 2026-12-01\n"}}}
	file := sunsetv1.Exemption{API: "leases.v1beta1.coordination.k8s.io", Reason: "r", Expires: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
	src := &exemptionSource{static: []sunsetv1.Exemption{file}, cms: cms, name: "exemptions", log: zerolog.Nop()}
	src.reload(context.Background())
	good := []sunsetv1.Exemption{file, {API: "cronjobs.v1beta1.batch", UserName: "ci", Reason: "CHG-1", Expires: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}}
	require.Equal(t, good, src.Exemptions())
	require.NoError(t, src.Problem())

	cms.cm.Data["exemptions"] = "- api: cronjobs.v1beta1.batch\n  user: ci\n  expires: 2026-12-01\n"
	src.reload(context.Background())
	require.Equal(t, good, src.Exemptions())
	require.EqualError(t, src.Problem(), "exemptions-configmap: keeping the last good list of 1: ConfigMap sunset/exemptions: exemptions: [0]: reason is required: say why the calls may go on, and who fixes them")

	cms.cm.Data["exemptions"] = "- api: cronjobs.v1beta1.batch\n  owner: ci\n"
	src.reload(context.Background())
	require.ErrorContains(t, src.Problem(), `unknown field "owner"`)

	cms.err = errors.New("configmaps \"exemptions\" is forbidden")
	src.reload(context.Background())
	require.Equal(t, good, src.Exemptions())
	require.EqualError(t, src.Problem(), "exemptions-configmap: keeping the last good list of 1: configmaps \"exemptions\" is forbidden")

	cms.err, cms.cm.Data["exemptions"] = nil, "[]"
	src.reload(context.Background())
	require.Equal(t, []sunsetv1.Exemption{file}, src.Exemptions())
	require.NoError(t, src.Problem())
}
