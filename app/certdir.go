package app

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-sunset/sunset/internal/selfsigned"
)

// newCertKeeper makes or loads the certificate of cert-dir.
func (a *App) newCertKeeper() (*selfsigned.Keeper, error) {
	owner, err := os.Hostname()
	if err != nil {
		owner = "sunset"
	}
	return selfsigned.NewKeeper(selfsigned.Options{Dir: a.cfg.CertDirPath(), Hosts: a.cfg.CertHosts, Owner: owner, Logger: a.log})
}

// publishCAEvery is how often the published CA is looked at again.
const publishCAEvery = time.Hour

// caPublisher publishes the CA of cert-dir in publish-ca-secret, through
// authentication-kubeconfig or the in-cluster config.
func (a *App) caPublisher() (*selfsigned.Publisher, error) {
	ref, err := selfsigned.ParseSecretRef(a.cfg.PublishCASecret)
	if err != nil {
		return nil, fmt.Errorf("publish-ca-secret: %w", err)
	}
	var cfg *rest.Config
	if path := a.cfg.AuthenticationKubeconfig; path != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("publish-ca-secret: reaching kube-apiserver: %w", err)
	}
	cfg.UserAgent = "sunset"
	client, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("publish-ca-secret: %w", err)
	}
	return &selfsigned.Publisher{Keeper: a.certs, Secrets: client, Ref: ref, Logger: a.log, Every: publishCAEvery}, nil
}

// runCerts renews the certificate of cert-dir and keeps its CA published
// until ctx is done.
func (a *App) runCerts(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.certs.Run(ctx)
	}()
	if a.publisher != nil {
		a.publisher.Run(ctx)
	}
	<-done
	return nil
}
