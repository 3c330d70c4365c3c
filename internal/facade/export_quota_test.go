package facade

import "github.com/parleyhq/parley/internal/chat"

// WriteError answers with err in OpenAI's error shape, as every facade
// route does.
var WriteError = writeError

// RunFailed is the error of a run that ended its chat in error.
var RunFailed = func(c chat.Chat) error { return runFailed(c) }
