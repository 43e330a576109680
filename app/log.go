package app

import (
	"github.com/kube-sunset/sunset/config"

	"io"
	"log"
	"strings"

	"github.com/rs/zerolog"
)

// zerologStdLogger adapts a zerolog logger for net/http's ErrorLog, which
// reports TLS handshake failures and the like.
func zerologStdLogger(l zerolog.Logger) *log.Logger {
	return log.New(stdWriter{l}, "", 0)
}

type stdWriter struct{ l zerolog.Logger }

func (w stdWriter) Write(p []byte) (int, error) {
	w.l.Warn().Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}

// NewLogger is the process's logger as cfg's log-level and log-format ask:
// console lines on a terminal (log-format auto), JSON otherwise.
func NewLogger(cfg config.Config, w io.Writer, terminal bool) zerolog.Logger {
	level, err := zerolog.ParseLevel(strings.ToLower(cfg.LogLevel))
	if err != nil {
		level = zerolog.InfoLevel
	}
	l := zerolog.New(w)
	if cfg.LogFormat == "console" || (cfg.LogFormat == "auto" && terminal) {
		l = zerolog.New(zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05"})
	}
	return l.Level(level).With().Timestamp().Logger()
}
