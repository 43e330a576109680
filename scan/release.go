package scan

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxReleaseSize bounds a decompressed release record. Helm's own limit
// is the object's 1 MiB; gzip can hide far more than that, and a record
// is data anyone allowed to write Secrets in a namespace controls.
const maxReleaseSize = 64 << 20

// storedReleaseJSON is the part of Helm's stored release (release/v1)
// the scan reads: what was applied, hooks included.
type storedReleaseJSON struct {
	Manifest string `json:"manifest"`
	Hooks    []struct {
		Path     string `json:"path"`
		Manifest string `json:"manifest"`
	} `json:"hooks"`
}

// decodeRelease reads a release record as Helm's storage drivers write it:
// base64 of gzipped JSON (plain JSON is accepted too, as Helm does).
func decodeRelease(data string) (storedReleaseJSON, error) {
	var rel storedReleaseJSON
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return rel, fmt.Errorf("release record is not base64: %w", err)
	}
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return rel, fmt.Errorf("release record: %w", err)
		}
		b, err = io.ReadAll(io.LimitReader(zr, maxReleaseSize+1))
		if err != nil {
			return rel, fmt.Errorf("release record: %w", err)
		}
		if len(b) > maxReleaseSize {
			return rel, errors.New("release record decompresses to more than 64 MiB")
		}
	}
	if err := json.Unmarshal(b, &rel); err != nil {
		return rel, fmt.Errorf("release record is not a Helm release: %w", err)
	}
	return rel, nil
}

// manifests are the release's templates' output, hooks included: hooks
// are applied on upgrade too.
func (r storedReleaseJSON) manifests() []Manifest {
	out := SplitManifest(r.Manifest)
	for _, h := range r.Hooks {
		out = append(out, Manifest{Template: h.Path, Text: h.Manifest})
	}
	return out
}
