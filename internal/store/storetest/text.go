package storetest

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// textTests pin down the text every store keeps alike: any valid UTF-8 without
// U+0000, in text columns and inside stored JSON. U+0000 is outside the
// contract (PostgreSQL refuses it, SQLite keeps it): callers refuse it before
// it reaches a store, as the API does.
var textTests = map[string]func(*testing.T, opener){
	"NonASCIIRoundTrips": testNonASCIIRoundTrips,
}

// nonASCII mixes accents, a combining mark, CJK, right-to-left script, an emoji
// outside the BMP, control characters other than NUL, and a backslash followed
// by "u0000", which is text and no escape.
const nonASCII = "Café e\u0301 日本語 مرحبا 😀 \t\n\x01\x7f \\u0000"

func testNonASCIIRoundTrips(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{
		Title:        nonASCII,
		SystemPrompt: nonASCII,
		Labels:       map[string]string{"team": "Zürich 😀"},
		DynamicTools: []chat.DynamicTool{{Name: "t", Description: nonASCII,
			InputSchema: json.RawMessage(`{"type":"object","description":"日本語 \u00e9 \\u0000 😀"}`)}},
	})
	wantEqual(t, "GetChat", getChat(t, s, c.ID), c)

	c.Title, c.Labels = "Ελληνικά "+nonASCII, map[string]string{"team": "Zürich 😀", "city": "東京"}
	inTx(t, s, func(tx store.Tx) error { return tx.UpdateChatMeta(t.Context(), &c) })
	if got := getChat(t, s, c.ID); got.Title != c.Title || !maps.Equal(got.Labels, c.Labels) {
		t.Fatalf("after UpdateChatMeta: title %q labels %v, want %q %v", got.Title, got.Labels, c.Title, c.Labels)
	}
	got, _ := listAll(t, s, store.ChatQuery{Owner: "alice", Labels: map[string]string{"city": "東京"}, Limit: 10})
	wantEqual(t, "label filter on a non-ASCII value", ids(got), []string{c.ID})

	m := appendMessage(t, s, chat.Message{ChatID: c.ID, Role: chat.RoleTool, Parts: []chat.Part{
		chat.TextPart(nonASCII),
		{Type: chat.PartToolResult, ToolCallID: "call_1", ToolName: "t",
			Output: json.RawMessage(`{"città":"Zürich","emoji":"😀","escaped":"\u00e9\ud83d\ude00","text":"\\u0000"}`)},
	}})
	wantEqual(t, "ListMessages", listMessages(t, s, c.ID, 0, 0), []chat.Message{m})
}
