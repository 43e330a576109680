//go:build tools

// Package tools pins the kube-apiserver, kube-controller-manager and etcd
// that `make e2e` builds, and the kubectl .ci/run builds where the machine
// has none.
package tools

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
