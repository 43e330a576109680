package store

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"
)

// badgerLogger routes badger's printf-style logging into zerolog. Badger's
// info chatter (compactions, replays) goes to debug so a healthy Sunset stays
// quiet.
type badgerLogger struct{ log zerolog.Logger }

func (l badgerLogger) Errorf(f string, a ...any)   { l.log.Error().Msg(trim(f, a)) }
func (l badgerLogger) Warningf(f string, a ...any) { l.log.Warn().Msg(trim(f, a)) }
func (l badgerLogger) Infof(f string, a ...any)    { l.log.Debug().Msg(trim(f, a)) }
func (l badgerLogger) Debugf(f string, a ...any)   { l.log.Trace().Msg(trim(f, a)) }

func trim(f string, a []any) string { return strings.TrimSpace(fmt.Sprintf(f, a...)) }
