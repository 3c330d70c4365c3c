package chat

import (
	"fmt"
	"strings"
)

// A compaction replaces the older part of a chat's history, in what the
// model sees, with a summary: the newest compaction message's summary
// stands for every message up to its ThroughMessageID, and the messages
// after that id follow verbatim. The transcript keeps everything.

// IsCompaction reports whether m is a compaction message.
func IsCompaction(m Message) bool {
	return len(m.Parts) == 1 && m.Parts[0].Type == PartCompaction
}

// SplitAtSummary splits history (a chat's messages in id order, or those
// from the newest compaction on) into the newest compaction's part (nil if
// there is none) and the messages the model sees verbatim: those after its
// ThroughMessageID, compaction messages left out. (Reading the history
// from the newest compaction on is store.Reader.SinceCompaction.)
func SplitAtSummary(history []Message) (*Part, []Message) {
	newest := -1
	for i := len(history) - 1; i >= 0; i-- {
		if IsCompaction(history[i]) {
			newest = i
			break
		}
	}
	if newest < 0 {
		return nil, history
	}
	c := history[newest].Parts[0]
	live := make([]Message, 0, len(history))
	for _, m := range history {
		if m.ID > c.ThroughMessageID && !IsCompaction(m) {
			live = append(live, m)
		}
	}
	return &c, live
}

// SummaryMessage is how the model reads a compaction: a user message that
// says it stands for the earlier conversation.
func SummaryMessage(c Part, chatID string) Message {
	return Message{ChatID: chatID, Role: RoleUser, Parts: []Part{TextPart(SummaryPreamble + c.Summary)}}
}

// SummaryPreamble starts the message that carries a summary to the model.
const SummaryPreamble = "[The earlier part of this conversation was summarised to fit the model's context window. The summary follows; the conversation continues verbatim after it.]\n\n"

// SplitsStep reports whether cutting history after its i-th message would
// part a tool call from its results: a call at or before i is answered
// after it. Cutting after the last message (i = len-1) parts nothing.
func SplitsStep(history []Message, i int) bool {
	if i+1 >= len(history) {
		return false
	}
	before := map[string]bool{}
	for _, m := range history[:i+1] {
		for _, c := range CallsOf(m) {
			before[c.ToolCallID] = true
		}
	}
	for _, m := range history[i+1:] {
		if m.Role != RoleTool {
			continue
		}
		for _, p := range m.Parts {
			if before[p.ToolCallID] {
				return true
			}
		}
	}
	return false
}

// CompactionCut returns where to cut live (the messages after the newest
// compaction) for the next one: live[:cut] is summarised, live[cut:] stays
// verbatim. The verbatim part starts at a user message and holds at least
// the last one and everything after it; it starts earlier, turn by turn,
// while it stays within keep tokens (EstimateTokens). A cut never parts a
// call from its results. 0 means there is nothing to compact: live holds
// one turn, or none.
func CompactionCut(live []Message, keep int64) int {
	var turns []int // the indexes where a turn starts, that a cut may take
	for i, m := range live {
		if i > 0 && m.Role == RoleUser && !IsRepair(m) && !SplitsStep(live, i-1) {
			turns = append(turns, i)
		}
	}
	if len(turns) == 0 {
		return 0
	}
	cut := turns[len(turns)-1]
	size := EstimateTokens(live[cut:])
	for j := len(turns) - 2; j >= 0; j-- {
		size += EstimateTokens(live[turns[j]:turns[j+1]])
		if size > keep {
			break
		}
		cut = turns[j]
	}
	return cut
}

// EstimateText estimates the tokens of a text: a token is about four
// characters of English, so characters / 4, rounded up.
func EstimateText(s string) int64 { return (int64(len(s)) + 3) / 4 }

// EstimateTokens estimates the tokens msgs take in a model request: their
// texts, tool calls' arguments, results' outputs and summaries, plus a few
// per message for the envelope. A file part counts a fixed figure per image
// (ImageTokens) or PDF (PDFTokens), a text file by its length when its
// bytes are at hand (FileTokens when not).
func EstimateTokens(msgs []Message) int64 {
	var n int64
	for _, m := range msgs {
		n += 4
		for _, p := range m.Parts {
			n += EstimateText(p.Text) + EstimateText(p.ToolName) + EstimateText(string(p.Args)) +
				EstimateText(string(p.Output)) + EstimateText(p.Summary)
			if p.Type == PartFile {
				n += estimateFile(p)
			}
		}
	}
	return n
}

// ContextTokens estimates the tokens of the next model request over
// history (a chat's messages, or those from the newest compaction on): the
// input and output tokens the provider reported for the newest answer
// made after the newest compaction, plus an estimate of what came after
// it (an answer the compaction kept verbatim reported what it summarised).
// Without such an answer it estimates the whole view, and adds fixed, an
// estimate of what every request carries besides its messages (the system
// prompt, the tools' definitions).
func ContextTokens(history []Message, fixed int64) int64 {
	summary, live := SplitAtSummary(history)
	var since int64 // the newest compaction's id: an answer before it reported what it summarised
	for _, m := range history {
		if IsCompaction(m) {
			since = m.ID
		}
	}
	for i := len(live) - 1; i >= 0; i-- {
		m := live[i]
		if m.ID > since && m.Role == RoleAssistant && m.Usage != nil && m.Usage.InputTokens > 0 {
			return m.Usage.InputTokens + m.Usage.OutputTokens + EstimateTokens(live[i+1:])
		}
	}
	n := fixed + EstimateTokens(live)
	if summary != nil {
		n += EstimateTokens([]Message{SummaryMessage(*summary, "")})
	}
	return n
}

// ContextOf is a chat's Context at tokens of a window (nil when the window
// is unknown).
func ContextOf(tokens, window int64) *Context {
	if window <= 0 {
		return nil
	}
	return &Context{Tokens: tokens, Window: window, Percent: float64(tokens*1000/window) / 10}
}

// Transcript writes what a compaction summarises as plain text for the
// summarising model: the previous summary, if any, then each message with
// its role, tool calls with their arguments and results with their
// outputs. Rendered as text, the history needs no tool definitions and
// breaks no provider's pairing rules. A file stands as its name
// (FileLabel), never its content. If it would pass budget tokens,
// tool outputs are clipped first (to their start and end), then the
// oldest messages are left out, so the summarising call itself fits.
func Transcript(previous *Part, msgs []Message, budget int64) string {
	for _, clip := range []int{-1, 2000, 400, 100} {
		t := transcript(previous, msgs, clip)
		if EstimateText(t) <= budget {
			return t
		}
	}
	// Still too long: keep the newest messages that fit.
	for len(msgs) > 1 {
		msgs = msgs[1:]
		t := transcript(previous, msgs, 100)
		if EstimateText(t) <= budget {
			return "[older messages left out]\n\n" + t
		}
	}
	t := transcript(previous, msgs, 100)
	if limit := budget * 4; int64(len(t)) > limit {
		t = t[int64(len(t))-limit:]
	}
	return t
}

// TranscriptTokens estimates the tokens of the whole transcript of
// previous and msgs, nothing clipped or left out: the budget under which
// Transcript keeps all of it.
func TranscriptTokens(previous *Part, msgs []Message) int64 {
	return EstimateText(transcript(previous, msgs, -1))
}

func transcript(previous *Part, msgs []Message, clip int) string {
	var b strings.Builder
	if previous != nil {
		fmt.Fprintf(&b, "[summary of the conversation before this]\n%s\n\n", previous.Summary)
	}
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p.Type {
			case PartText, PartOutputRepair:
				fmt.Fprintf(&b, "[%s]\n%s\n\n", m.Role, p.Text)
			case PartFile:
				fmt.Fprintf(&b, "[%s attached %s]\n\n", m.Role, FileLabel(p))
			case PartToolCall:
				fmt.Fprintf(&b, "[assistant called %s, id %s]\n%s\n\n", p.ToolName, p.ToolCallID, clipped(string(p.Args), clip))
			case PartToolResult:
				status := "result"
				if p.IsError {
					status = "error"
				}
				fmt.Fprintf(&b, "[%s of %s, id %s]\n%s\n\n", status, p.ToolName, p.ToolCallID, clipped(string(p.Output), clip))
			}
		}
	}
	return b.String()
}

// clipped keeps the start and end of s, n bytes in all (n < 0: all of it).
func clipped(s string, n int) string {
	if n < 0 || len(s) <= n {
		return s
	}
	head, tail := strings.ToValidUTF8(s[:n/2], ""), strings.ToValidUTF8(s[len(s)-n/2:], "")
	return fmt.Sprintf("%s … [%d bytes clipped] … %s", head, len(s)-len(head)-len(tail), tail)
}
