// Package builtin holds parley's built-in server-side tools: current_time and
// http_fetch. Both only read, and are annotated so (readOnlyHint true,
// destructiveHint false): under the approval policy "destructive" they run
// without approval.
package builtin

import "github.com/parleyhq/parley/tool"

// Options configure the built-in tools.
type Options struct {
	HTTPFetch HTTPFetchOptions
}

// Tools returns every built-in tool, configured by opts.
func Tools(opts Options) []tool.Tool {
	return []tool.Tool{CurrentTime(), HTTPFetch(opts.HTTPFetch)}
}
