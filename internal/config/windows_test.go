package config

import "testing"

func TestContextWindow(t *testing.T) {
	tests := []struct {
		provider, model string
		window          int
		known           bool
	}{
		{"openai", "gpt-4o", 128000, true},
		{"openai", "gpt-4o-2024-08-06", 128000, true},
		{"openai-responses", "gpt-4o-mini", 128000, true},
		{"openai", "gpt-4.1", 1047576, true},
		{"openai", "gpt-4.1-mini-2025-04-14", 1047576, true},
		{"openai-responses", "o3", 200000, true},
		{"openai-responses", "o4-mini-2025-04-16", 200000, true},
		{"openai", "gpt-5", 400000, true},
		{"openai-responses", "gpt-5-mini", 400000, true},
		{"anthropic", "claude-3-5-sonnet-20241022", 200000, true},
		{"anthropic", "claude-3-7-sonnet-latest", 200000, true},
		{"anthropic", "claude-sonnet-4-20250514", 200000, true},
		{"anthropic", "claude-opus-4-1-20250805", 200000, true},
		{"anthropic", "claude-haiku-4-5", 200000, true},
		// Unknown models, and known ids under another provider.
		{"openai", "gpt-4o-mini-transcribe", 0, false},
		{"openai", "llama3.1:8b", 0, false},
		{"openai", "claude-sonnet-4", 0, false},
		{"anthropic", "gpt-4o", 0, false},
		{"anthropic", "claude-x", 0, false},
		{"echo", "gpt-4o", 0, false},
		{"openai", "", 0, false},
	}
	for _, tt := range tests {
		w, ok := builtinWindow(tt.provider, tt.model)
		if w != tt.window || ok != tt.known {
			t.Errorf("builtinWindow(%q, %q) = %d, %v; want %d, %v", tt.provider, tt.model, w, ok, tt.window, tt.known)
		}
	}
}
