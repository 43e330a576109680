// Package web is Sunset's built-in page: an overview of the deprecated APIs
// in use with the upgrade verdict, one API in detail, and one client, for
// administrators without Grafana and for a first look.
//
// The page is static: HTML, CSS and a script embedded in the binary, so it
// works without internet access. Every number on it comes from the JSON API
// (package api), read by the browser with the user's own credentials, so it
// never shows anything the API does not and follows the API's access rules.
// This package serves the files and nothing else.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// contentSecurityPolicy lets the page load only its own files and talk only
// to its own server: no inline script, nothing from elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// contentTypes of the assets, fixed here rather than read from the
// system's MIME tables, which differ between machines.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// file is one embedded asset, ready to serve.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the page at / and its assets under /assets/; any other
// path is a 404, as it was before the page existed.
type Handler struct {
	files map[string]file
}

// New builds the handler from the embedded assets.
func New() *Handler {
	h := &Handler{files: map[string]file{}}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		h.files["/"+p] = file{body: b, contentType: contentTypes[path.Ext(p)], etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		// The files are compiled in; failing to read them is a build defect.
		panic("web: reading embedded assets: " + err.Error())
	}
	h.files["/"] = h.files["/assets/index.html"]
	delete(h.files, "/assets/index.html")
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, ok := h.files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, r.Method+" is not allowed here; use GET", http.StatusMethodNotAllowed)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", f.contentType)
	hdr.Set("Content-Security-Policy", contentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	// Revalidate every time: an upgraded binary serves new files at once,
	// and an unchanged file costs a 304.
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", f.etag)
	if strings.HasPrefix(r.URL.Path, "/assets/") {
		hdr.Set("Cross-Origin-Resource-Policy", "same-origin")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}
