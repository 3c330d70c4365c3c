package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
)

// TestEveryMessageReachesTheSummariser is a property over message sizes:
// after any sequence of compactions (automatic ones as the chat nears the
// window, and requested ones at random), every message since the previous
// summary that a compaction summarises is in the summarising call's
// transcript, unless the transcript with all of them truly cannot fit the
// summarising model (three quarters of its window, less the call's
// instructions). The messages after the cut stay verbatim, so no message
// is in neither. Each of many seeded sequences mixes text turns of random
// sizes (a few characters to a few thousand) with tool calls and results
// short enough that no clipping changes them.
func TestEveryMessageReachesTheSummariser(t *testing.T) {
	windows := []int64{600, 1000, 3000, 8000}
	compactions, leftOut := 0, 0
	for seed := range uint64(120) {
		rng := rand.New(rand.NewPCG(seed, 7))
		window := windows[rng.IntN(len(windows))]
		limit := window*3/4 - chat.EstimateText(compactionPrompt+compactionAsk)
		var history []chat.Message
		id := int64(0)
		add := func(role chat.Role, parts ...chat.Part) {
			id++
			history = append(history, chat.Message{ID: id, ChatID: "c", Role: role, Parts: parts})
		}
		marker := func(kind string) string { return fmt.Sprintf("#%s-%d-%d#", kind, seed, id+1) }
		text := func(kind string) chat.Part {
			size := rng.IntN(2400)
			if rng.IntN(4) == 0 {
				size = rng.IntN(40)
			}
			return chat.TextPart(marker(kind) + strings.Repeat("w", size))
		}
		for turn := range 24 {
			add(chat.RoleUser, text("user"))
			if rng.IntN(3) == 0 {
				callID := fmt.Sprintf("call-%d", turn)
				args, _ := json.Marshal(marker("args"))
				add(chat.RoleAssistant, chat.Part{Type: chat.PartToolCall, ToolCallID: callID, ToolName: "t", Args: args})
				out, _ := json.Marshal(marker("out"))
				add(chat.RoleTool, chat.Part{Type: chat.PartToolResult, ToolCallID: callID, ToolName: "t", Output: out})
			}
			add(chat.RoleAssistant, text("answer"))

			due := float64(chat.ContextTokens(history, 0)) > 0.8*float64(window)
			if !due && rng.IntN(4) != 0 {
				continue
			}
			previous, live := chat.SplitAtSummary(history)
			cut := chat.CompactionCut(live, window/keepShare)
			if cut == 0 {
				continue
			}
			msgs := live[:cut]
			compactions++
			transcript := chat.Transcript(previous, msgs, transcriptBudget(previous, msgs, window))
			whole := chat.Transcript(previous, msgs, math.MaxInt64)
			fits := chat.EstimateText(whole) <= limit
			for _, m := range msgs {
				for _, p := range m.Parts {
					mark := strings.TrimPrefix(p.Text+string(p.Args)+string(p.Output), `"`)
					mark = mark[:1+strings.IndexByte(mark[1:], '#')+1]
					if strings.Contains(transcript, mark) {
						continue
					}
					if fits {
						t.Fatalf("seed %d, window %d: message %d (%s) is not in the summariser's transcript of %d tokens, "+
							"though all of it (%d tokens) fits %d:\n%.300s", seed, window, m.ID, m.Role,
							chat.EstimateText(transcript), chat.EstimateText(whole), limit, transcript)
					}
					leftOut++
				}
			}
			summary := strings.Repeat("s", rng.IntN(1600))
			add(chat.RoleAssistant, chat.Part{Type: chat.PartCompaction, Summary: summary, ThroughMessageID: msgs[len(msgs)-1].ID})
		}
	}
	// The sequences compact often, and some past what fits.
	if compactions < 300 || leftOut == 0 {
		t.Fatalf("%d compactions, %d parts left out: the sequences do not exercise the property", compactions, leftOut)
	}
	t.Logf("%d compactions, %d parts left out because they could not fit", compactions, leftOut)
}
