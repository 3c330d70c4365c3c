package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/invariant"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// totalFormat asks for {"total": <number>}.
func totalFormat() *chat.ResponseFormat {
	return &chat.ResponseFormat{Type: chat.FormatJSONSchema, JSONSchema: chat.OutputFormat{Name: "total", Strict: true,
		Schema: json.RawMessage(`{"type":"object","properties":{"total":{"type":"number"}},"required":["total"],"additionalProperties":false}`)}}
}

// createFormatted makes a chat answering in format, with a first message
// and the options of opt applied to the request.
func (h *harness) createFormatted(msg string, format *chat.ResponseFormat, opt ...func(*service.NewChat)) chat.Chat {
	h.t.Helper()
	raw, _ := json.Marshal(msg)
	in := service.NewChat{Message: raw, Title: "test chat", ResponseFormat: format}
	for _, o := range opt {
		o(&in)
	}
	c, err := h.svc.CreateChat(context.Background(), owner, in)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// post sends a user message asking for format (nil: the chat's).
func (h *harness) post(id, msg string, format *chat.ResponseFormat) service.PostResult {
	h.t.Helper()
	raw, _ := json.Marshal(msg)
	res, err := h.svc.Post(context.Background(), owner, id, service.Post{Content: raw, ResponseFormat: format})
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// checkInvariant checks the chat's history as every test that runs chats
// does.
func (h *harness) checkInvariant(id string) {
	h.t.Helper()
	c, err := h.st.GetChat(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	msgs := h.history(id)
	if err := chat.CheckHistory(c.Status, msgs, invariant.MayWait(c, msgs)); err != nil {
		h.t.Fatalf("history invariant: %v", err)
	}
}

// repairs returns the repair requests of a history.
func repairs(msgs []chat.Message) []chat.Message {
	var out []chat.Message
	for _, m := range msgs {
		if chat.IsRepair(m) {
			out = append(out, m)
		}
	}
	return out
}

// requestFormat returns the response_format a request to the fake sent
// (nil: none).
func requestFormat(t *testing.T, r llmtest.Request) json.RawMessage {
	t.Helper()
	var body struct {
		ResponseFormat json.RawMessage `json:"response_format"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.ResponseFormat
}

// wantOutput fails the test unless the last message of the chat is an
// answer whose output is want, valid against format.
func (h *harness) wantOutput(id string, format *chat.ResponseFormat, want string) {
	h.t.Helper()
	msgs := h.history(id)
	last := msgs[len(msgs)-1]
	out := chat.OutputOf(last)
	if last.Role != chat.RoleAssistant || string(out) != want {
		h.t.Fatalf("last message = %+v; want an answer with output %s", last, want)
	}
	if _, err := format.JSONSchema.Parse(string(out)); err != nil {
		h.t.Fatalf("the stored output is not valid against the format: %v", err)
	}
	got, err := h.svc.GetChat(context.Background(), owner, id)
	if err != nil || string(got.Output) != want {
		h.t.Fatalf("GetChat output = %s, %v; want %s", got.Output, err, want)
	}
}

// TestOutputRepairedOnce: an answer that is not JSON gets one repair
// request quoting what was wrong; the model's JSON answer is then stored
// with its output, which GET shows.
func TestOutputRepairedOnce(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		h.fake.Push(llmtest.Turn{Text: "The total is 3."}, llmtest.Turn{Text: "```json\n{\"total\": 3}\n```"})
		h.start(nil)
		c := h.createFormatted("what is 1+2?", totalFormat())
		h.waitStatus(c.ID, chat.Waiting)
		msgs := h.history(c.ID)
		rs := repairs(msgs)
		if len(msgs) != 4 || len(rs) != 1 {
			t.Fatalf("history = %+v; want question, answer, one repair request, answer", msgs)
		}
		if text := rs[0].Parts[0].Text; !strings.Contains(text, "not valid JSON") || !strings.Contains(text, `"total"`) {
			t.Fatalf("repair request = %q; want it to quote the error and name the format", text)
		}
		h.wantOutput(c.ID, totalFormat(), `{"total":3}`)
		reqs := h.fake.Requests()
		if len(reqs) != 2 {
			t.Fatalf("requests = %d, want 2", len(reqs))
		}
		for i, r := range reqs {
			if f := string(requestFormat(t, r)); !strings.Contains(f, `"json_schema"`) || !strings.Contains(f, `"strict":true`) || !strings.Contains(f, `"name":"total"`) {
				t.Fatalf("request %d response_format = %s; want the chat's json_schema", i, f)
			}
		}
		// The model sees the repair request as the user's text, and never
		// an output part.
		var second struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(reqs[1].Body, &second); err != nil {
			t.Fatal(err)
		}
		lastMsg := second.Messages[len(second.Messages)-1]
		if lastMsg.Role != "user" || !strings.Contains(toJSON(lastMsg.Content), "Answer again with only a JSON value") {
			t.Fatalf("the model's last message = %+v; want the repair request as a user message", lastMsg)
		}
		h.checkInvariant(c.ID)
	})
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestOutputNeverValid: a model that never answers in the format gets
// exactly max_repairs repair requests, then the chat is in error
// structured_output_invalid (retryable); a retry asks once more, and the
// valid answer then ends the turn.
func TestOutputNeverValid(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		h.fake.Push(llmtest.Turn{Text: "no"}, llmtest.Turn{Text: `{"total": "three"}`}, llmtest.Turn{Text: "still no"})
		h.start(nil)
		c := h.createFormatted("what is 1+2?", totalFormat())
		got := h.waitStatus(c.ID, chat.Error)
		if got.LastError == nil || got.LastError.Kind != chat.KindOutputInvalid || !got.LastError.Retryable ||
			!strings.Contains(got.LastError.Message, "retry") {
			t.Fatalf("last_error = %+v; want a retryable %s that says how to go on", got.LastError, chat.KindOutputInvalid)
		}
		msgs := h.history(c.ID)
		if n := len(repairs(msgs)); n != 2 {
			t.Fatalf("%d repair requests, want exactly max_repairs = 2: %+v", n, msgs)
		}
		if !strings.Contains(repairs(msgs)[1].Parts[0].Text, "total") {
			t.Fatalf("the second repair request = %q; want the schema's error", repairs(msgs)[1].Parts[0].Text)
		}
		if got, _ := h.svc.GetChat(context.Background(), owner, c.ID); got.Output != nil {
			t.Fatalf("a failed turn shows output %s", got.Output)
		}
		h.checkInvariant(c.ID)

		h.fake.Push(llmtest.Turn{Text: `{"total": 3}`})
		if _, err := h.svc.Retry(context.Background(), owner, c.ID); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(c.ID, chat.Waiting)
		if n := len(repairs(h.history(c.ID))); n != 3 {
			t.Fatalf("%d repair requests after the retry, want 3", n)
		}
		h.wantOutput(c.ID, totalFormat(), `{"total":3}`)
		h.checkInvariant(c.ID)
	})
}

// TestOutputNoRepairs: with repairs off, the first invalid answer ends
// the turn in error.
func TestOutputNoRepairs(t *testing.T) {
	h := newHarness(t, func(c *engine.Config) { c.MaxRepairs = -1 })
	h.fake.Push(llmtest.Turn{Text: "no"})
	h.start(nil)
	c := h.createFormatted("what is 1+2?", totalFormat())
	got := h.waitStatus(c.ID, chat.Error)
	if got.LastError.Kind != chat.KindOutputInvalid || len(repairs(h.history(c.ID))) != 0 {
		t.Fatalf("last_error %+v, history %+v; want the error and no repair request", got.LastError, h.history(c.ID))
	}
	h.checkInvariant(c.ID)
}

// TestOutputFormatForOneTurn: a message's format holds for its turn
// only; the next message's turn is free text again.
func TestOutputFormatForOneTurn(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{Text: "hello"}, llmtest.Turn{Text: `{"total": 3}`}, llmtest.Turn{Text: "plain again"})
	h.start(nil)
	c := h.create("hi")
	h.waitStatus(c.ID, chat.Waiting)
	h.post(c.ID, "what is 1+2?", totalFormat())
	h.waitStatus(c.ID, chat.Waiting)
	h.wantOutput(c.ID, totalFormat(), `{"total":3}`)
	h.post(c.ID, "thanks", nil)
	h.waitStatus(c.ID, chat.Waiting)
	reqs := h.fake.Requests()
	if requestFormat(t, reqs[0]) != nil || requestFormat(t, reqs[1]) == nil || requestFormat(t, reqs[2]) != nil {
		t.Fatalf("response_format of the three requests: %s, %s, %s; want only the second's", requestFormat(t, reqs[0]),
			requestFormat(t, reqs[1]), requestFormat(t, reqs[2]))
	}
	if got, _ := h.svc.GetChat(context.Background(), owner, c.ID); got.Output != nil {
		t.Fatalf("a free-text turn shows output %s", got.Output)
	}
	// A message's {"type": "text"} turns a chat's format off for its turn.
	h.fake.Push(llmtest.Turn{Text: `{"total": 1}`}, llmtest.Turn{Text: "free"})
	f := h.createFormatted("hi", totalFormat())
	h.waitStatus(f.ID, chat.Waiting)
	h.post(f.ID, "say it in words", &chat.ResponseFormat{Type: chat.FormatText})
	h.waitStatus(f.ID, chat.Waiting)
	if n := len(repairs(h.history(f.ID))); n != 0 {
		t.Fatalf("a text turn got %d repair requests", n)
	}
	h.checkInvariant(c.ID)
	h.checkInvariant(f.ID)
}

// TestOutputFormatOfQueuedMessage: a message queued while the chat runs
// takes its format with it into the turn it starts.
func TestOutputFormatOfQueuedMessage(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	started := make(chan struct{})
	h.fake.Push(llmtest.Turn{Text: "first", Gate: gate, Started: started}, llmtest.Turn{Text: `{"total": 3}`})
	h.start(nil)
	c := h.create("hi")
	<-started
	res := h.post(c.ID, "what is 1+2?", totalFormat())
	if res.Queued == nil || res.Queued.ResponseFormat == nil {
		t.Fatalf("post = %+v; want the message queued with its format", res)
	}
	close(gate)
	h.waitRequests(2)
	h.waitStatus(c.ID, chat.Waiting)
	h.wantOutput(c.ID, totalFormat(), `{"total":3}`)
	h.checkInvariant(c.ID)
}

// TestOutputFormatSurvivesPauses: the turn's format holds across a wait
// for a person's approval and a wait for a client's tool results.
func TestOutputFormatSurvivesPauses(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		d, _ := effectTool(t, nil, nil)
		h.fake.Push(
			llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "effect", Args: `{}`}}},
			llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c2", Name: "lookup", Args: `{}`}}},
			llmtest.Turn{Text: "not json"},
			llmtest.Turn{Text: `{"total": 3}`},
		)
		h.start(d)
		c := h.createFormatted("do it", totalFormat(), func(in *service.NewChat) {
			in.Approve = []string{"effect"}
			in.DynamicTools = []chat.DynamicTool{{Name: "lookup", Description: "looks up", InputSchema: json.RawMessage(`{"type":"object"}`)}}
		})
		h.waitStatus(c.ID, chat.RequiresAction)
		if _, err := h.svc.SubmitApprovals(context.Background(), service.Decider{Owner: owner, Token: "t"}, c.ID,
			[]service.Decision{{ToolCallID: "c1", Approve: true}}); err != nil {
			t.Fatal(err)
		}
		h.waitRequests(2)
		h.waitStatus(c.ID, chat.RequiresAction)
		if _, err := h.svc.SubmitToolResults(context.Background(), owner, c.ID,
			[]service.ToolResult{{ToolCallID: "c2", Output: json.RawMessage(`{"total":3}`)}}); err != nil {
			t.Fatal(err)
		}
		h.waitRequests(4)
		h.waitStatus(c.ID, chat.Waiting)
		h.wantOutput(c.ID, totalFormat(), `{"total":3}`)
		if n := len(repairs(h.history(c.ID))); n != 1 {
			t.Fatalf("%d repair requests, want 1", n)
		}
		for i, r := range h.fake.Requests() {
			if requestFormat(t, r) == nil {
				t.Fatalf("request %d has no response_format", i)
			}
		}
		h.checkInvariant(c.ID)
	})
}

// TestOutputFormatSurvivesCompaction: a compaction between turns leaves
// the chat's format in force, and the summary request carries none.
func TestOutputFormatSurvivesCompaction(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{Text: `{"total": 1}`}, llmtest.Turn{Text: `{"total": 2}`},
		llmtest.Turn{Text: "a summary of two sums"}, llmtest.Turn{Text: "oops"}, llmtest.Turn{Text: `{"total": 3}`})
	h.start(nil)
	c := h.createFormatted("0+1?", totalFormat())
	h.waitStatus(c.ID, chat.Waiting)
	h.post(c.ID, "1+1?", nil)
	h.waitStatus(c.ID, chat.Waiting)
	if _, err := h.svc.Compact(context.Background(), owner, c.ID); err != nil {
		t.Fatal(err)
	}
	h.waitRequests(3)
	h.waitStatus(c.ID, chat.Waiting)
	h.post(c.ID, "1+2?", nil)
	h.waitRequests(5)
	h.waitStatus(c.ID, chat.Waiting)
	h.wantOutput(c.ID, totalFormat(), `{"total":3}`)
	reqs := h.fake.Requests()
	if requestFormat(t, reqs[2]) != nil {
		t.Fatalf("the summary request sent response_format %s", requestFormat(t, reqs[2]))
	}
	if requestFormat(t, reqs[3]) == nil || requestFormat(t, reqs[4]) == nil {
		t.Fatal("a turn after the compaction sent no response_format")
	}
	h.checkInvariant(c.ID)
}

// bigTool is a registry with one server-side tool, "fetch", whose result
// is size characters of text.
func bigTool(t *testing.T, size int) *tools.Dispatcher {
	t.Helper()
	reg := tools.NewRegistry(nil)
	fetch := tool.Func(tool.Decl{Name: "fetch", Description: "fetches a long page"},
		func(context.Context, tool.Call) (tool.Result, error) {
			return tool.Text(strings.Repeat("r", size)), nil
		})
	if err := reg.AddTool(fetch); err != nil {
		t.Fatal(err)
	}
	return tools.NewDispatcher(reg, tools.Options{}, nil)
}

// TestOutputFormatSurvivesCompactionMidTurn: a structured turn whose tool
// result makes the history too long is summarised between its tool step
// and its final answer (before the step passes the threshold, or after the
// model refuses it as too long); the summarising request carries no
// format, the step after it carries the turn's, and the final answer's
// output is stored and valid.
func TestOutputFormatSurvivesCompactionMidTurn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window int64 // the window parley knows: 0 makes the model refuse the step
		source string
	}{
		{"threshold", 3000, chat.CompactAuto},
		{"overflow", 0, chat.CompactOverflow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onBothStores(t, func(t *testing.T, h *harness) {
				ctx := context.Background()
				h.fake.SetContextWindow(3000)
				c, err := h.svc.CreateChat(ctx, owner, service.NewChat{Title: "long chat", ResponseFormat: totalFormat()})
				if err != nil {
					t.Fatal(err)
				}
				_, err = h.st.InTx(ctx, func(tx store.Tx) error {
					for i := range 4 { // ~2,000 tokens of earlier turns
						for _, m := range []chat.Message{
							{ChatID: c.ID, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart(turnText("question", i, 1000))}},
							{ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart(fmt.Sprintf(`{"total": %d}`, i)),
								{Type: chat.PartOutput, JSON: json.RawMessage(fmt.Sprintf(`{"total":%d}`, i))}}},
						} {
							if err := tx.InsertMessage(ctx, &m); err != nil {
								return err
							}
						}
					}
					return nil
				}), error(nil)
				if err != nil {
					t.Fatal(err)
				}
				h.fake.Push(
					llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "fetch", Args: `{}`}}},
					llmtest.Turn{Text: "SUMMARY-MID-TURN"},
					llmtest.Turn{Text: `{"total": 3}`},
				)
				h.startOn(h.st, h.ps, h.windowed(tc.window), bigTool(t, 8000)) // the result: ~2,000 tokens
				h.post(c.ID, strings.Repeat("question-last ", 40), nil)
				h.waitStatus(c.ID, chat.Waiting)

				cs := h.compactions(c.ID)
				if len(cs) != 1 || cs[0].Source != tc.source || cs[0].Summary != "SUMMARY-MID-TURN" {
					for _, r := range h.fake.Requests() {
						t.Logf("request: %d tokens, over %v", r.PromptTokens, r.OverWindow)
					}
					t.Fatalf("compactions %+v, want one %s summary", cs, tc.source)
				}
				var summarising, after int = -1, -1
				reqs := h.fake.Requests()
				for i, r := range reqs {
					switch text := requestText(r); {
					case strings.Contains(text, "summarise a conversation"):
						summarising = i
					case strings.Contains(text, "SUMMARY-MID-TURN") && !r.OverWindow:
						after = i
					}
				}
				if summarising < 1 || after != len(reqs)-1 || summarising > after {
					t.Fatalf("requests %d: the summarising one at %d, the step after it at %d; want the tool step, the summary, the step", len(reqs), summarising, after)
				}
				if f := requestFormat(t, reqs[summarising]); f != nil {
					t.Fatalf("the summarising request sent response_format %s", f)
				}
				for _, i := range []int{0, after} {
					if f := string(requestFormat(t, reqs[i])); !strings.Contains(f, `"name":"total"`) {
						t.Fatalf("request %d response_format = %q; want the turn's", i, f)
					}
				}
				if last := requestText(reqs[after]); !strings.Contains(last, `"tool_call_id":"c1"`) || strings.Contains(last, "question-A") {
					t.Fatalf("the step after the summary does not keep the turn's tool call and drop the earlier turns: %.400s", last)
				}
				if got := h.fake.MaxPromptTokens(); tc.window > 0 && got > 3000 {
					t.Fatalf("a request of %d tokens passed the window", got)
				}
				h.wantOutput(c.ID, totalFormat(), `{"total":3}`)
				h.checkInvariant(c.ID)
			})
		})
	}
}
