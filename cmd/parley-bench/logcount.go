package main

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
)

// logCounter is the components' log handler: it counts warnings and errors
// (the table mentions them) and, when verbose, prints them.
type logCounter struct {
	next     slog.Handler // nil: count only
	warnings *atomic.Int64
	errs     *atomic.Int64
}

func newLogCounter(w io.Writer, verbose bool) logCounter {
	l := logCounter{warnings: &atomic.Int64{}, errs: &atomic.Int64{}}
	if verbose {
		l.next = slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})
	}
	return l
}

func (l logCounter) counts() (warnings, errs int64) { return l.warnings.Load(), l.errs.Load() }

func (l logCounter) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelWarn }

func (l logCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		l.errs.Add(1)
	} else {
		l.warnings.Add(1)
	}
	if l.next != nil {
		return l.next.Handle(ctx, r)
	}
	return nil
}

func (l logCounter) WithAttrs(as []slog.Attr) slog.Handler {
	if l.next != nil {
		l.next = l.next.WithAttrs(as)
	}
	return l
}

func (l logCounter) WithGroup(name string) slog.Handler {
	if l.next != nil {
		l.next = l.next.WithGroup(name)
	}
	return l
}
