package helmrelease

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-sunset/sunset/scan"
)

// The bounds of a release record, the scan's (scan/release.go): Helm keeps
// a record under 1 MiB of base64 of gzip, real records inflate to a few
// MiB, and a record is data anyone allowed to write Secrets in a namespace
// controls, so inflating stops at the bound.
const (
	maxRecordSize  = 3 << 20
	maxReleaseSize = 32 << 20
)

// gzipMagic is the start of a record Helm's driver inflates: gzip's
// magic and its deflate method.
var gzipMagic = []byte{0x1f, 0x8b, 0x08}

// listPageSize is how many records one list request asks for: records are
// up to 1 MiB each.
const listPageSize = 20

// Labels and annotations of a backup. A backup carries no owner=helm
// label, so Helm never reads it as a revision.
const (
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	LabelBackupRelease  = "sunset.dev/backup-of-release"
	LabelBackupRevision = "sunset.dev/backup-of-revision"
	// AnnotationBackupOf is the name of the record the backup copies.
	AnnotationBackupOf = "sunset.dev/backup-of"
	// AnnotationOriginalLabels are the copied record's labels, as JSON:
	// restoring the record puts them back.
	AnnotationOriginalLabels = "sunset.dev/original-labels"
)

// record is one stored object of a release store: a revision, or a backup.
type record struct {
	namespace, name string
	// resourceVersion is the object's, as read.
	resourceVersion string
	labels          map[string]string
	// data is the value of the "release" key, as stored (base64 of gzip
	// of JSON).
	data []byte
	// raw is the whole object, copied into a backup.
	raw any
}

// store is one of Helm's storage drivers, with the reads and the backup
// writes Helm's driver does not do.
type store interface {
	// kind is the resource's kind, as Helm's HELM_DRIVER names it.
	kind() string
	list(ctx context.Context, namespace string, o metav1.ListOptions) ([]record, string, error)
	get(ctx context.Context, namespace, name string) (record, error)
	createBackup(ctx context.Context, namespace string, of record, name string, labels, annotations map[string]string) error
}

type secrets struct{ kube kubernetes.Interface }

func (secrets) kind() string { return "Secret" }

func secretRecord(s *corev1.Secret) record {
	return record{namespace: s.Namespace, name: s.Name, resourceVersion: s.ResourceVersion, labels: s.Labels, data: s.Data["release"], raw: s}
}

func (s secrets) list(ctx context.Context, namespace string, o metav1.ListOptions) ([]record, string, error) {
	l, err := s.kube.CoreV1().Secrets(namespace).List(ctx, o)
	if err != nil {
		return nil, "", err
	}
	out := make([]record, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, secretRecord(&l.Items[i]))
	}
	return out, l.Continue, nil
}

func (s secrets) get(ctx context.Context, namespace, name string) (record, error) {
	obj, err := s.kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return record{}, err
	}
	return secretRecord(obj), nil
}

func (s secrets) createBackup(ctx context.Context, namespace string, of record, name string, labels, annotations map[string]string) error {
	orig := of.raw.(*corev1.Secret)
	b := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, Annotations: annotations},
		Type: orig.Type, Data: maps.Clone(orig.Data)}
	_, err := s.kube.CoreV1().Secrets(namespace).Create(ctx, b, metav1.CreateOptions{})
	return err
}

type configMaps struct{ kube kubernetes.Interface }

func (configMaps) kind() string { return "ConfigMap" }

func configMapRecord(c *corev1.ConfigMap) record {
	return record{namespace: c.Namespace, name: c.Name, resourceVersion: c.ResourceVersion, labels: c.Labels, data: []byte(c.Data["release"]), raw: c}
}

func (c configMaps) list(ctx context.Context, namespace string, o metav1.ListOptions) ([]record, string, error) {
	l, err := c.kube.CoreV1().ConfigMaps(namespace).List(ctx, o)
	if err != nil {
		return nil, "", err
	}
	out := make([]record, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, configMapRecord(&l.Items[i]))
	}
	return out, l.Continue, nil
}

func (c configMaps) get(ctx context.Context, namespace, name string) (record, error) {
	obj, err := c.kube.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return record{}, err
	}
	return configMapRecord(obj), nil
}

func (c configMaps) createBackup(ctx context.Context, namespace string, of record, name string, labels, annotations map[string]string) error {
	orig := of.raw.(*corev1.ConfigMap)
	b := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, Annotations: annotations},
		Data: maps.Clone(orig.Data), BinaryData: maps.Clone(orig.BinaryData)}
	_, err := c.kube.CoreV1().ConfigMaps(namespace).Create(ctx, b, metav1.CreateOptions{})
	return err
}

// sameContent reports whether a backup holds the record of: the same
// data, byte for byte.
func sameContent(backup, of record) bool {
	switch b := backup.raw.(type) {
	case *corev1.Secret:
		o, ok := of.raw.(*corev1.Secret)
		return ok && b.Type == o.Type && maps.EqualFunc(b.Data, o.Data, bytes.Equal)
	case *corev1.ConfigMap:
		o, ok := of.raw.(*corev1.ConfigMap)
		return ok && maps.Equal(b.Data, o.Data) && maps.EqualFunc(b.BinaryData, o.BinaryData, bytes.Equal)
	}
	return false
}

// decodeRecord reads a release record as Helm's drivers write it, base64
// of gzipped JSON (plain JSON too, as Helm accepts), within the scan's
// bounds: Helm's driver inflates without a bound.
func (f *Fixer) decodeRecord(data []byte) (Revision, error) {
	if len(data) > maxRecordSize {
		return Revision{}, &scan.TooLargeError{What: "the release record", Limit: maxRecordSize}
	}
	b, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil {
		return Revision{}, fmt.Errorf("the release record is not base64: %w", err)
	}
	var r io.Reader = bytes.NewReader(b)
	// Helm's driver (pkg/storage/driver decodeRelease) inflates only what
	// is longer than its 3-byte gzip magic and starts with it; anything
	// else it reads as JSON.
	if len(b) > len(gzipMagic) && bytes.HasPrefix(b, gzipMagic) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return Revision{}, fmt.Errorf("the release record: %w", err)
		}
		r = zr
	}
	bounded := scan.NewBoundedReader(r, maxReleaseSize)
	rev, err := f.Records.Decode(bounded)
	if err != nil {
		if bounded.Over() {
			return Revision{}, &scan.TooLargeError{What: "the release record, decompressed,", Limit: maxReleaseSize}
		}
		return Revision{}, fmt.Errorf("the release record is not a Helm release: %w", err)
	}
	return rev, nil
}
