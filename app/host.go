package app

import (
	"net"
	"net/http"
	"strings"

	"github.com/kube-sunset/sunset/internal/httpjson"
)

// loopbackHostOnly answers 403 to a request whose Host is not a loopback
// name or address: localhost, 127.0.0.0/8 or ::1, with or without a port.
//
// It guards what Sunset serves without credentials on a loopback address
// against DNS rebinding: a page in a browser on the same host can have its
// own name resolve to 127.0.0.1 and then call Sunset as the same origin,
// but the browser still sends the page's name as Host. Clients on the host
// (curl, kubectl port-forward, a kubelet probe to 127.0.0.1) send a
// loopback Host.
func loopbackHostOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			// The Host is not quoted: it is whatever the page chose.
			httpjson.Error(w, http.StatusForbidden, httpjson.ReasonForbidden,
				"Sunset serves this address without authentication and so answers only requests whose Host is localhost, 127.0.0.1 or [::1]; "+
					"call it by one of those, or configure authentication to serve other names")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names this host's loopback:
// localhost (any case, with or without the final dot) or a loopback IP,
// with or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
