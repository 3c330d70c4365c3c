package facade

// WriteError answers with err in OpenAI's error shape, as every facade
// route does.
var WriteError = writeError
