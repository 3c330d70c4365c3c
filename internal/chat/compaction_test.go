package chat

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// genHistory makes a valid history of turns: a user message, then steps of
// an assistant message with 0..3 calls and their results, split over one
// or two tool messages.
func genHistory(rng *rand.Rand, turns int) []Message {
	var h []Message
	id, call := int64(0), 0
	add := func(role Role, parts ...Part) {
		id++
		h = append(h, Message{ID: id, ChatID: "c", Role: role, Parts: parts})
	}
	for range turns {
		add(RoleUser, TextPart(strings.Repeat("u", rng.IntN(200))))
		for s := rng.IntN(3); s >= 0; s-- {
			n := rng.IntN(4)
			if s == 0 {
				n = 0 // a turn ends with an answer
			}
			var calls, results []Part
			for range n {
				call++
				cid := fmt.Sprintf("call_%d", call)
				calls = append(calls, Part{Type: PartToolCall, ToolCallID: cid, ToolName: "t", Args: json.RawMessage(`{}`)})
				results = append(results, Part{Type: PartToolResult, ToolCallID: cid, ToolName: "t", Output: json.RawMessage(`"` + strings.Repeat("o", rng.IntN(400)) + `"`)})
			}
			add(RoleAssistant, append([]Part{TextPart("a")}, calls...)...)
			if n > 1 && rng.IntN(2) == 0 {
				add(RoleTool, results[:1]...)
				add(RoleTool, results[1:]...)
			} else if n > 0 {
				add(RoleTool, results...)
			}
		}
	}
	return h
}

// TestCompactionCutNeverSplitsAStep: over generated histories and every
// keep budget, the cut starts the verbatim part at a user message, keeps
// the last user message and what follows it, and parts no call from its
// results; a compaction at that cut keeps the history valid and the model's
// view paired.
func TestCompactionCutNeverSplitsAStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cuts := 0
	for i := range 300 {
		h := genHistory(rng, 1+rng.IntN(6))
		lastUser := 0
		for j, m := range h {
			if m.Role == RoleUser {
				lastUser = j
			}
		}
		for _, keep := range []int64{0, 50, 200, 1000, 1 << 40} {
			cut := CompactionCut(h, keep)
			if cut == 0 {
				if lastUser != 0 {
					t.Fatalf("history %d keep %d: nothing to compact, but %d turns", i, keep, lastUser)
				}
				continue
			}
			cuts++
			if h[cut].Role != RoleUser || cut > lastUser || SplitsStep(h, cut-1) {
				t.Fatalf("history %d keep %d: cut %d at a %s message (last user %d)", i, keep, cut, h[cut].Role, lastUser)
			}
			c := Message{ID: h[len(h)-1].ID + 1, ChatID: "c", Role: RoleAssistant,
				Parts: []Part{{Type: PartCompaction, Summary: "s", Source: CompactAuto, ThroughMessageID: h[cut-1].ID}}}
			withC := append(append([]Message{}, h...), c)
			if err := CheckHistory(Waiting, withC, nil); err != nil {
				t.Fatalf("history %d: compacted history breaks the invariant: %v", i, err)
			}
			view := ForModel(withC)
			if len(view) != len(ForModel(h[cut:]))+1 || !strings.HasPrefix(view[0].Parts[0].Text, SummaryPreamble) {
				t.Fatalf("history %d: the view is not the summary then the verbatim part", i)
			}
		}
	}
	if cuts == 0 {
		t.Fatal("no history had anything to compact")
	}
}

// TestCompactionCutKeepsWhatFits: more recent turns stay verbatim while
// they fit the keep budget.
func TestCompactionCutKeepsWhatFits(t *testing.T) {
	var h []Message
	for i := range 5 {
		h = append(h, Message{ID: int64(2*i + 1), Role: RoleUser, Parts: []Part{TextPart(strings.Repeat("x", 400))}},
			Message{ID: int64(2*i + 2), Role: RoleAssistant, Parts: []Part{TextPart(strings.Repeat("y", 400))}})
	}
	turn := EstimateTokens(h[0:2])
	for kept := 1; kept <= 4; kept++ {
		if got, want := CompactionCut(h, int64(kept)*turn), len(h)-2*kept; got != want {
			t.Errorf("keep %d turns: cut %d, want %d", kept, got, want)
		}
	}
	if got := CompactionCut(h, 0); got != 8 {
		t.Errorf("keep nothing: cut %d, want 8 (the last turn stays)", got)
	}
}

// TestForModelStartsAtTheNewestSummary: an older compaction is ignored, and
// messages up to the newest one's cut leave the view.
func TestForModelStartsAtTheNewestSummary(t *testing.T) {
	u := func(id int64, s string) Message { return Message{ID: id, Role: RoleUser, Parts: []Part{TextPart(s)}} }
	a := func(id int64, s string) Message {
		return Message{ID: id, Role: RoleAssistant, Parts: []Part{TextPart(s)}}
	}
	c := func(id, through int64, s string) Message {
		return Message{ID: id, Role: RoleAssistant, Parts: []Part{{Type: PartCompaction, Summary: s, ThroughMessageID: through}}}
	}
	h := []Message{u(1, "u1"), a(2, "a1"), u(3, "u2"), a(4, "a2"), c(5, 2, "first"), u(6, "u3"), a(7, "a3"), c(8, 4, "second"), u(9, "u4")}
	var got []string
	for _, m := range ForModel(h) {
		got = append(got, m.Parts[0].Text)
	}
	want := []string{SummaryPreamble + "second", "u3", "a3", "u4"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("view %q, want %q", got, want)
	}
	if err := CheckHistory(Pending, h, nil); err != nil {
		t.Fatal(err)
	}
}

// TestCheckHistoryCompactionRules: a compaction that cuts inside a step,
// or stands while a call is open, breaks the invariant; a call id reused
// after a compaction that hid the first one does not.
func TestCheckHistoryCompactionRules(t *testing.T) {
	call := func(id int64, cid string) Message {
		return Message{ID: id, Role: RoleAssistant, Parts: []Part{{Type: PartToolCall, ToolCallID: cid, ToolName: "t"}}}
	}
	res := func(id int64, cid string) Message {
		return Message{ID: id, Role: RoleTool, Parts: []Part{{Type: PartToolResult, ToolCallID: cid, ToolName: "t", Output: json.RawMessage(`1`)}}}
	}
	comp := func(id, through int64) Message {
		return Message{ID: id, Role: RoleAssistant, Parts: []Part{{Type: PartCompaction, Summary: "s", ThroughMessageID: through}}}
	}
	user := func(id int64) Message { return Message{ID: id, Role: RoleUser, Parts: []Part{TextPart("u")}} }
	done := func(id int64) Message { return Message{ID: id, Role: RoleAssistant, Parts: []Part{TextPart("ok")}} }

	reused := []Message{user(1), call(2, "call_1"), res(3, "call_1"), done(4), user(5), comp(6, 4), call(7, "call_1"), res(8, "call_1"), done(9)}
	if err := CheckHistory(Waiting, reused, nil); err != nil {
		t.Errorf("a call id reused where the first is hidden: %v", err)
	}
	reusedVisible := []Message{user(1), call(2, "call_1"), res(3, "call_1"), done(4), user(5), comp(6, 1), call(7, "call_1"), res(8, "call_1"), done(9)}
	if err := CheckHistory(Waiting, reusedVisible, nil); err == nil {
		t.Error("a call id reused within the model's view passed")
	}
	inside := []Message{user(1), call(2, "x"), res(3, "x"), done(4), user(5), comp(6, 2)}
	if err := CheckHistory(Waiting, inside, nil); err == nil {
		t.Error("a compaction cutting between a call and its result passed")
	}
	open := []Message{user(1), call(2, "x"), comp(3, 1), res(4, "x")}
	if err := CheckHistory(Waiting, open, nil); err == nil {
		t.Error("a compaction while a call is open passed")
	}
}

// TestTranscriptFitsItsBudget: a transcript too long for its budget clips
// tool outputs first, then leaves out the oldest messages, and always fits.
func TestTranscriptFitsItsBudget(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("z", 40000) + `"`)
	msgs := []Message{
		{ID: 1, Role: RoleUser, Parts: []Part{TextPart("first question about report.pdf")}},
		{ID: 2, Role: RoleAssistant, Parts: []Part{{Type: PartToolCall, ToolCallID: "c1", ToolName: "read", Args: json.RawMessage(`{"path":"report.pdf"}`)}}},
		{ID: 3, Role: RoleTool, Parts: []Part{{Type: PartToolResult, ToolCallID: "c1", ToolName: "read", Output: big}}},
		{ID: 4, Role: RoleAssistant, Parts: []Part{TextPart("the report says 42")}},
	}
	full := Transcript(nil, msgs, 1<<40)
	if !strings.Contains(full, strings.Repeat("z", 40000)) {
		t.Fatal("an unclipped transcript lost the output")
	}
	clipped := Transcript(nil, msgs, 2000)
	if EstimateText(clipped) > 2000 || !strings.Contains(clipped, "bytes clipped") || !strings.Contains(clipped, "first question") || !strings.Contains(clipped, "the report says 42") {
		t.Fatalf("clipped transcript (%d tokens) lost the messages or did not clip:\n%.500s", EstimateText(clipped), clipped)
	}
	tiny := Transcript(&Part{Summary: strings.Repeat("s", 4000)}, msgs, 100)
	if EstimateText(tiny) > 100 {
		t.Fatalf("a transcript over its budget: %d tokens", EstimateText(tiny))
	}
}

// TestContextAfterACompaction: an answer kept verbatim reported the tokens
// of what was summarised since; the context counts from the summary on.
func TestContextAfterACompaction(t *testing.T) {
	h := []Message{
		{ID: 1, Role: RoleUser, Parts: []Part{TextPart("old question")}},
		{ID: 2, Role: RoleAssistant, Parts: []Part{TextPart("old answer")}, Usage: &Usage{InputTokens: 90000, OutputTokens: 10}},
		{ID: 3, Role: RoleUser, Parts: []Part{TextPart("question")}},
		{ID: 4, Role: RoleAssistant, Parts: []Part{TextPart("answer")}, Usage: &Usage{InputTokens: 100000, OutputTokens: 100}},
	}
	if got := ContextTokens(h, 0); got != 100100 {
		t.Fatalf("before compacting: %d, want the reported 100100", got)
	}
	h = append(h, Message{ID: 5, Role: RoleAssistant, Parts: []Part{{Type: PartCompaction, Summary: "s", ThroughMessageID: 2}}})
	if got := ContextTokens(h, 0); got > 1000 {
		t.Fatalf("after compacting: %d, still the answer's report of what was summarised", got)
	}
	h = append(h, Message{ID: 6, Role: RoleUser, Parts: []Part{TextPart("next")}},
		Message{ID: 7, Role: RoleAssistant, Parts: []Part{TextPart("next answer")}, Usage: &Usage{InputTokens: 500, OutputTokens: 5}})
	if got := ContextTokens(h, 0); got != 505 {
		t.Fatalf("after a new answer: %d, want its report 505", got)
	}
}
