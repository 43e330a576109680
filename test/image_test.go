package test

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/hack/ociimage"
)

// What the test links into its binary and asks the image to be labelled with.
const (
	imageVersion  = "v9.9.9-imagetest"
	imageRevision = "0123456789abcdef0123456789abcdef01234567"
)

// The image built from a static binary is what the Dockerfile describes:
// sunset serve as the nonroot user, with its data directory, and nothing
// else. The archive is read back with go-containerregistry's own layout and
// tarball readers, not with the code that wrote it.
func TestImage(t *testing.T) {
	work := t.TempDir()
	binary := buildStaticSunset(t, work)
	caBundle := filepath.Join(work, "ca-certificates.crt")
	require.NoError(t, os.WriteFile(caBundle, []byte("-----BEGIN CERTIFICATE-----\nTUlJ\n-----END CERTIFICATE-----\n"), 0o644))
	opts := ociimage.Options{Binary: binary, Version: imageVersion, Revision: imageRevision, Arch: runtime.GOARCH, CACertificates: caBundle}
	archive := filepath.Join(work, "sunset-image.tar")
	digest := writeImageArchive(t, opts, archive)

	t.Run("the archive holds the nonroot sunset image", func(t *testing.T) {
		dir := untar(t, archive)
		index, err := layout.ImageIndexFromPath(dir)
		require.NoError(t, err)
		manifest, err := index.IndexManifest()
		require.NoError(t, err)
		require.Len(t, manifest.Manifests, 1)
		desc := manifest.Manifests[0]
		require.Equal(t, digest, desc.Digest)
		require.Equal(t, "localhost/sunset:"+imageVersion, desc.Annotations["org.opencontainers.image.ref.name"])
		img, err := index.Image(desc.Digest)
		require.NoError(t, err)
		require.NoError(t, validate.Image(img), "blobs must match the digests and sizes that name them")

		cfg, err := img.ConfigFile()
		require.NoError(t, err)
		require.Equal(t, "linux", cfg.OS)
		require.Equal(t, runtime.GOARCH, cfg.Architecture)
		require.Equal(t, time.Unix(0, 0).UTC(), cfg.Created.UTC())
		require.Equal(t, "65532:65532", cfg.Config.User)
		require.Equal(t, []string{"/usr/local/bin/sunset", "serve"}, cfg.Config.Entrypoint)
		require.Empty(t, cfg.Config.Cmd)
		require.Equal(t, []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SUNSET_DATA_DIR=/var/lib/sunset"}, cfg.Config.Env)
		require.Equal(t, "/var/lib/sunset", cfg.Config.WorkingDir)
		require.Equal(t, map[string]struct{}{"8080/tcp": {}}, cfg.Config.ExposedPorts)
		require.Equal(t, map[string]string{
			"org.opencontainers.image.source":   "https://github.com/kube-sunset/sunset",
			"org.opencontainers.image.title":    "sunset",
			"org.opencontainers.image.version":  imageVersion,
			"org.opencontainers.image.revision": imageRevision,
		}, cfg.Config.Labels)

		layers, err := img.Layers()
		require.NoError(t, err)
		require.Len(t, layers, 1)
		files := readLayer(t, layers[0])
		var listing []string
		for _, f := range files {
			listing = append(listing, f.describe())
		}
		require.Equal(t, []string{
			"etc/ dir 0755 0:0",
			"etc/group file 0644 0:0",
			"etc/nsswitch.conf file 0644 0:0",
			"etc/passwd file 0644 0:0",
			"etc/ssl/ dir 0755 0:0",
			"etc/ssl/certs/ dir 0755 0:0",
			"etc/ssl/certs/ca-certificates.crt file 0644 0:0",
			"home/ dir 0755 0:0",
			"home/nonroot/ dir 0700 65532:65532",
			"root/ dir 0700 0:0",
			"tmp/ dir 1777 0:0",
			"usr/ dir 0755 0:0",
			"usr/local/ dir 0755 0:0",
			"usr/local/bin/ dir 0755 0:0",
			"usr/local/bin/sunset file 0755 0:0",
			"var/ dir 0755 0:0",
			"var/lib/ dir 0755 0:0",
			"var/lib/sunset/ dir 0755 65532:65532",
		}, listing)
		content := map[string][]byte{}
		for _, f := range files {
			require.True(t, f.ModTime.Equal(time.Unix(0, 0)), "%s: mtime %s", f.Name, f.ModTime)
			content[f.Name] = f.content
		}
		require.Contains(t, strings.Split(string(content["etc/passwd"]), "\n"), "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin")
		require.Contains(t, strings.Split(string(content["etc/group"]), "\n"), "nonroot:x:65532:")
		ca, err := os.ReadFile(caBundle)
		require.NoError(t, err)
		require.Equal(t, ca, content["etc/ssl/certs/ca-certificates.crt"])

		// The binary in the image is the one built, and runs on its own.
		extracted := filepath.Join(t.TempDir(), "sunset")
		require.NoError(t, os.WriteFile(extracted, content["usr/local/bin/sunset"], 0o755))
		out, err := exec.Command(extracted, "version").CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "sunset "+imageVersion+" (revision "+imageRevision)
	})

	t.Run("docker load reads the same image from manifest.json", func(t *testing.T) {
		img, err := tarball.ImageFromPath(archive, nil)
		require.NoError(t, err)
		cfg, err := img.ConfigFile()
		require.NoError(t, err)
		require.Equal(t, "65532:65532", cfg.Config.User)
		layers, err := img.Layers()
		require.NoError(t, err)
		require.Len(t, layers, 1)
		files := readLayer(t, layers[0])
		require.Len(t, files, 18)
	})

	t.Run("the same binary gives the same digest and bytes", func(t *testing.T) {
		again := filepath.Join(t.TempDir(), "again.tar")
		require.Equal(t, digest, writeImageArchive(t, opts, again))
		require.Equal(t, fileSHA256(t, archive), fileSHA256(t, again))
	})

	t.Run("bad inputs fail clearly", func(t *testing.T) {
		missing := opts
		missing.Binary = filepath.Join(t.TempDir(), "no-such-sunset")
		_, err := ociimage.Build(missing)
		require.ErrorIs(t, err, fs.ErrNotExist)
		require.ErrorContains(t, err, "reading the sunset binary (run `make build` first?)")
		require.ErrorContains(t, err, missing.Binary)

		notELF := opts
		notELF.Binary = caBundle
		_, err = ociimage.Build(notELF)
		require.ErrorContains(t, err, "not a linux executable")

		otherArch := opts
		otherArch.Arch = "arm64"
		if runtime.GOARCH == "arm64" {
			otherArch.Arch = "amd64"
		}
		_, err = ociimage.Build(otherArch)
		require.ErrorContains(t, err, "not "+otherArch.Arch+" (set GOARCH="+otherArch.Arch)

		unknownArch := opts
		unknownArch.Arch = "pdp11"
		_, err = ociimage.Build(unknownArch)
		require.ErrorContains(t, err, `architecture "pdp11" is not one of amd64, arm64`)

		noCA := opts
		noCA.CACertificates = filepath.Join(t.TempDir(), "ca.crt")
		_, err = ociimage.Build(noCA)
		require.ErrorIs(t, err, fs.ErrNotExist)
		require.ErrorContains(t, err, "reading CA certificates")
		require.ErrorContains(t, err, noCA.CACertificates)

		notPEM := opts
		notPEM.CACertificates = filepath.Join(work, "empty.crt")
		require.NoError(t, os.WriteFile(notPEM.CACertificates, nil, 0o644))
		_, err = ociimage.Build(notPEM)
		require.ErrorContains(t, err, "empty.crt holds no PEM certificate")

		// A binary that needs a loader cannot start in an image without one.
		if ls, err := exec.LookPath("ls"); err == nil && isDynamicELF(ls) {
			dynamic := opts
			dynamic.Binary = ls
			_, err = ociimage.Build(dynamic)
			require.ErrorContains(t, err, "dynamically linked; build it with CGO_ENABLED=0")
		}

		_, err = ociimage.DefaultName("1.0+build.5")
		require.ErrorContains(t, err, `version "1.0+build.5" cannot be an image tag`)
	})
}

// The Dockerfile's final stage is the image that ociimage builds: same
// base kind, user, binary, entrypoint, data directory and port.
func TestDockerfileMatchesImageBuilder(t *testing.T) {
	stages := dockerfileStages(t, "../Dockerfile")
	require.GreaterOrEqual(t, len(stages), 2, "a builder stage and the final stage")
	builder := strings.Join(stages[0], "\n")
	require.Contains(t, builder, "CGO_ENABLED=0")
	require.Contains(t, builder, "-trimpath")
	require.Contains(t, builder, "-X main.version=$VERSION -X main.revision=$REVISION")

	final := map[string][]string{}
	for _, line := range stages[len(stages)-1] {
		instruction, args, _ := strings.Cut(line, " ")
		final[strings.ToUpper(instruction)] = append(final[strings.ToUpper(instruction)], strings.TrimSpace(args))
	}
	require.Equal(t, []string{"gcr.io/distroless/static-debian12:nonroot"}, final["FROM"])
	require.Equal(t, []string{ociimage.User}, final["USER"])
	require.Len(t, final["ENTRYPOINT"], 1)
	var entrypoint []string
	require.NoError(t, json.Unmarshal([]byte(final["ENTRYPOINT"][0]), &entrypoint), "ENTRYPOINT must be exec form")
	require.Equal(t, ociimage.Entrypoint(), entrypoint)
	require.Contains(t, final["ENV"], "SUNSET_DATA_DIR="+ociimage.DataDir)
	require.Equal(t, []string{ociimage.DataDir}, final["WORKDIR"])
	require.Equal(t, []string{fmt.Sprint(ociimage.Port)}, final["EXPOSE"])
	var copiedTo []string
	for _, c := range final["COPY"] {
		fields := strings.Fields(c)
		copiedTo = append(copiedTo, fields[len(fields)-1])
		if fields[len(fields)-1] == ociimage.DataDir {
			require.Contains(t, fields, fmt.Sprintf("--chown=%d:%d", ociimage.UID, ociimage.GID), "the data directory belongs to nonroot")
		}
	}
	require.ElementsMatch(t, []string{ociimage.BinaryPath, ociimage.DataDir}, copiedTo)
}

// buildStaticSunset builds cmd/sunset as `make build` does, with the test's
// version, into dir.
func buildStaticSunset(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "sunset")
	build := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X main.version="+imageVersion+" -X main.revision="+imageRevision,
		"-o", bin, "../cmd/sunset")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building a static sunset: %s", out)
	return bin
}

// writeImageArchive builds the image and writes its archive to path, and
// returns the image's digest.
func writeImageArchive(t *testing.T, opts ociimage.Options, path string) v1.Hash {
	t.Helper()
	img, err := ociimage.Build(opts)
	require.NoError(t, err)
	name, err := ociimage.DefaultName(opts.Version)
	require.NoError(t, err)
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, ociimage.WriteArchive(f, img, name))
	require.NoError(t, f.Close())
	digest, err := img.Digest()
	require.NoError(t, err)
	return digest
}

// untar extracts an archive of regular files and directories.
func untar(t *testing.T, archive string) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		require.NoError(t, err)
		require.True(t, filepath.IsLocal(hdr.Name), "archive entry %q", hdr.Name)
		target := filepath.Join(dir, hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(target, 0o755))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o755))
			content, err := io.ReadAll(tr)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(target, content, 0o644))
		default:
			t.Fatalf("archive entry %q has type %c", hdr.Name, hdr.Typeflag)
		}
	}
}

// layerFile is one entry of a layer, with its content.
type layerFile struct {
	*tar.Header
	content []byte
}

func (f layerFile) describe() string {
	kind := map[byte]string{tar.TypeDir: "dir", tar.TypeReg: "file"}[f.Typeflag]
	if kind == "" {
		kind = fmt.Sprintf("type %c", f.Typeflag)
	}
	return fmt.Sprintf("%s %s %04o %d:%d", f.Name, kind, f.Mode, f.Uid, f.Gid)
}

func readLayer(t *testing.T, layer v1.Layer) []layerFile {
	t.Helper()
	rc, err := layer.Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	var files []layerFile
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		require.NoError(t, err)
		content, err := io.ReadAll(tr)
		require.NoError(t, err)
		files = append(files, layerFile{Header: hdr, content: content})
	}
}

// dockerfileStages returns each stage's instructions, continuation lines
// joined and comments dropped.
func dockerfileStages(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var stages [][]string
	var pending string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && pending == "") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			pending += cont + " "
			continue
		}
		line = strings.Join(strings.Fields(pending+line), " ")
		pending = ""
		if strings.HasPrefix(strings.ToUpper(line), "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], line)
		}
	}
	require.NoError(t, sc.Err())
	return stages
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	content, err := os.ReadFile(path)
	require.NoError(t, err)
	return fmt.Sprintf("%x", sha256.Sum256(content))
}

func isDynamicELF(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}
