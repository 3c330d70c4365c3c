package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/parleyhq/parley/internal/config"
)

// app is what every command shares: the output streams, the environment it
// reads settings from, the process's logger and the global flags.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	log            *slog.Logger
	level          *slog.LevelVar // the logger's level, set from the configuration
	flags          config.Overrides
	prog           string // how the person started parley, for suggested commands (progName)
}

// loadConfig reads the configuration once (defaults, file, environment,
// flags) and applies its log level to the logger.
func (a *app) loadConfig() (*config.Config, error) {
	cfg, err := config.Load(a.flags, a.getenv)
	if err != nil {
		return nil, err
	}
	a.level.Set(cfg.SlogLevel())
	return cfg, nil
}

// openDatabase loads the configuration and opens (and migrates) its
// database, for the commands that need nothing else of it.
func (a *app) openDatabase(ctx context.Context) (*database, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	return openDatabase(ctx, cfg)
}
