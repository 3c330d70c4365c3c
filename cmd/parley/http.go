package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

const (
	// requestGrace is how long requests in flight may run after shutdown
	// starts before their contexts (and so open event streams) are cancelled.
	requestGrace = 2 * time.Second
	// shutdownTimeout bounds the whole shutdown; connections still open
	// then are closed forcibly.
	shutdownTimeout = 15 * time.Second
	// headerReadTimeout bounds reading a request's headers.
	headerReadTimeout = 10 * time.Second
	// requestReadTimeout bounds reading a whole request, body included, so a
	// client that sends a body slowly or never finishes it cannot hold a
	// connection and its handler; 1 MiB, the default limits.max_body_bytes,
	// in this time is about 35 KB/s.
	requestReadTimeout = 30 * time.Second
)

// runHTTP serves handler on ln until ctx ends, then shuts down gracefully:
// no new connections, requests in flight get requestGrace to finish, then
// every request context is cancelled so event streams (which never finish by
// themselves) end, and the server waits for the handlers to return.
// stopSignals is called when shutdown starts, so that a second signal ends
// the process at once.
func runHTTP(ctx context.Context, ln net.Listener, handler http.Handler, log *slog.Logger, stopSignals func()) error {
	base, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv := newHTTPServer(base, handler, log, requestReadTimeout)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	stopSignals()
	log.Info("shutting down")

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(sctx) }()
	grace := time.NewTimer(requestGrace)
	defer grace.Stop()
	var err error
	select {
	case err = <-shut:
	case <-grace.C:
		log.Info("ending open streams")
		cancelRequests()
		err = <-shut
	}
	if err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: connections still open after %s were closed: %w", shutdownTimeout, err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("stopped")
	return nil
}

// newHTTPServer is runHTTP's server: handler with request contexts derived
// from base, headers read within headerReadTimeout and the whole request
// within readTimeout.
//
// ReadTimeout does not limit a response: the server lifts the read deadline
// once a request's body has been read, and a handler that never reads it
// never reads the connection. Past the deadline a read of the body fails, as
// does the server's own reading of what a handler left unread before it
// answers, and the connection is closed after the answer. There is no
// WriteTimeout: event streams stay open for hours.
func newHTTPServer(base context.Context, handler http.Handler, log *slog.Logger, readTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: headerReadTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
