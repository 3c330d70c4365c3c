package config

// knownWindow returns the context window of a well-known model id of a
// provider, 0 if it is not known.
func knownWindow(provider, model string) int64 {
	return 0
}
