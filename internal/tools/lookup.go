package tools

import (
	"encoding/json"
	"errors"
)

// Names lists the server-side tools' names, as of the last refresh.
func (r *Registry) Names() []string {
	c := r.snapshot()
	names := make([]string, len(c.order))
	for i, e := range c.order {
		names[i] = e.decl.Name
	}
	return names
}

// Describe returns a server-side tool's source and description, as of the
// last refresh; ok is false for an unknown name.
func (r *Registry) Describe(name string) (source, description string, ok bool) {
	e, ok := r.snapshot().byName[name]
	if !ok {
		return "", "", false
	}
	return e.sourceName(), e.decl.Description, true
}

// CheckArgs validates arguments for a server-side tool against its input
// schema, as a call's are before it runs; the error says what is wrong.
// known is false, and nothing is checked, for a tool not offered now (its
// source is reconnecting, say).
func (r *Registry) CheckArgs(name string, args json.RawMessage) (known bool, err error) {
	e, ok := r.snapshot().byName[name]
	if !ok {
		return false, nil
	}
	if _, msg := checkArgs(e.schema, args); msg != "" {
		return true, errors.New(msg)
	}
	return true, nil
}
