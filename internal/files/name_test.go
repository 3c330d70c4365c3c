package files

import (
	"strings"
	"testing"
)

// TestCheckName checks that a name showing other than it is (a
// bidirectional override or isolate, a mark) is refused like a control
// character, and that ordinary names in any script pass.
func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"report.pdf":             true,
		"تقرير.pdf":              true, // right-to-left letters are letters
		"résumé 2026.md":         true,
		"invoice\u202Efdp.exe":   false, // RIGHT-TO-LEFT OVERRIDE
		"a\u202Ab.txt":           false,
		"a\u2066b\u2069.txt":     false, // isolates
		"a\u200Fb.txt":           false, // RIGHT-TO-LEFT MARK
		"a\u061Cb.txt":           false, // ARABIC LETTER MARK
		"a\x1bb.txt":             false,
		"a\u0085b.txt":           false,
		strings.Repeat("x", 256): false,
		"bad\xffutf8.txt":        false,
	} {
		err := CheckName(name)
		if (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v, want ok %v", name, err, ok)
		}
	}
}
