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
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No WriteTimeout: event streams stay open for hours.
		BaseContext: func(net.Listener) context.Context { return base },
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
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
