// Command release packs the binaries make release built into the
// release's archives, writes their checksums and the krew manifest
// (deploy/krew/sunset.yaml) from them:
//
//	release -version v1.2.3 -dir bin/release -krew deploy/krew/sunset.yaml \
//	    -file README.md linux/amd64=bin/release/linux_amd64/sunset ...
//
// Each archive, sunset_<version>_<os>_<arch>.tar.gz, holds sunset and
// the -file files, byte for byte the same for the same inputs and
// SOURCE_DATE_EPOCH (see writeArchive).
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// stringList is a flag given once per value.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fl := flag.NewFlagSet("release", flag.ContinueOnError)
	version := fl.String("version", "", "the release's version, vMAJOR.MINOR.PATCH")
	dir := fl.String("dir", "bin/release", "where the archives and checksums are written")
	krew := fl.String("krew", "deploy/krew/sunset.yaml", "where the krew manifest is written")
	var files stringList
	fl.Var(&files, "file", "a file every archive holds beside the binary, NAME=PATH or PATH (repeatable)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if !semver.MatchString(*version) {
		return fmt.Errorf("release: a release's version is vMAJOR.MINOR.PATCH, as krew requires, not %q: tag the commit or pass VERSION=v1.2.3", *version)
	}
	mtime, err := sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	var (
		archives  []archive
		checksums bytes.Buffer
	)
	for _, arg := range fl.Args() {
		platform, binary, ok := strings.Cut(arg, "=")
		if !ok {
			return fmt.Errorf("release: %q is not os/arch=binary", arg)
		}
		goos, goarch, err := splitPlatform(platform)
		if err != nil {
			return err
		}
		members := []member{{Name: "sunset", Path: binary}}
		for _, f := range files {
			members = append(members, parseMember(f))
		}
		var b bytes.Buffer
		if err := writeArchive(&b, members, mtime); err != nil {
			return err
		}
		name := archiveName(*version, goos, goarch)
		if err := os.WriteFile(filepath.Join(*dir, name), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		sum := sha256Hex(b.Bytes())
		archives = append(archives, archive{OS: goos, Arch: goarch, Sha256: sum})
		checksums.WriteString(checksumLine(sum, name))
		fmt.Printf("%s  %s\n", sum, filepath.Join(*dir, name))
	}
	manifest, err := renderKrew(*version, archives)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*dir, "sunset_"+*version+"_checksums.txt"), checksums.Bytes(), 0o644); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if err := os.WriteFile(*krew, manifest, 0o644); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// sourceDateEpoch is the time every archive entry carries: the
// reproducible-builds.org variable, which make release sets to the
// commit's time; the Unix epoch when unset.
func sourceDateEpoch(v string) (time.Time, error) {
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("release: SOURCE_DATE_EPOCH=%q is not a number of seconds", v)
	}
	return time.Unix(s, 0).UTC(), nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
