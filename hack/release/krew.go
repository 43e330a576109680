package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"regexp"
	"strings"
	"text/template"
)

//go:embed krew.yaml.tmpl
var krewTemplate string

// releaseURL is where a release's archives are downloaded from.
const releaseURL = "https://github.com/kube-sunset/sunset/releases/download"

// semver is a version krew accepts for spec.version: v, three numbers and
// an optional pre-release.
var semver = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// archive is one release archive: the platform it is for and its sha256.
type archive struct {
	OS, Arch string
	Sha256   string
}

// archiveName is the file name of version's archive for goos/goarch.
func archiveName(version, goos, goarch string) string {
	return fmt.Sprintf("sunset_%s_%s_%s.tar.gz", version, goos, goarch)
}

// krewPlatform is a platform of the manifest, as the template writes it.
type krewPlatform struct {
	OS, Arch, URI, Sha256 string
}

// renderKrew writes the krew manifest of version, one platform per
// archive, in the order given.
func renderKrew(version string, archives []archive) ([]byte, error) {
	if !semver.MatchString(version) {
		return nil, fmt.Errorf("release: krew takes a version vMAJOR.MINOR.PATCH, not %q: tag the commit or pass VERSION=v1.2.3", version)
	}
	data := struct {
		Version   string
		Platforms []krewPlatform
	}{Version: version}
	for _, a := range archives {
		if !regexp.MustCompile(`^[a-f0-9]{64}$`).MatchString(a.Sha256) {
			return nil, fmt.Errorf("release: %q is not a sha256", a.Sha256)
		}
		data.Platforms = append(data.Platforms, krewPlatform{
			OS: a.OS, Arch: a.Arch, Sha256: a.Sha256,
			URI: releaseURL + "/" + version + "/" + archiveName(version, a.OS, a.Arch),
		})
	}
	var b bytes.Buffer
	tmpl := template.Must(template.New("krew").Option("missingkey=error").Parse(krewTemplate))
	if err := tmpl.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// checksumLine is a line of the checksums file, as sha256sum writes it
// and `sha256sum -c` reads it.
func checksumLine(sum, file string) string {
	return sum + "  " + file + "\n"
}

// splitPlatform splits "linux/amd64".
func splitPlatform(p string) (goos, goarch string, err error) {
	goos, goarch, ok := strings.Cut(p, "/")
	if !ok || goos == "" || goarch == "" {
		return "", "", fmt.Errorf("release: platform %q is not os/arch", p)
	}
	return goos, goarch, nil
}
