package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

func labelsFor(st sunsetv1.APIRequestCountStatus) map[string]string {
	l := map[string]string{sunsetv1.LabelState: sunsetv1.StateDeprecated}
	if st.Removed {
		l[sunsetv1.LabelState] = sunsetv1.StateRemoved
	}
	if st.RemovedInRelease != "" {
		l[sunsetv1.LabelRemovedInRelease] = st.RemovedInRelease
	}
	return l
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: sunsetv1.APIVersion, Kind: kind}
}
