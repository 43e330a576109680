// Package logbridge writes what the libraries Sunset links log through
// Sunset's own zerolog logger: klog (k8s.io/apiserver and client-go), the
// gRPC logger under the Google Cloud clients, the Google Cloud clients'
// slog logger, the AWS SDK's logger and kafka-go's. Each of them logs its
// own way by default (klog's "I1129 ..." header, Go's log package, a JSON
// of its own), and a pipeline that parses Sunset's JSON lines drops or
// mangles theirs. Through these adapters every line has Sunset's format
// (log-format), level (log-level) and fields (level, time, message), plus
// Field naming the library.
//
// The package only builds adapters. Installing one where a library offers
// nothing but a process-global setter (klog, gRPC) is cmd/sunset's job,
// the one place that touches process-global state.
package logbridge

import (
	"context"
	"log/slog"
	"runtime"
	"strings"

	"github.com/rs/zerolog"
)

// Field is the field that names the library a line came from: klog,
// grpc, google-cloud-go, aws-sdk-go-v2 or kafka-go. Sunset's own lines
// have none; component names the part of Sunset instead.
const Field = "library"

// Library names, the values of Field.
const (
	Klog        = "klog"
	GRPC        = "grpc"
	GoogleCloud = "google-cloud-go"
	AWS         = "aws-sdk-go-v2"
	KafkaGo     = "kafka-go"
)

// Level is the zerolog level of an slog level. Levels between debug and
// info are how logr (and so klog) writes V(n) as slog: V(n) is level -n.
// klog's V(0) and V(1) are info, V(2) to V(4) debug and V(5) on trace,
// as Kubernetes components use them: 1 for what an operator may want, 2
// for what debugging needs, 5 and more for the details of each request.
func Level(l slog.Level) zerolog.Level {
	switch {
	case l >= slog.LevelError:
		return zerolog.ErrorLevel
	case l >= slog.LevelWarn:
		return zerolog.WarnLevel
	case l >= slog.LevelInfo-1:
		return zerolog.InfoLevel
	case l >= slog.LevelDebug:
		return zerolog.DebugLevel
	default:
		return zerolog.TraceLevel
	}
}

// Slog is an slog logger that writes through l, with Field set to
// library. Records below floor are dropped whatever l's level: the Google
// Cloud clients log whole requests and responses at debug, and those
// hold audit events, which Sunset never logs.
func Slog(l zerolog.Logger, library string, floor slog.Level) *slog.Logger {
	return slog.New(&handler{l: l.With().Str(Field, library).Logger(), floor: floor})
}

// handler is an slog.Handler over a zerolog logger.
type handler struct {
	l     zerolog.Logger
	floor slog.Level
	// group prefixes the keys of attributes added from now on, "a.b.".
	group string
	// klog says that records come from klog, whose warnings arrive as
	// info (see klogSeverity).
	klog bool
}

// Enabled implements slog.Handler.
func (h *handler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.floor && Level(l) >= h.l.GetLevel()
}

// Handle implements slog.Handler. The time is the logger's own (its
// timestamp field), written as Sunset's lines are.
func (h *handler) Handle(_ context.Context, r slog.Record) error {
	level := Level(r.Level)
	if h.klog && r.Level == slog.LevelInfo {
		level = klogSeverity()
	}
	e := h.l.WithLevel(level)
	if e == nil {
		return nil
	}
	var kvs []any
	r.Attrs(func(a slog.Attr) bool {
		kvs = appendAttr(kvs, h.group, a)
		return true
	})
	e.Fields(kvs).Msg(r.Message)
	return nil
}

// WithAttrs implements slog.Handler.
func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	var kvs []any
	for _, a := range attrs {
		kvs = appendAttr(kvs, h.group, a)
	}
	c := *h
	c.l = h.l.With().Fields(kvs).Logger()
	return &c
}

// WithGroup implements slog.Handler.
func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group += name + "."
	return &c
}

// appendAttr adds a's key and value to kvs, a group's attributes with
// their keys prefixed by the group's name. An error under logr's key
// "err" goes under zerolog's "error", as Sunset's own errors do.
func appendAttr(kvs []any, prefix string, a slog.Attr) []any {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range v.Group() {
			kvs = appendAttr(kvs, p, g)
		}
		return kvs
	}
	if a.Key == "" {
		return kvs
	}
	key := prefix + a.Key
	if _, isErr := v.Any().(error); isErr && key == "err" {
		key = zerolog.ErrorFieldName
	}
	return append(kvs, key, v.Any())
}

// klogSeverity is the level of a klog line that reached its logger as
// info: klog hands its logger Warning and Fatal lines as info (its
// output says so: "TODO: set 'severity' ... as structured log info"), so
// only the klog function on the stack tells them apart. A record's level
// below info is V(n), which klog's warnings never are.
func klogSeverity() zerolog.Level {
	var pcs [24]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs[:])])
	for {
		f, more := frames.Next()
		if name, ok := strings.CutPrefix(f.Function, "k8s.io/klog/v2."); ok {
			switch {
			case strings.HasPrefix(name, "Warning"):
				return zerolog.WarnLevel
			case strings.HasPrefix(name, "Fatal"), strings.HasPrefix(name, "Exit"):
				return zerolog.ErrorLevel
			}
		}
		if !more {
			return zerolog.InfoLevel
		}
	}
}
