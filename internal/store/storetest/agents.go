package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

var agentTests = map[string]func(*testing.T, opener){
	"RoundTrip":                        testAgentRoundTrip,
	"UniqueNamePerOwner":               testAgentUniquePerOwner,
	"VersionsImmutable":                testAgentVersionsImmutable,
	"ConcurrentWritesDistinctVersions": testAgentConcurrentWrites,
	"DeleteKeepsVersions":              testAgentDeleteKeepsVersions,
	"UnknownOwner":                     testAgentUnknownOwner,
	"ChatColumns":                      testAgentChatColumns,
}

// putAgent writes a as the next version of its name (1 for a new name),
// under the owner's lock as the service writes, and returns it as stored.
func putAgent(t *testing.T, s store.Store, a agent.Agent) agent.Agent {
	t.Helper()
	inTx(t, s, func(tx store.Tx) error { return putNext(t, tx, &a) })
	return a
}

// putNext writes a as the version after the name's last one.
func putNext(t *testing.T, tx store.Tx, a *agent.Agent) error {
	if err := tx.LockOwner(t.Context(), a.Owner); err != nil {
		return err
	}
	cur, err := tx.GetAgent(t.Context(), a.Owner, a.Name)
	switch {
	case err == nil:
		a.Version = cur.Version + 1
	case errors.Is(err, store.ErrNotFound):
		a.Version = 1
	default:
		return err
	}
	return tx.PutAgentVersion(t.Context(), a)
}

func sampleAgent(owner, name string) agent.Agent {
	return agent.Agent{Owner: owner, Name: name, Definition: agent.Definition{
		Description:  "finds things",
		Model:        "m",
		SystemPrompt: "You research.",
		Tools:        chat.ToolGlobs{"http_*"},
		Approve:      chat.ToolGlobs{"http_fetch"},
		DynamicTools: []chat.DynamicTool{{Name: "ask", Description: "asks", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"number"}}}`),
		Subagents:    []string{"helper"},
		Labels:       map[string]string{"team": "x"},
		Limits:       agent.Limits{MaxSteps: 5, Timeout: "10m"},
	}}
}

func testAgentRoundTrip(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	before := now()
	a := putAgent(t, s, sampleAgent("alice", "researcher"))
	if a.Version != 1 || a.Source != agent.SourceAPI || a.CreatedAt.Before(before) || !a.UpdatedAt.Equal(a.CreatedAt) {
		t.Fatalf("put = version %d source %q created %v updated %v", a.Version, a.Source, a.CreatedAt, a.UpdatedAt)
	}
	got, err := s.GetAgent(t.Context(), "alice", "researcher")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "GetAgent", got, a)
	// The schema keeps its text (key order included): models follow it.
	if string(got.OutputSchema) != `{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"number"}}}` {
		t.Fatalf("output_schema = %s", got.OutputSchema)
	}
	// nil tools (every server tool) and [] (none) stay apart.
	none := agent.Agent{Owner: "alice", Name: "plain", Definition: agent.Definition{Tools: chat.ToolGlobs{}}}
	putAgent(t, s, none)
	every := putAgent(t, s, agent.Agent{Owner: "alice", Name: "every"})
	p, _ := s.GetAgent(t.Context(), "alice", "plain")
	e, _ := s.GetAgent(t.Context(), "alice", "every")
	if p.Tools == nil || len(p.Tools) != 0 || e.Tools != nil || e.OutputSchema != nil || every.Labels == nil {
		t.Fatalf("tools: plain %#v, every %#v (schema %s)", p.Tools, e.Tools, e.OutputSchema)
	}
	list, err := s.ListAgents(t.Context(), "alice")
	if err != nil || len(list) != 3 || list[0].Name != "every" || list[1].Name != "plain" || list[2].Name != "researcher" {
		t.Fatalf("ListAgents = %v, %v; want every, plain, researcher", names(list), err)
	}
	other, err := s.ListAgents(t.Context(), "bob")
	if err != nil || len(other) != 0 {
		t.Fatalf("ListAgents(bob) = %v, %v; want none", names(other), err)
	}
	_, err = s.GetAgent(t.Context(), "bob", "researcher")
	wantErr(t, "another owner's agent", err, store.ErrNotFound)
}

func names(as []agent.Agent) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, fmt.Sprintf("%s@%d", a.Name, a.Version))
	}
	return out
}

// A name is unique per owner: a second version 1 is refused with
// ErrExists, the first stays, and the transaction goes on.
func testAgentUniquePerOwner(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addOwner(t, s, "bob")
	first := putAgent(t, s, sampleAgent("alice", "researcher"))
	putAgent(t, s, sampleAgent("bob", "researcher")) // another owner: its own name
	inTx(t, s, func(tx store.Tx) error {
		dup := agent.Agent{Owner: "alice", Name: "researcher", Version: 1, Definition: agent.Definition{Description: "other"}}
		wantErr(t, "duplicate", tx.PutAgentVersion(t.Context(), &dup), store.ErrExists)
		again := agent.Agent{Owner: "alice", Name: "coder", Version: 1}
		return tx.PutAgentVersion(t.Context(), &again)
	})
	got, _ := s.GetAgent(t.Context(), "alice", "researcher")
	wantEqual(t, "agent after the refused duplicate", got, first)
	if _, err := s.GetAgent(t.Context(), "alice", "coder"); err != nil {
		t.Fatalf("the write after the refusal: %v", err)
	}
}

// Every change is a new version; an old one never changes, and a version
// number is never written twice.
func testAgentVersionsImmutable(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	v1 := putAgent(t, s, sampleAgent("alice", "researcher"))
	next := sampleAgent("alice", "researcher")
	next.SystemPrompt = "You research harder."
	v2 := putAgent(t, s, next)
	if v2.Version != 2 || !v2.CreatedAt.Equal(v1.CreatedAt) {
		t.Fatalf("second version = %d created %v; want 2 created %v", v2.Version, v2.CreatedAt, v1.CreatedAt)
	}
	old, err := s.GetAgentVersion(t.Context(), "alice", "researcher", 1)
	if err != nil || old.SystemPrompt != "You research." || old.Version != 1 {
		t.Fatalf("version 1 = %q v%d, %v", old.SystemPrompt, old.Version, err)
	}
	err = txErr(t, s, func(tx store.Tx) error {
		again := sampleAgent("alice", "researcher")
		again.Version, again.SystemPrompt = 2, "overwrite"
		return tx.PutAgentVersion(t.Context(), &again)
	})
	wantErr(t, "writing version 2 again", err, store.ErrExists)
	cur, _ := s.GetAgent(t.Context(), "alice", "researcher")
	if cur.Version != 2 || cur.SystemPrompt != "You research harder." {
		t.Fatalf("current = v%d %q after the refused rewrite", cur.Version, cur.SystemPrompt)
	}
	vs, err := s.ListAgentVersions(t.Context(), "alice", "researcher")
	if err != nil || len(vs) != 2 || vs[0].Version != 1 || vs[1].Version != 2 || vs[0].SystemPrompt != "You research." {
		t.Fatalf("ListAgentVersions = %v, %v", names(vs), err)
	}
	if !vs[1].CreatedAt.Equal(v2.UpdatedAt) {
		t.Fatalf("version 2 created_at %v, want its write's time %v", vs[1].CreatedAt, v2.UpdatedAt)
	}
	_, err = s.GetAgentVersion(t.Context(), "alice", "researcher", 3)
	wantErr(t, "unknown version", err, store.ErrNotFound)
	_, err = s.ListAgentVersions(t.Context(), "alice", "nobody")
	wantErr(t, "versions of an unknown agent", err, store.ErrNotFound)
}

// Writers that read the agent and write the next version under the
// owner's lock, started together, each make a version of their own and
// lose nothing of the others' changes.
func testAgentConcurrentWrites(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	putAgent(t, s, agent.Agent{Owner: "alice", Name: "researcher"})
	const writers = 4
	var ready, done sync.WaitGroup
	ready.Add(writers)
	errs := make([]error, writers)
	versions := make([]int, writers)
	for i := range writers {
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			ready.Wait() // the barrier: every writer starts at once
			errs[i] = s.InTx(t.Context(), func(tx store.Tx) error {
				if err := tx.LockOwner(t.Context(), "alice"); err != nil {
					return err
				}
				cur, err := tx.GetAgent(t.Context(), "alice", "researcher")
				if err != nil {
					return err
				}
				next := cur
				next.Labels = map[string]string{}
				for k, v := range cur.Labels {
					next.Labels[k] = v
				}
				next.Labels[fmt.Sprintf("w%d", i)] = "yes"
				next.Version = cur.Version + 1
				if err := tx.PutAgentVersion(t.Context(), &next); err != nil {
					return err
				}
				versions[i] = next.Version
				return nil
			})
		}()
	}
	done.Wait()
	seen := map[int]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		if seen[versions[i]] {
			t.Fatalf("two writers made version %d", versions[i])
		}
		seen[versions[i]] = true
	}
	cur, err := s.GetAgent(t.Context(), "alice", "researcher")
	if err != nil || cur.Version != writers+1 || len(cur.Labels) != writers {
		t.Fatalf("after %d writers: version %d labels %v, %v; want version %d with every writer's label", writers, cur.Version, cur.Labels, err, writers+1)
	}
}

// A deleted agent is gone from reads of agents, its versions stay
// readable by number, and its name can be taken again: the new agent's
// versions continue the numbering, so a chat's (name, version) names one
// definition forever.
func testAgentDeleteKeepsVersions(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	putAgent(t, s, sampleAgent("alice", "researcher"))
	second := sampleAgent("alice", "researcher")
	second.Description = "v2"
	putAgent(t, s, second)
	inTx(t, s, func(tx store.Tx) error { return tx.DeleteAgent(t.Context(), "alice", "researcher") })
	err := txErr(t, s, func(tx store.Tx) error { return tx.DeleteAgent(t.Context(), "alice", "researcher") })
	wantErr(t, "deleting twice", err, store.ErrNotFound)
	err = txErr(t, s, func(tx store.Tx) error { return tx.DeleteAgent(t.Context(), "alice", "nobody") })
	wantErr(t, "deleting an unknown agent", err, store.ErrNotFound)

	got, err := s.GetAgent(t.Context(), "alice", "researcher")
	if err != nil || !got.Deleted || got.Version != 2 {
		t.Fatalf("GetAgent after delete = deleted %v v%d, %v; want deleted v2", got.Deleted, got.Version, err)
	}
	list, _ := s.ListAgents(t.Context(), "alice")
	if len(list) != 0 {
		t.Fatalf("ListAgents after delete = %v", names(list))
	}
	for v, desc := range map[int]string{1: "finds things", 2: "v2"} {
		old, err := s.GetAgentVersion(t.Context(), "alice", "researcher", v)
		if err != nil || old.Description != desc {
			t.Fatalf("version %d of the deleted agent = %q, %v", v, old.Description, err)
		}
	}

	clockPast(t, got.CreatedAt)
	again := putAgent(t, s, agent.Agent{Owner: "alice", Name: "researcher", Definition: agent.Definition{Description: "new"}})
	if again.Version != 3 || again.Deleted || !again.CreatedAt.After(got.CreatedAt) {
		t.Fatalf("re-created = v%d deleted %v created %v; want v3, live, created after %v", again.Version, again.Deleted, again.CreatedAt, got.CreatedAt)
	}
	vs, err := s.ListAgentVersions(t.Context(), "alice", "researcher")
	if err != nil || len(vs) != 3 || vs[2].Description != "new" || vs[0].Description != "finds things" {
		t.Fatalf("versions after re-creating = %v, %v", names(vs), err)
	}
}

func testAgentUnknownOwner(t *testing.T, open opener) {
	s := open(t)
	err := txErr(t, s, func(tx store.Tx) error {
		a := agent.Agent{Owner: "ghost", Name: "x", Version: 1}
		return tx.PutAgentVersion(t.Context(), &a)
	})
	wantErr(t, "agent of an unknown owner", err, store.ErrNotFound)
}

// A chat keeps the agent and version it was made from, and moving it to
// another version writes the fields that version gives it.
func testAgentChatColumns(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	plain := addChat(t, s, chat.Chat{})
	if got := getChat(t, s, plain.ID); got.Agent != "" || got.AgentVersion != 0 {
		t.Fatalf("chat without agent = %q v%d", got.Agent, got.AgentVersion)
	}
	c := addChat(t, s, chat.Chat{Agent: "researcher", AgentVersion: 2, SystemPrompt: "old", MaxSteps: 7, ResponseFormat: invoiceFormat()})
	got := getChat(t, s, c.ID)
	if got.Agent != "researcher" || got.AgentVersion != 2 || got.MaxSteps != 7 {
		t.Fatalf("chat = agent %q v%d max_steps %d; want researcher v2, 7", got.Agent, got.AgentVersion, got.MaxSteps)
	}
	moved := got
	moved.AgentVersion, moved.Model, moved.SystemPrompt, moved.MaxSteps = 3, "m2", "new", 0
	moved.Tools, moved.Approve = chat.ToolGlobs{}, chat.ToolGlobs{"x_*"}
	moved.DynamicTools = []chat.DynamicTool{{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	moved.ResponseFormat = nil // the new version has no output schema
	inTx(t, s, func(tx store.Tx) error { return tx.SetChatAgentVersion(t.Context(), &moved) })
	if moved.Version != got.Version+1 || moved.UpdatedAt.Before(got.UpdatedAt) {
		t.Fatalf("version %d -> %d, updated %v -> %v", got.Version, moved.Version, got.UpdatedAt, moved.UpdatedAt)
	}
	after := getChat(t, s, c.ID)
	if after.AgentVersion != 3 || after.Model != "m2" || after.SystemPrompt != "new" || after.Tools == nil || after.MaxSteps != 0 ||
		len(after.Tools) != 0 || len(after.Approve) != 1 || len(after.DynamicTools) != 1 || after.Agent != "researcher" {
		t.Fatalf("after the move: %+v", after)
	}
	if after.ResponseFormat != nil {
		t.Fatalf("after a move to a version without output schema the chat keeps the format %+v", after.ResponseFormat)
	}
	// And back to a version with one.
	moved = after
	moved.AgentVersion, moved.ResponseFormat = 4, invoiceFormat()
	inTx(t, s, func(tx store.Tx) error { return tx.SetChatAgentVersion(t.Context(), &moved) })
	if f := getChat(t, s, c.ID).ResponseFormat; f == nil || f.JSONSchema.Name != "invoice" {
		t.Fatalf("after a move to a version with an output schema the format is %+v", f)
	}
	err := txErr(t, s, func(tx store.Tx) error {
		ghost := chat.Chat{ID: "00000000-0000-0000-0000-000000000000", AgentVersion: 1}
		return tx.SetChatAgentVersion(t.Context(), &ghost)
	})
	wantErr(t, "moving an unknown chat", err, store.ErrNotFound)
}
