package agent

import (
	"io"
	"log/slog"
	"strings"
	"time"
)

// ConsoleLogger returns a logger that writes one short line per record to
// w, prefixed "airlock-guest: ", without timestamps (the console has its
// own), and with the level only when it is not INFO.
// started is when the agent process started, for debug-level timings.
var started = time.Now()

func ConsoleLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(prefixWriter{w: w, prefix: "airlock-guest: "}, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				// At debug level, time since the agent started, which is
				// what a boot profile needs; otherwise nothing.
				if level <= slog.LevelDebug {
					return slog.String("t", "+"+time.Since(started).Round(time.Millisecond).String())
				}
				return slog.Attr{}
			case slog.LevelKey:
				if a.Value.Any() == slog.LevelInfo {
					return slog.Attr{}
				}
			}
			return a
		},
	}))
}

// prefixWriter prefixes each write (one log record) with prefix.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+strings.TrimRight(string(b), "\n")+"\n"); err != nil {
		return 0, err
	}
	return len(b), nil
}
