package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The annotations that name the image in index.json. Loaders differ in which
// they read (skopeo the first; containerd and docker the second; podman
// either), so both carry the same full name.
const (
	annotationRefName       = "org.opencontainers.image.ref.name"
	annotationContainerName = "io.containerd.image.name"
)

// DefaultName is the name an archive gives the image when none is chosen:
// Repository tagged with the version.
func DefaultName(version string) (string, error) {
	ref := Repository + ":" + version
	if _, err := name.NewTag(ref, name.StrictValidation); err != nil {
		return "", fmt.Errorf("version %q cannot be an image tag (letters, digits, '_', '.', '-'; at most 128): %w", version, err)
	}
	return ref, nil
}

// WriteArchive writes img to w as an "oci-archive": an OCI image layout
// (oci-layout, index.json, blobs/sha256/...) in a tar, which `podman load`
// and `skopeo copy oci-archive:FILE` read. A Docker manifest.json beside
// index.json lets `docker load` read it too. imageName, such as
// "localhost/sunset:v1.2.3", is the name they give the loaded image.
//
// The tar is written directly rather than through a layout directory so that
// it is byte-for-byte reproducible: fixed order, times and owners.
func WriteArchive(w io.Writer, img v1.Image, imageName string) error {
	if _, err := name.NewTag(imageName, name.StrictValidation); err != nil {
		return fmt.Errorf("ociimage: image name: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("ociimage: reading the config: %w", err)
	}
	mtime := cfg.Created.UTC()

	manifest, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("ociimage: reading the manifest: %w", err)
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	index, err := json.MarshalIndent(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mediaType,
			Size:      int64(len(manifest)),
			Digest:    digest,
			Platform:  &v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture},
			Annotations: map[string]string{
				annotationRefName:       imageName,
				annotationContainerName: imageName,
			},
		}},
	}, "", "  ")
	if err != nil {
		return err
	}

	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("ociimage: reading the config: %w", err)
	}
	configName, err := img.ConfigName()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	layerPaths := make([]string, len(layers))
	for i, layer := range layers {
		h, err := layer.Digest()
		if err != nil {
			return fmt.Errorf("ociimage: layer digest: %w", err)
		}
		layerPaths[i] = blobPath(h)
	}
	// docker load before Docker 25 reads only a Docker archive's
	// manifest.json; it can point into the same blobs, so one file serves
	// both kinds of loader.
	dockerManifest, err := json.Marshal([]struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{{Config: blobPath(configName), RepoTags: []string{imageName}, Layers: layerPaths}})
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	put := func(path string, content []byte) error {
		return writeFile(tw, path, mtime, bytes.NewReader(content), int64(len(content)))
	}
	for _, f := range []struct {
		path    string
		content []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"manifest.json", dockerManifest},
	} {
		if err := put(f.path, f.content); err != nil {
			return err
		}
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return fmt.Errorf("ociimage: %s: %w", dir, err)
		}
	}
	if err := put(blobPath(digest), manifest); err != nil {
		return err
	}
	if err := put(blobPath(configName), rawConfig); err != nil {
		return err
	}
	for _, layer := range layers {
		if err := writeLayer(tw, layer, mtime); err != nil {
			return err
		}
	}
	return tw.Close()
}

func writeLayer(tw *tar.Writer, layer v1.Layer, mtime time.Time) error {
	digest, err := layer.Digest()
	if err != nil {
		return fmt.Errorf("ociimage: layer digest: %w", err)
	}
	size, err := layer.Size()
	if err != nil {
		return fmt.Errorf("ociimage: layer size: %w", err)
	}
	blob, err := layer.Compressed()
	if err != nil {
		return fmt.Errorf("ociimage: layer %s: %w", digest, err)
	}
	defer func() { _ = blob.Close() }()
	return writeFile(tw, blobPath(digest), mtime, blob, size)
}

func writeFile(tw *tar.Writer, path string, mtime time.Time, content io.Reader, size int64) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: 0o644, Size: size, ModTime: mtime, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("ociimage: %s: %w", path, err)
	}
	if _, err := io.Copy(tw, content); err != nil {
		return fmt.Errorf("ociimage: %s: %w", path, err)
	}
	return nil
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
