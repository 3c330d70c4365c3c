package jsonscan

import (
	"strings"
	"testing"
)

func TestScan(t *testing.T) {
	deep := `{"a":[` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `]}`
	for _, tc := range []struct {
		name, doc      string
		deepField      string // "" and !wantDeep: none
		wantDeep       bool
		nulField       string
		wantNUL, inKey bool
	}{
		{name: "fine", doc: `{"a":[1,{"b":"x\\u0000"}]}`},
		{name: "value", doc: `{"a":[1,{"b c":"x\u0000"}]}`, wantNUL: true, nulField: `a[1]["b c"]`},
		{name: "key", doc: `{"tools":[{"x\u0000":1}]}`, wantNUL: true, nulField: "tools[0]", inKey: true},
		{name: "top", doc: `"\u0000"`, wantNUL: true, nulField: ""},
		{name: "deep", doc: deep, wantDeep: true, deepField: "a" + strings.Repeat("[0]", MaxDepth-1)},
		{name: "depth limit", doc: strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, n := Scan([]byte(tc.doc))
			if (d != nil) != tc.wantDeep || (d != nil && d.Field != tc.deepField) {
				t.Errorf("depth error %+v, want field %q (%v)", d, tc.deepField, tc.wantDeep)
			}
			if (n != nil) != tc.wantNUL || (n != nil && (n.Field != tc.nulField || n.InKey != tc.inKey)) {
				t.Errorf("NUL error %+v, want field %q key %v (%v)", n, tc.nulField, tc.inKey, tc.wantNUL)
			}
		})
	}
}

func TestDepthAndReplaceNUL(t *testing.T) {
	for doc, want := range map[string]int{
		`1`: 0, `"[[["`: 0, `[]`: 1, `{"a":[{"b":"]]]"}]}`: 3, `["\"[", [[]]]`: 3,
	} {
		if got := Depth([]byte(doc)); got != want {
			t.Errorf("Depth(%s) = %d, want %d", doc, got, want)
		}
	}
	for doc, want := range map[string]string{
		`{"a":"x"}`:               `{"a":"x"}`,
		`{"a\u0000":"x\u0000y"}`:  `{"a\ufffd":"x\ufffdy"}`,
		`["\\u0000", "\\\u0000"]`: `["\\u0000", "\\\ufffd"]`,
		`"\u00001"`:               `"\ufffd1"`,
	} {
		if got := string(ReplaceNUL([]byte(doc))); got != want {
			t.Errorf("ReplaceNUL(%s) = %s, want %s", doc, got, want)
		}
	}
}
