// Package ociimage builds the Sunset container image without a container
// engine, so that a machine with only Go (a developer's, CI's) can produce
// the image that the Dockerfile describes and check what is inside it.
//
// The image has no base: a single layer holds the static sunset binary, the
// CA certificates that its TLS clients need, and the files of a distroless
// "nonroot" image (passwd, group, /tmp, a home). Every timestamp is fixed, so
// the same binary and certificates always give the same digest.
//
// The constants below are the image's contract: the Dockerfile is tested
// against them, and deployment files may rely on them.
package ociimage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// BinaryPath is where the sunset binary lives in the image.
	BinaryPath = "/usr/local/bin/sunset"
	// DataDir is the badger data directory; a volume belongs here.
	DataDir = "/var/lib/sunset"
	// UID and GID are distroless's "nonroot" user and group.
	UID = 65532
	GID = 65532
	// User is the image's user: numeric, so that Kubernetes' runAsNonRoot
	// can verify it without reading /etc/passwd.
	User = "65532:65532"
	// Port is the port of `sunset serve`'s default listen address,
	// 127.0.0.1:8080; in a container it needs --listen=:8080 (the
	// manifests pass it).
	Port = 8080
	// HostCACertificates is the build host's CA bundle (Debian's path),
	// copied into the image at the same path, where Go looks first.
	HostCACertificates = "/etc/ssl/certs/ca-certificates.crt"
	// Source is the repository named in the image's labels.
	Source = "https://github.com/kube-sunset/sunset"
	// Repository is the local name an archive gives the image when loaded.
	Repository = "localhost/sunset"
)

// Entrypoint is the command the image runs: the server.
func Entrypoint() []string { return []string{BinaryPath, "serve"} }

// Options says what goes into the image.
type Options struct {
	// Binary is the path of a static (CGO_ENABLED=0) linux sunset binary,
	// as `make build` writes it to bin/sunset.
	Binary string
	// Version and Revision go into the image's labels; they should be the
	// ones the binary was linked with.
	Version  string
	Revision string
	// Arch is the GOARCH the binary was built for: amd64, arm64, ...
	Arch string
	// CACertificates is the PEM bundle to ship; empty means
	// HostCACertificates.
	CACertificates string
	// Created is the time stamped on the image and on every file; the zero
	// value means the Unix epoch, so that builds are reproducible.
	Created time.Time
}

// Build returns the image described by opts. The image uses OCI media types
// and is kept in memory: the binary is a few tens of megabytes.
func Build(opts Options) (v1.Image, error) {
	if opts.Binary == "" {
		return nil, errors.New("ociimage: no binary given")
	}
	if opts.Arch == "" {
		return nil, errors.New("ociimage: no architecture given")
	}
	if opts.Version == "" {
		return nil, errors.New("ociimage: no version given")
	}
	binary, err := os.ReadFile(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("ociimage: reading the sunset binary (run `make build` first?): %w", err)
	}
	if err := checkStaticLinux(binary, opts.Arch); err != nil {
		return nil, fmt.Errorf("ociimage: %s: %w", opts.Binary, err)
	}
	caPath := opts.CACertificates
	if caPath == "" {
		caPath = HostCACertificates
	}
	caBundle, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("ociimage: reading CA certificates (on Debian, apt-get install ca-certificates): %w", err)
	}
	if !bytes.Contains(caBundle, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("ociimage: %s holds no PEM certificate", caPath)
	}
	created := opts.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	created = created.UTC()

	rootfs, err := rootFilesystem(binary, caBundle, created)
	if err != nil {
		return nil, fmt.Errorf("ociimage: writing the layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(rootfs)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("ociimage: compressing the layer: %w", err)
	}

	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "hack/ociimage: sunset binary, CA certificates, nonroot user",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("ociimage: adding the layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("ociimage: reading the config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS = "linux"
	cfg.Architecture = opts.Arch
	cfg.Created = v1.Time{Time: created}
	cfg.Config = v1.Config{
		User:         User,
		Entrypoint:   Entrypoint(),
		Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SUNSET_DATA_DIR=" + DataDir},
		WorkingDir:   DataDir,
		ExposedPorts: map[string]struct{}{fmt.Sprintf("%d/tcp", Port): {}},
		Labels:       labels(opts),
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("ociimage: setting the config: %w", err)
	}
	return img, nil
}

// labels are the OCI annotations that registries and scanners show.
func labels(opts Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.source":  Source,
		"org.opencontainers.image.title":   "sunset",
		"org.opencontainers.image.version": opts.Version,
	}
	if opts.Revision != "" {
		l["org.opencontainers.image.revision"] = opts.Revision
	}
	return l
}
