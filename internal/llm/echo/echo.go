// Package echo is parley's offline model: a deterministic stand-in for a
// real provider, so a server with no provider key still answers, and the
// whole tool flow (including dynamic tools) can be tried with no network.
//
// What it answers, looking at the last message of the history:
//
//   - a user message whose lines start with "/call TOOL {json}" (one call a
//     line; the JSON is optional and defaults to {}): those tool calls, with
//     ids "call_1", "call_2", ... numbered across the chat so they never
//     repeat; other lines of that message are ignored;
//   - any other user message: "echo: " followed by its text, then a line
//     for each file it holds, saying what the model received: "[image
//     photo.png, 1234 bytes]", "[pdf report.pdf, 5678 bytes]", "[text file
//     notes.md, 90 bytes]", "[image https://...]" for an image on the web,
//     or the note that replaces a file that is gone;
//   - tool results: one line per result, "tool NAME returned OUTPUT" (or
//     "tool NAME failed: OUTPUT" for an error result);
//   - nothing usable: "echo: (nothing to echo)".
//
// With a response format (structured output), a user message whose whole
// text is JSON is answered with that JSON alone, so an offline chat can
// answer in a format; any other message is answered as above (and is not
// valid against it).
//
// The answer streams in small deltas (a word at a time, arguments a few
// bytes at a time) with no delay. Usage is an estimate: one token per four
// characters (rounded up) of everything sent in (system prompt, texts,
// arguments and outputs of the history) and of the answer.
package echo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
)

var (
	_ llm.Provider = (*Provider)(nil)
	_ llm.Named    = (*Provider)(nil)
)

// Provider is the echo model. The zero value is ready to use and safe for
// concurrent use.
type Provider struct{}

// New returns the echo model.
func New() *Provider { return &Provider{} }

// Name reports the provider's name for errors and logs.
func (*Provider) Name() string { return "echo" }

// argsChunk is how many bytes of a call's arguments one delta carries.
const argsChunk = 8

// Stream answers the last message of req, as the package documentation
// describes.
func (p *Provider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	res := answer(req.Messages)
	if req.Format != nil && len(req.Messages) > 0 {
		last := req.Messages[len(req.Messages)-1]
		if text := strings.TrimSpace(messageText(last)); last.Role == chat.RoleUser && text != "" && json.Valid([]byte(text)) {
			res = textResult(text)
		}
	}
	if err := stream(ctx, res.Parts, emit); err != nil {
		return llm.Result{}, err
	}
	res.Usage = llm.Usage{InputTokens: tokens(inputChars(req)), OutputTokens: tokens(partsChars(res.Parts))}
	return res, nil
}

// answer decides the parts and finish reason of the answer to history.
func answer(history []chat.Message) llm.Result {
	if len(history) == 0 {
		return textResult("echo: (nothing to echo)")
	}
	last := history[len(history)-1]
	var results []chat.Part
	for _, part := range last.Parts {
		if part.Type == chat.PartToolResult {
			results = append(results, part)
		}
	}
	if len(results) > 0 {
		lines := make([]string, len(results))
		for i, r := range results {
			verb := "returned"
			if r.IsError {
				verb = "failed:"
			}
			lines[i] = fmt.Sprintf("tool %s %s %s", r.ToolName, verb, compact(r.Output))
		}
		return textResult(strings.Join(lines, "\n"))
	}
	text := messageText(last)
	files := fileLines(last)
	if last.Role != chat.RoleUser || (strings.TrimSpace(text) == "" && len(files) == 0) {
		return textResult("echo: (nothing to echo)")
	}
	if len(files) > 0 {
		if strings.TrimSpace(text) != "" {
			files = append([]string{text}, files...)
		}
		return textResult("echo: " + strings.Join(files, "\n"))
	}
	calls, err := parseCalls(text, countCalls(history))
	if err != nil {
		return textResult("echo: " + err.Error())
	}
	if len(calls) > 0 {
		return llm.Result{Parts: calls, FinishReason: "tool_calls"}
	}
	return textResult("echo: " + text)
}

func textResult(s string) llm.Result {
	return llm.Result{Parts: []chat.Part{chat.TextPart(s)}, FinishReason: "stop"}
}

// parseCalls reads the "/call TOOL {json}" lines of text; prior is how many
// tool calls the chat already holds, so ids continue from there.
func parseCalls(text string, prior int) ([]chat.Part, error) {
	var calls []chat.Part
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "/call")
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		name, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if name == "" {
			return nil, fmt.Errorf("usage: /call TOOL {json arguments}")
		}
		args = strings.TrimSpace(args)
		if args == "" {
			args = "{}"
		}
		if !json.Valid([]byte(args)) {
			return nil, fmt.Errorf("the arguments of /call %s are not valid JSON: %s", name, args)
		}
		calls = append(calls, chat.Part{
			Type:       chat.PartToolCall,
			ToolCallID: fmt.Sprintf("call_%d", prior+len(calls)+1),
			ToolName:   name,
			Args:       json.RawMessage(args),
		})
	}
	return calls, nil
}

// stream emits parts as deltas: text a word at a time, each tool call as a
// start, its arguments in small pieces, and an end.
func stream(ctx context.Context, parts []chat.Part, emit func(llm.Event) error) error {
	send := func(ev llm.Event) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return emit(ev)
	}
	call := 0
	for _, part := range parts {
		switch part.Type {
		case chat.PartText:
			for _, word := range strings.SplitAfter(part.Text, " ") {
				if word == "" {
					continue
				}
				if err := send(llm.Event{Type: llm.TextDelta, Text: word}); err != nil {
					return err
				}
			}
		case chat.PartToolCall:
			if err := send(llm.Event{Type: llm.ToolCallStart, Index: call, ToolCallID: part.ToolCallID, ToolName: part.ToolName}); err != nil {
				return err
			}
			for _, piece := range pieces(string(part.Args), argsChunk) {
				if err := send(llm.Event{Type: llm.ToolCallDelta, Index: call, Text: piece}); err != nil {
					return err
				}
			}
			if err := send(llm.Event{Type: llm.ToolCallEnd, Index: call}); err != nil {
				return err
			}
			call++
		}
	}
	return nil
}

// pieces splits s into chunks of about n bytes, never inside a rune.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && !utf8.RuneStart(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

// messageText joins the text parts of m.
func messageText(m chat.Message) string {
	var texts []string
	for _, p := range m.Parts {
		if p.Type == chat.PartText {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// fileLines says, a line each, what the model received of m's files.
func fileLines(m chat.Message) []string {
	var lines []string
	for _, p := range m.Parts {
		if p.Type != chat.PartFile {
			continue
		}
		f := llm.FileOf(p)
		name := f.Name
		if name == "" {
			name = "(unnamed)"
		}
		switch {
		case f.RemoteURL != "":
			lines = append(lines, fmt.Sprintf("[%s %s]", f.Kind, f.RemoteURL))
		case f.Kind == chat.FileText:
			lines = append(lines, fmt.Sprintf("[text file %s, %d bytes]", name, len(f.Data)))
		case f.Kind != "":
			lines = append(lines, fmt.Sprintf("[%s %s, %d bytes]", f.Kind, name, len(f.Data)))
		default:
			lines = append(lines, f.Text)
		}
	}
	return lines
}

// countCalls counts the tool calls already in history.
func countCalls(history []chat.Message) int {
	n := 0
	for _, m := range history {
		for _, p := range m.Parts {
			if p.Type == chat.PartToolCall {
				n++
			}
		}
	}
	return n
}

// compact renders a tool output on one line: a JSON string as its text,
// anything else as compact JSON.
func compact(out json.RawMessage) string {
	if len(out) == 0 {
		return "null"
	}
	var s string
	if json.Unmarshal(out, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, out); err != nil {
		return string(out)
	}
	return buf.String()
}

// inputChars counts the characters the model was sent.
func inputChars(req llm.Request) int {
	n := utf8.RuneCountInString(req.System)
	for _, m := range req.Messages {
		n += partsChars(m.Parts)
	}
	return n
}

// partsChars counts the characters of parts' texts, arguments and outputs.
func partsChars(parts []chat.Part) int {
	n := 0
	for _, p := range parts {
		n += utf8.RuneCountInString(p.Text) + utf8.RuneCount(p.Args) + utf8.RuneCount(p.Output) + len(p.ToolName)
	}
	return n
}

// tokens estimates a token count from a character count: one per four,
// rounded up.
func tokens(chars int) int64 { return int64((chars + 3) / 4) }
