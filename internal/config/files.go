package config

import (
	"fmt"
	"slices"
	"strings"
)

// Files configures uploaded files.
type Files struct {
	// MaxBytes is the size of the largest file an upload may carry
	// (413 beyond), and of the most bytes of a file a model request holds.
	MaxBytes int64 `yaml:"max_bytes"`
}

// DefaultFileMaxBytes is files.max_bytes when the configuration sets none.
const DefaultFileMaxBytes = 20 << 20

// MaxFileMaxBytes bounds files.max_bytes: a file is read whole into a
// model request.
const MaxFileMaxBytes = 512 << 20

func (f Files) check() error {
	if f.MaxBytes <= 0 || f.MaxBytes > MaxFileMaxBytes {
		return fmt.Errorf("files.max_bytes %d: want a size from 1 to %d (512 MiB)", f.MaxBytes, MaxFileMaxBytes)
	}
	return nil
}

// The kinds of content a model takes (Model.Inputs).
const (
	InputText  = "text"  // text, and text files (plain, Markdown, JSON, CSV) inlined as text
	InputImage = "image" // PNG, JPEG, GIF, WebP
	InputPDF   = "pdf"
)

// Inputs lists the accepted values of Model.Inputs.
var Inputs = []string{InputText, InputImage, InputPDF}

// DefaultInputs are the inputs of a model whose entry names none, but for
// the offline echo model, which takes every kind (Inputs): it only says
// what it received.
var DefaultInputs = []string{InputText, InputImage}

// InputKinds returns the kinds of content the model takes: its inputs, else
// its provider's default (see DefaultInputs).
func (m Model) InputKinds() []string {
	switch {
	case len(m.Inputs) > 0:
		return m.Inputs
	case m.Provider == "echo":
		return Inputs
	}
	return DefaultInputs
}

// TakesInput reports whether the model takes content of the kind (one
// of Inputs); text always.
func (m Model) TakesInput(kind string) bool {
	return kind == InputText || slices.Contains(m.InputKinds(), kind)
}

// checkInputs refuses an unknown kind in a model's inputs.
func checkInputs(in []string) error {
	for _, k := range in {
		if !slices.Contains(Inputs, k) {
			return fmt.Errorf("inputs: %q is not one of %s", k, strings.Join(Inputs, ", "))
		}
	}
	return nil
}
