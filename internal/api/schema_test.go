package api_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestDynamicToolSchemaRefs checks that a dynamic tool's schema is refused at
// creation when a $ref does not resolve within it or loops without going
// into the value (it would fail every call), and that the answer names no
// path of the server.
func TestDynamicToolSchemaRefs(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	body := func(schema string) string {
		return fmt.Sprintf(`{"dynamic_tools":[{"name":"ok","input_schema":{"type":"object"}},{"name":"t","description":"d","input_schema":%s}]}`, schema)
	}
	refused := []struct{ name, schema, want string }{
		{"missing pointer", `{"type":"object","properties":{"x":{"$ref":"#/$defs/none"}}}`, `json-pointer in "#/$defs/none" not found`},
		{"missing anchor", `{"type":"object","properties":{"x":{"$ref":"#here"}}}`, `"#here" not found`},
		{"relative document", `{"type":"object","properties":{"x":{"$ref":"schema.json"}}}`, `external $ref "schema.json" is not allowed`},
		{"self", `{"type":"object","$ref":"#"}`, `$ref cycle at "#"`},
		{"defs loop", `{"type":"object","$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`, `$ref cycle at "#/$defs/a"`},
		{"loop under a property", `{"type":"object","properties":{"x":{"anyOf":[{"$ref":"#/properties/x"}]}}}`, `$ref cycle at "#/properties/x"`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			e := s.do("POST", "/api/v1/chats", tok, body(tc.schema)).expectError(t, http.StatusBadRequest, "invalid_field")
			msg := e.Error.Message
			if e.Error.Details["field"] != "dynamic_tools[1].input_schema" || !strings.Contains(msg, tc.want) {
				t.Fatalf("details %v, message %q; want field dynamic_tools[1].input_schema and %q", e.Error.Details, msg, tc.want)
			}
			if strings.Contains(msg, cwd) || strings.Contains(msg, "file:") || strings.Contains(msg, "://") {
				t.Fatalf("the message names a server path or URL: %q", msg)
			}
		})
	}
	if l := s.listChats(tok, "?archived=any"); len(l.Chats) != 0 {
		t.Fatalf("refused creates wrote %d chats", len(l.Chats))
	}
	// Recursion that goes into the value is fine.
	s.do("POST", "/api/v1/chats", tok, body(`{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#"}}}}`)).
		expect(t, http.StatusCreated, nil)
}
