// Command mkimage writes the Sunset container image as an OCI archive,
// without a container engine: `make build` first, then
//
//	go run ./hack/mkimage -binary bin/sunset -output bin/sunset-image.tar \
//	    -version $(VERSION) -revision $(REVISION) -arch amd64
//
// The archive loads with `podman load -i`, `docker load -i` or
// `skopeo copy oci-archive:FILE ...`. SOURCE_DATE_EPOCH, when set, is the
// image's timestamp; otherwise it is the Unix epoch, so that the same binary
// always gives the same digest.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/kube-sunset/sunset/hack/ociimage"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	binary := fs.String("binary", "bin/sunset", "static linux sunset binary (make build)")
	output := fs.String("output", "bin/sunset-image.tar", "OCI archive to write")
	version := fs.String("version", "dev", "version the binary was built with; also the image's tag")
	revision := fs.String("revision", "", "git revision the binary was built from")
	arch := fs.String("arch", runtime.GOARCH, "GOARCH the binary was built for")
	imageName := fs.String("name", "", "name of the loaded image (default "+ociimage.Repository+":VERSION)")
	caCerts := fs.String("ca-certificates", ociimage.HostCACertificates, "PEM CA bundle to put in the image")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	created, err := sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	if *imageName == "" {
		if *imageName, err = ociimage.DefaultName(*version); err != nil {
			return fmt.Errorf("%w; give -name", err)
		}
	}

	img, err := ociimage.Build(ociimage.Options{
		Binary:         *binary,
		Version:        *version,
		Revision:       *revision,
		Arch:           *arch,
		CACertificates: *caCerts,
		Created:        created,
	})
	if err != nil {
		return err
	}
	size, err := writeAtomically(*output, func(w io.Writer) error {
		return ociimage.WriteArchive(w, img, *imageName)
	})
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "wrote %s: %s linux/%s, digest %s, %d bytes\n", *output, *imageName, *arch, digest, size)
	return err
}

// sourceDateEpoch parses the reproducible-builds variable; empty means the
// Unix epoch.
func sourceDateEpoch(value string) (time.Time, error) {
	if value == "" {
		return time.Unix(0, 0), nil
	}
	secs, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds", value)
	}
	return time.Unix(secs, 0), nil
}

// writeAtomically writes path through a temporary file beside it, so that a
// failed build leaves no half-written archive to load, and returns its size.
func writeAtomically(path string, write func(io.Writer) error) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // fails harmlessly once renamed
	if err := write(tmp); err != nil {
		return 0, errors.Join(err, tmp.Close())
	}
	info, err := tmp.Stat()
	if err != nil {
		return 0, errors.Join(err, tmp.Close())
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return 0, err
	}
	return info.Size(), os.Rename(tmp.Name(), path)
}
