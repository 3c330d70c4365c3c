package config

import "slices"

// The kinds of content a model takes (Model.Inputs).
const (
	InputText  = "text"  // text, and text files (plain, Markdown, JSON, CSV) inlined as text
	InputImage = "image" // PNG, JPEG, GIF, WebP
	InputPDF   = "pdf"
)

// DefaultInputs are the inputs of a model whose entry names none.
var DefaultInputs = []string{InputText, InputImage}

// TakesInput reports whether the model takes content of the kind; text
// always.
func (m Model) TakesInput(kind string) bool {
	if kind == InputText {
		return true
	}
	in := m.Inputs
	if len(in) == 0 {
		in = DefaultInputs
	}
	return slices.Contains(in, kind)
}
