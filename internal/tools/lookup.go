package tools

import (
	"encoding/json"
	"errors"
	"fmt"
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
func (r *Registry) CheckArgs(name string, args json.RawMessage) error {
	e, ok := r.snapshot().byName[name]
	if !ok {
		return fmt.Errorf("tool %q is not available now", name)
	}
	if _, msg := checkArgs(e.schema, args); msg != "" {
		return errors.New(msg)
	}
	return nil
}
