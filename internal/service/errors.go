package service

import (
	"fmt"
	"strings"

	"github.com/parleyhq/parley/internal/chat"
)

// UnknownModelError is a chat asked for a model the configuration does not
// name.
type UnknownModelError struct {
	Model string
	Known []string // the configured model names
}

func (e *UnknownModelError) Error() string {
	return fmt.Sprintf("model %q is not configured; configured models: %s", e.Model, strings.Join(e.Known, ", "))
}

// BusyError refuses a message with busy "reject" because the chat has work
// in progress.
type BusyError struct {
	ChatID string
	Status chat.Status
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("chat %s is busy (%s)", e.ChatID, e.Status)
}

// StatusError refuses an operation that the chat's current status does not
// allow; Reason says which status it needs.
type StatusError struct {
	ChatID string
	Status chat.Status
	Reason string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s (the chat is %s)", e.Reason, e.Status)
}
