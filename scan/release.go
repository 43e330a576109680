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

// maxReleaseSize bounds a decompressed release record. Helm keeps a
// record in one Secret or ConfigMap, under 1 MiB of base64 of gzip; real
// records inflate to a few MiB. gzip can hide far more than that, and a
// record is data anyone allowed to write Secrets in a namespace controls
// (Helm's labels are all it takes to look like a release), so inflating
// stops at the bound, and the record is decoded as it is inflated.
const maxReleaseSize = 32 << 20

// maxRecordSize bounds a record's data before it is decoded: the apiserver
// keeps objects under 1.5 MiB.
const maxRecordSize = 3 << 20

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
// base64 of gzipped JSON (plain JSON is accepted too, as Helm does). A
// record over the bounds is a TooLargeError, found without inflating or
// holding more than the bound.
func decodeRelease(data string) (storedReleaseJSON, error) {
	var rel storedReleaseJSON
	if len(data) > maxRecordSize {
		return rel, &TooLargeError{What: "the release record", Limit: maxRecordSize}
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return rel, fmt.Errorf("release record is not base64: %w", err)
	}
	var r io.Reader = bytes.NewReader(b)
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return rel, fmt.Errorf("release record: %w", err)
		}
		r = zr
	}
	bounded := NewBoundedReader(r, maxReleaseSize)
	if err := json.NewDecoder(bounded).Decode(&rel); err != nil {
		if bounded.Over() {
			return storedReleaseJSON{}, &TooLargeError{What: "the release record, decompressed,", Limit: maxReleaseSize}
		}
		return storedReleaseJSON{}, fmt.Errorf("release record is not a Helm release: %w", err)
	}
	return rel, nil
}

// BoundedReader reads at most n bytes of r, and then fails, saying so:
// what it reads from is never inflated or copied past its bound. The
// chart loader bounds archives with it too.
type BoundedReader struct {
	r    io.Reader
	left int64
	over bool
}

// NewBoundedReader reads at most n bytes of r.
func NewBoundedReader(r io.Reader, n int64) *BoundedReader { return &BoundedReader{r: r, left: n} }

// Over reports whether a read went past the bound.
func (b *BoundedReader) Over() bool { return b.over }

func (b *BoundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.over = true
		return 0, errors.New("too large")
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
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
