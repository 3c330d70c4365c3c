package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

var chatTests = map[string]func(*testing.T, opener){
	"InsertAndGetRoundTrip":     testInsertAndGet,
	"NilLabelsAndToolsAreEmpty": testNilLabelsAndTools,
	"ToolGlobsRoundTrip":        testToolGlobsRoundTrip,
	"InsertDuplicateID":         testInsertDuplicate,
	"InsertUnknownOwner":        testInsertUnknownOwner,
	"InsertInvalid":             testInsertInvalid,
	"GetMissing":                testGetMissing,
	"UpdateMeta":                testUpdateMeta,
	"SetInterruptRequested":     testSetInterrupt,
	"DeleteCascades":            testDeleteCascades,
}

// fullChat is a chat with every stored field set, its times in another
// zone and below the microsecond.
func fullChat() chat.Chat {
	paris := time.FixedZone("CET", 3600)
	return chat.Chat{
		ID:           "chat-full",
		Owner:        "alice",
		Title:        "Weather in Paris",
		Model:        "gpt-x",
		SystemPrompt: "Be brief.",
		Status:       chat.Pending,
		DynamicTools: []chat.DynamicTool{{
			Name:        "get_weather",
			Description: "Current weather",
			// Keys out of order: the schema must come back byte for byte.
			InputSchema: json.RawMessage(`{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"number"}}}`),
		}},
		Tools:              chat.ToolGlobs{"weather_*", "github_search_issues", "[a-c]?", `x\*`},
		Approve:            chat.ToolGlobs{"github_*", "files_delete"},
		Labels:             map[string]string{"source": "slack", "team": "ops"},
		Archived:           true,
		LastError:          &chat.ChatError{Kind: "provider", Message: "overloaded", Provider: "openai", HTTPStatus: 529, Retryable: true},
		Usage:              chat.Usage{InputTokens: 10, OutputTokens: 20, CostMicros: 30},
		ToolResultTimeout:  90 * time.Second,
		ActionDeadline:     ptr(time.Date(2030, 1, 2, 3, 4, 5, 123456789, paris)),
		WorkerID:           "worker-1",
		LeaseGeneration:    7,
		LeaseExpiresAt:     ptr(time.Date(2030, 1, 2, 3, 4, 6, 999999999, paris)),
		InterruptRequested: true,
		CompactRequested:   true,
	}
}

// stored is c as a store returns it: times in UTC to the microsecond.
func stored(c chat.Chat) chat.Chat {
	c.ActionDeadline = utcMicros(c.ActionDeadline)
	c.LeaseExpiresAt = utcMicros(c.LeaseExpiresAt)
	return c
}

func utcMicros(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return ptr(t.UTC().Truncate(time.Microsecond))
}

func testInsertAndGet(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := fullChat()
	before := now()
	inTx(t, s, func(tx store.Tx) error { return tx.InsertChat(t.Context(), &c) })
	if c.CreatedAt.Before(before) || c.CreatedAt.After(now()) || c.CreatedAt.Location() != time.UTC ||
		c.CreatedAt.Nanosecond()%1000 != 0 {
		t.Fatalf("CreatedAt = %v, want the insert time in UTC, to the microsecond", c.CreatedAt)
	}
	if !c.UpdatedAt.Equal(c.CreatedAt) {
		t.Fatalf("UpdatedAt = %v, want CreatedAt %v", c.UpdatedAt, c.CreatedAt)
	}
	got := getChat(t, s, c.ID)
	wantEqual(t, "GetChat", got, stored(c))
	if got.RequiredAction != nil {
		t.Fatalf("RequiredAction = %+v, want nil (not stored)", got.RequiredAction)
	}
	// Inside a transaction, the same chat.
	inTx(t, s, func(tx store.Tx) error {
		in, err := tx.GetChat(t.Context(), c.ID)
		if err != nil {
			return err
		}
		wantEqual(t, "Tx.GetChat", in, stored(c))
		locked, err := tx.LockChat(t.Context(), c.ID)
		if err != nil {
			return err
		}
		wantEqual(t, "LockChat", locked, stored(c))
		return nil
	})
}

func testNilLabelsAndTools(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	got := getChat(t, s, c.ID)
	if got.Labels == nil || len(got.Labels) != 0 {
		t.Fatalf("Labels = %#v, want an empty map", got.Labels)
	}
	if got.DynamicTools == nil || len(got.DynamicTools) != 0 {
		t.Fatalf("DynamicTools = %#v, want an empty slice", got.DynamicTools)
	}
	if got.LastError != nil || got.ActionDeadline != nil || got.LeaseExpiresAt != nil {
		t.Fatalf("unset pointers came back set: %+v", got)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if string(m["labels"]) != "{}" || string(m["dynamic_tools"]) != "[]" {
		t.Fatalf("JSON labels %s, dynamic_tools %s; want {} and []", m["labels"], m["dynamic_tools"])
	}
	// InsertChat leaves the inserted chat in the same shape.
	wantEqual(t, "inserted chat", c, got)
}

// testToolGlobsRoundTrip: a chat's tool selection comes back from every
// read of the chat as it was stored: nil (every tool) stays nil and shows
// as "tools": null, an empty selection stays empty, not nil, and globs keep
// their order.
func testToolGlobsRoundTrip(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	cases := []struct {
		name  string
		globs chat.ToolGlobs
		json  string
	}{
		{"all", nil, `null`},
		{"none", chat.ToolGlobs{}, `[]`},
		{"some", chat.ToolGlobs{"weather_*", "github_search_issues", "a?[bc]", "ünïcode_*"}, `["weather_*","github_search_issues","a?[bc]","ünïcode_*"]`},
	}
	for _, tc := range cases {
		check := func(what string, c chat.Chat) {
			t.Helper()
			wantEqual(t, tc.name+": "+what, c.Tools, tc.globs)
		}
		c := addChat(t, s, chat.Chat{Status: chat.Pending, Tools: tc.globs})
		check("inserted", c)
		got := getChat(t, s, c.ID)
		check("GetChat", got)
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if string(m["tools"]) != tc.json {
			t.Fatalf("%s: JSON tools %s, want %s", tc.name, m["tools"], tc.json)
		}
		inTx(t, s, func(tx store.Tx) error {
			locked, err := tx.LockChat(t.Context(), c.ID)
			check("LockChat", locked)
			return err
		})
		page, err := s.ListChats(t.Context(), store.ChatQuery{Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Chats {
			if l.ID == c.ID {
				check("ListChats", l)
			}
		}
		running, _ := acquire(t, s, "w1", longTTL)
		if running.ID != c.ID {
			t.Fatalf("acquired %s, want %s", running.ID, c.ID)
		}
		check("AcquireChats", running)
		appendMessage(t, s, textMessage(c.ID, "question"))
		check("TransitionChat from running", mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.Waiting}))
		next := mustTransition(t, s, c.ID, store.Transition{From: chat.Waiting, To: chat.Pending})
		check("TransitionChat", next)
		got.Title = "renamed"
		inTx(t, s, func(tx store.Tx) error { return tx.UpdateChatMeta(t.Context(), &got) })
		check("after UpdateChatMeta", getChat(t, s, c.ID))
		mustTransition(t, s, c.ID, store.Transition{From: chat.Pending, To: chat.Waiting})
	}
}

func testInsertDuplicate(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	first := addChat(t, s, chat.Chat{ID: "dup", Title: "first"})
	// The failed insert leaves the transaction usable: a PostgreSQL error
	// would abort it, so the store must not raise one.
	inTx(t, s, func(tx store.Tx) error {
		c := chat.Chat{ID: "dup", Owner: "alice", Model: "m", Status: chat.Waiting, Title: "second"}
		wantErr(t, "InsertChat duplicate", tx.InsertChat(t.Context(), &c), store.ErrExists)
		other := chat.Chat{ID: "other", Owner: "alice", Model: "m", Status: chat.Waiting}
		return tx.InsertChat(t.Context(), &other)
	})
	wantEqual(t, "first chat", getChat(t, s, "dup"), first)
	getChat(t, s, "other")
}

func testInsertUnknownOwner(t *testing.T, open opener) {
	s := open(t)
	inTx(t, s, func(tx store.Tx) error {
		c := chat.Chat{ID: "c", Owner: "nobody", Model: "m", Status: chat.Waiting}
		wantErr(t, "InsertChat unknown owner", tx.InsertChat(t.Context(), &c), store.ErrNotFound)
		_, err := tx.CreateOwner(t.Context(), "alice") // the transaction goes on
		return err
	})
	_, err := s.GetChat(t.Context(), "c")
	wantErr(t, "GetChat", err, store.ErrNotFound)
}

func testInsertInvalid(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	for name, c := range map[string]chat.Chat{
		"no id":      {Owner: "alice", Model: "m", Status: chat.Waiting},
		"no owner":   {ID: "x", Model: "m", Status: chat.Waiting},
		"no model":   {ID: "x", Owner: "alice", Status: chat.Waiting},
		"no status":  {ID: "x", Owner: "alice", Model: "m"},
		"bad status": {ID: "x", Owner: "alice", Model: "m", Status: "sleeping"},
		// A chat is created waiting or pending (the state table's first
		// row), never straight into another status.
		"created running":         {ID: "x", Owner: "alice", Model: "m", Status: chat.Running},
		"created requires_action": {ID: "x", Owner: "alice", Model: "m", Status: chat.RequiresAction},
		"created in error":        {ID: "x", Owner: "alice", Model: "m", Status: chat.Error},
	} {
		err := txErr(t, s, func(tx store.Tx) error { return tx.InsertChat(t.Context(), &c) })
		if err == nil {
			t.Errorf("InsertChat with %s: no error", name)
		}
	}
}

func testGetMissing(t *testing.T, open opener) {
	s := open(t)
	_, err := s.GetChat(t.Context(), "missing")
	wantErr(t, "GetChat", err, store.ErrNotFound)
	err = txErr(t, s, func(tx store.Tx) error {
		_, err := tx.LockChat(t.Context(), "missing")
		return err
	})
	wantErr(t, "LockChat", err, store.ErrNotFound)
}

func testUpdateMeta(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	orig := addChat(t, s, fullChat())
	mark := clockPast(t, orig.UpdatedAt)

	c := orig
	c.Title = "renamed"
	c.Labels = map[string]string{"only": "this"}
	c.Archived = false
	// Fields that UpdateChatMeta does not write.
	c.Model, c.SystemPrompt, c.Status = "other", "other", chat.Error
	inTx(t, s, func(tx store.Tx) error { return tx.UpdateChatMeta(t.Context(), &c) })
	if c.UpdatedAt.Before(mark) {
		t.Fatalf("UpdatedAt = %v, not bumped past %v", c.UpdatedAt, mark)
	}
	want := stored(orig)
	want.Title, want.Labels, want.Archived, want.UpdatedAt = "renamed", map[string]string{"only": "this"}, false, c.UpdatedAt
	want.Version = orig.Version + 1
	wantEqual(t, "after UpdateChatMeta", getChat(t, s, c.ID), want)

	// nil labels clear them.
	c.Labels = nil
	inTx(t, s, func(tx store.Tx) error { return tx.UpdateChatMeta(t.Context(), &c) })
	if got := getChat(t, s, c.ID); got.Labels == nil || len(got.Labels) != 0 {
		t.Fatalf("Labels = %#v, want an empty map", got.Labels)
	}

	missing := chat.Chat{ID: "missing", Title: "x"}
	err := txErr(t, s, func(tx store.Tx) error { return tx.UpdateChatMeta(t.Context(), &missing) })
	wantErr(t, "UpdateChatMeta missing", err, store.ErrNotFound)
}

func testSetInterrupt(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	for _, v := range []bool{true, false, true} {
		inTx(t, s, func(tx store.Tx) error { return tx.SetInterruptRequested(t.Context(), c.ID, v) })
		if got := getChat(t, s, c.ID).InterruptRequested; got != v {
			t.Fatalf("InterruptRequested = %v, want %v", got, v)
		}
	}
	err := txErr(t, s, func(tx store.Tx) error { return tx.SetInterruptRequested(t.Context(), "missing", true) })
	wantErr(t, "SetInterruptRequested missing", err, store.ErrNotFound)
}

func testDeleteCascades(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	keep := addChat(t, s, chat.Chat{})
	for _, id := range []string{c.ID, keep.ID} {
		inTx(t, s, func(tx store.Tx) error {
			if err := tx.InsertMessage(t.Context(), &chat.Message{ChatID: id, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("hi")}}); err != nil {
				return err
			}
			return tx.InsertQueued(t.Context(), &chat.QueuedMessage{ChatID: id, Parts: []chat.Part{chat.TextPart("later")}})
		})
	}
	inTx(t, s, func(tx store.Tx) error { return tx.DeleteChat(t.Context(), c.ID) })

	_, err := s.GetChat(t.Context(), c.ID)
	wantErr(t, "GetChat deleted", err, store.ErrNotFound)
	// Recreate the id: nothing of the old chat may show through.
	addChat(t, s, chat.Chat{ID: c.ID})
	if msgs := listMessages(t, s, c.ID, 0, 0); len(msgs) != 0 {
		t.Fatalf("messages of a deleted chat survived: %+v", msgs)
	}
	if qs := listQueued(t, s, c.ID); len(qs) != 0 {
		t.Fatalf("queued messages of a deleted chat survived: %+v", qs)
	}
	if msgs, qs := listMessages(t, s, keep.ID, 0, 0), listQueued(t, s, keep.ID); len(msgs) != 1 || len(qs) != 1 {
		t.Fatalf("the other chat lost its messages: %d messages, %d queued", len(msgs), len(qs))
	}
	err = txErr(t, s, func(tx store.Tx) error { return tx.DeleteChat(t.Context(), "missing") })
	wantErr(t, "DeleteChat missing", err, store.ErrNotFound)
}
