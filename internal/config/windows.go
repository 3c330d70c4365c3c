package config

import (
	"regexp"
	"strings"
)

// openaiWindows holds the context windows, in tokens, of OpenAI's models,
// for Chat Completions and the Responses API alike.
var openaiWindows = map[string]int{
	"gpt-4-turbo":  128000,
	"gpt-4o":       128000,
	"gpt-4o-mini":  128000,
	"gpt-4.1":      1047576,
	"gpt-4.1-mini": 1047576,
	"gpt-4.1-nano": 1047576,
	"o1":           200000,
	"o3":           200000,
	"o3-mini":      200000,
	"o4-mini":      200000,
	"gpt-5":        400000,
	"gpt-5-mini":   400000,
	"gpt-5-nano":   400000,
}

// anthropicWindows holds the context windows of Anthropic's models as the
// API serves them by default (a larger window some of them offer needs a
// beta header parley does not send).
var anthropicWindows = map[string]int{
	"claude-3-haiku":    200000,
	"claude-3-opus":     200000,
	"claude-3-5-haiku":  200000,
	"claude-3-5-sonnet": 200000,
	"claude-3-7-sonnet": 200000,
	"claude-sonnet-4":   200000,
	"claude-opus-4":     200000,
	"claude-opus-4-1":   200000,
	"claude-sonnet-4-5": 200000,
	"claude-haiku-4-5":  200000,
	"claude-opus-4-5":   200000,
}

// snapshot matches the suffix that names a model's dated snapshot or
// moving alias: OpenAI's -2024-08-06, Anthropic's -20241022 and -latest.
var snapshot = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$`)

// builtinWindow returns the context window, in tokens, of a well-known
// model of provider ("openai", "openai-responses" or "anthropic"), named by
// its model id, a dated snapshot of it ("gpt-4o-2024-08-06",
// "claude-sonnet-4-20250514") or its -latest alias. It reports false for a
// model or provider it does not know, whose window must be configured.
func builtinWindow(provider, modelID string) (int, bool) {
	var windows map[string]int
	switch provider {
	case "openai", "openai-responses":
		windows = openaiWindows
	case "anthropic":
		windows = anthropicWindows
	default:
		return 0, false
	}
	id := strings.ToLower(strings.TrimSpace(modelID))
	if w, ok := windows[id]; ok {
		return w, true
	}
	w, ok := windows[snapshot.ReplaceAllString(id, "")]
	return w, ok
}

// knownWindow is builtinWindow as a model entry reads it, 0 when unknown.
func knownWindow(provider, model string) int64 {
	w, _ := builtinWindow(provider, model)
	return int64(w)
}
