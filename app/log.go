package app

import (
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
