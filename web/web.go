// Package web is Flotilla's operator UI: one static page, embedded in the
// binary, that reads the API under /api/v1 with the operator's token and
// follows the event stream, so a sync shows up without a reload.
//
// The files carry no data and no secrets, so they are served without a
// token; everything the page shows comes from the API, which checks the
// token on every call. The page builds its DOM from text nodes only, because
// application names, messages and drift values come from repositories and
// the swarm and are untrusted; the Content-Security-Policy below backs that
// up by refusing inline script.
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy allows only the page's own files and same-origin
// API calls. Should an untrusted string ever reach the DOM as markup, no
// inline script or handler attribute would run and nothing would load from
// elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the UI's files at its root: "/" is the page, which finds
// the API relative to its own address ("../api/v1/"), so mount it one level
// below the API's root, as api.Options.UI does under /ui/.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// Embedded files have no modification time to revalidate against;
		// they are small, and an upgraded controller must not be shown
		// with the old script.
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
