// Package helmstore reads and writes Helm release records with the Helm
// SDK itself: its release type (helm.sh/helm/v4/pkg/release/v1) and its
// storage drivers (Secrets and ConfigMaps), so that what package
// helmrelease writes is Helm's own format. It is the only part of the fix
// that links the SDK: cmd/sunset passes it in, as it passes the chart
// renderer, so that package cli and package helmrelease do not.
package helmstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/kube-sunset/sunset/fix/helmrelease"
)

// Records is the Helm SDK's helmrelease.Records.
type Records struct{}

var _ helmrelease.Records = Records{}

// Decode reads a release's JSON into Helm's release type, as Helm's
// drivers do: the whole of it by json.Unmarshal, which refuses trailing
// data, so that a record Helm skips is not read here either.
func (Records) Decode(r io.Reader) (helmrelease.Revision, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return helmrelease.Revision{}, err
	}
	var rel rspb.Release
	if err := json.Unmarshal(b, &rel); err != nil {
		return helmrelease.Revision{}, err
	}
	if rel.Info == nil {
		return helmrelease.Revision{}, errors.New("it has no info")
	}
	rev := helmrelease.Revision{Name: rel.Name, Version: rel.Version, Status: rel.Info.Status.String(), Manifest: rel.Manifest, Release: &rel}
	for _, h := range rel.Hooks {
		rev.Hooks = append(rev.Hooks, helmrelease.Hook{Path: h.Path, Manifest: h.Manifest})
	}
	return rev, nil
}

// Create writes rev as a new record, as Helm's storage creates one.
func (Records) Create(kube kubernetes.Interface, kind, namespace, key string, rev helmrelease.Revision) error {
	d, rel, err := prepare(kube, kind, namespace, rev)
	if err != nil {
		return err
	}
	if err := d.Create(key, rel); err != nil {
		if errors.Is(err, driver.ErrReleaseExists) {
			return helmrelease.ErrExists
		}
		return err
	}
	return nil
}

// Update replaces a record, as Helm's storage updates one, provided it is
// still at resourceVersion. Helm's driver updates unconditionally; the
// client it is given sets the resourceVersion on its update, so the
// apiserver refuses it when the record was written meanwhile.
func (Records) Update(kube kubernetes.Interface, kind, namespace, key, resourceVersion string, rev helmrelease.Revision) error {
	if resourceVersion == "" {
		return errors.New("helmstore: an update needs the resourceVersion the record was read at")
	}
	d, rel, err := prepare(conditional{Interface: kube, resourceVersion: resourceVersion}, kind, namespace, rev)
	if err != nil {
		return err
	}
	if err := d.Update(key, rel); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("%w: %w", helmrelease.ErrChanged, err)
		}
		return err
	}
	return nil
}

// conditional is a clientset whose Secret and ConfigMap updates are made
// at resourceVersion.
type conditional struct {
	kubernetes.Interface
	resourceVersion string
}

func (c conditional) CoreV1() typedcorev1.CoreV1Interface {
	return conditionalCore{CoreV1Interface: c.Interface.CoreV1(), resourceVersion: c.resourceVersion}
}

type conditionalCore struct {
	typedcorev1.CoreV1Interface
	resourceVersion string
}

func (c conditionalCore) Secrets(namespace string) typedcorev1.SecretInterface {
	return conditionalSecrets{SecretInterface: c.CoreV1Interface.Secrets(namespace), resourceVersion: c.resourceVersion}
}

func (c conditionalCore) ConfigMaps(namespace string) typedcorev1.ConfigMapInterface {
	return conditionalConfigMaps{ConfigMapInterface: c.CoreV1Interface.ConfigMaps(namespace), resourceVersion: c.resourceVersion}
}

type conditionalSecrets struct {
	typedcorev1.SecretInterface
	resourceVersion string
}

func (c conditionalSecrets) Update(ctx context.Context, s *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	s = s.DeepCopy()
	s.ResourceVersion = c.resourceVersion
	return c.SecretInterface.Update(ctx, s, o)
}

type conditionalConfigMaps struct {
	typedcorev1.ConfigMapInterface
	resourceVersion string
}

func (c conditionalConfigMaps) Update(ctx context.Context, m *corev1.ConfigMap, o metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	m = m.DeepCopy()
	m.ResourceVersion = c.resourceVersion
	return c.ConfigMapInterface.Update(ctx, m, o)
}

// prepare is a copy of the release rev was decoded from, with rev's
// fields, and the driver of its store.
func prepare(kube kubernetes.Interface, kind, namespace string, rev helmrelease.Revision) (driver.Driver, *rspb.Release, error) {
	orig, ok := rev.Release.(*rspb.Release)
	if !ok || len(rev.Hooks) != len(orig.Hooks) {
		return nil, nil, fmt.Errorf("helmstore: revision %d of %s was not decoded by helmstore", rev.Version, rev.Name)
	}
	rel := *orig
	info := *orig.Info
	info.Status = rcommon.Status(rev.Status)
	if rev.Description != "" {
		info.Description = rev.Description
	}
	if !rev.LastDeployed.IsZero() {
		info.LastDeployed = rev.LastDeployed
		// A new revision is not a rollback, whatever the one it copies.
		info.RollbackRevision = 0
	}
	rel.Info, rel.Version, rel.Manifest, rel.Labels = &info, rev.Version, rev.Manifest, maps.Clone(rev.Labels)
	rel.Hooks = make([]*rspb.Hook, len(orig.Hooks))
	for i, h := range orig.Hooks {
		hook := *h
		hook.Manifest = rev.Hooks[i].Manifest
		rel.Hooks[i] = &hook
	}
	var d interface {
		driver.Driver
		SetLogger(slog.Handler)
	}
	switch kind {
	case "Secret":
		d = driver.NewSecrets(kube.CoreV1().Secrets(namespace))
	case "ConfigMap":
		d = driver.NewConfigMaps(kube.CoreV1().ConfigMaps(namespace))
	default:
		return nil, nil, fmt.Errorf("helmstore: no Helm driver keeps records in objects of kind %s", kind)
	}
	// The drivers log through slog's default logger unless told
	// otherwise.
	d.SetLogger(slog.DiscardHandler)
	return d, &rel, nil
}
