package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/client"
)

// defaultURL is the server "parley chat" talks to without --url or PARLEY_URL.
const defaultURL = "http://127.0.0.1:8080"

// chatFlags are the settings of "parley chat".
type chatFlags struct {
	url, token   string
	chatID       string
	tools        []string // NAME=FILE[:DESCRIPTION]
	serverTools  []string // --tools globs; nil: not given
	approve      []string // --approve globs
	model        string
	systemPrompt string
	toolTimeout  time.Duration
}

func newChatCmd(a *app) *cobra.Command {
	var f chatFlags
	cmd := &cobra.Command{
		Use:   "chat [MESSAGE]",
		Short: "Chat with a model on a parley server, from the terminal",
		Long: `Start a chat (or continue one with --chat ID) on a running parley server and
stream the answer to stdout as it is written.

With a MESSAGE, chat sends it, prints the answer and exits. Without one, it
prompts for messages until end of input (Ctrl-D) or "/exit". The chat's id is
printed on stderr at the start: continue the conversation later with
--chat ID.

Dynamic tools: each --tool NAME=FILE[:DESCRIPTION] declares a tool the model
may call, with the JSON Schema of its arguments read from FILE (an object
schema) and an optional description after the first ":" that follows the
file name (unless FILE with that colon exists as a file). You are the tool:
when the model calls it, chat shows the call (its name and arguments) and
asks for the result, one line:
  - a JSON value ({"temp_c": 21}, 42, "text", null) is sent as it is;
  - anything else is sent as a JSON string;
  - "!error TEXT" sends TEXT as an error result (is_error), so the model
    knows the call failed.
Then the answer streams on. Tools are declared when the chat is created, so
--tool does not go with --chat (a continued chat keeps its tools, and chat
still asks for their results).

Server-side tools: --tools GLOB,GLOB (repeatable) offers the model only the
server's tools whose names one of the globs matches ("weather_*",
"github_search_issues"; * ? and [...] as in Go's path.Match); --tools ''
offers none. Without it the model is offered every server-side tool. Your
--tool tools are offered either way. A glob that matches no server-side tool
now is kept, with a warning on stderr. Like --tool, it is for a new chat.

Approvals: when the model calls a server-side tool that needs approval (the
server's policy, or --approve GLOB,GLOB on a new chat, which adds the tools
the globs match), chat shows the call (tool, source, description and
arguments) and asks "approve? [y/n/e(dit)]":
  - y runs the call as the model made it;
  - n denies it, after asking for an optional reason (the model sees
    "denied: REASON");
  - e asks for new arguments, a JSON object on one line, or over several
    lines ended by a blank line (a blank line first keeps the prompt), and
    runs the call with them; the server checks them against the tool's
    schema, and asks again if they do not match.

Try it with no provider key on the built-in echo model: the message
'/call get_weather {"city": "Paris"}' makes it call get_weather.

The server is --url (env PARLEY_URL; default ` + defaultURL + `); the token is
--token (env PARLEY_TOKEN), else the admin token saved in
<data-dir>/admin.token by "parley serve". Calls and prompts go to stderr,
the answer to stdout. Ctrl-C interrupts the chat's run and exits.`,
		Example: `  # One question, one answer
  parley chat "What is parley?"

  # An interactive session, then a later follow-up
  parley chat
  parley chat --chat 01a22723-d973-75eb-b20b-b382b9defe5f "And tomorrow?"

  # A person answers a dynamic tool (try it with the echo model)
  echo '{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}' > weather.json
  parley chat --tool 'get_weather=weather.json:Current weather for a city' '/call get_weather {"city":"Paris"}'

  # Only some of the server's tools
  parley chat --tools 'weather_*,github_search_issues' "Any open issue about rain?"

  # Approve each call of the built-in http_fetch yourself
  parley chat --approve http_fetch "What is on https://example.com?"`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if f.chatID != "" && len(f.tools) > 0 {
				return &usageError{cmd: cmd.CommandPath(), err: errors.New("--tool declares tools of a new chat; it does not go with --chat")}
			}
			if cmd.Flags().Changed("tools") {
				if f.chatID != "" {
					return &usageError{cmd: cmd.CommandPath(), err: errors.New("--tools selects the server-side tools of a new chat; it does not go with --chat")}
				}
				if f.serverTools == nil {
					f.serverTools = []string{} // --tools '': none
				}
			}
			if f.chatID != "" && len(f.approve) > 0 {
				return &usageError{cmd: cmd.CommandPath(), err: errors.New("--approve selects the tools a new chat asks approval of; it does not go with --chat")}
			}
			tools, err := parseTools(f.tools)
			if err != nil {
				return &usageError{cmd: cmd.CommandPath(), err: err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			return runChat(ctx, a, f, tools, argv)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "server `URL` (env PARLEY_URL; default "+defaultURL+")")
	fl.StringVar(&f.token, "token", "", "API `token` (env PARLEY_TOKEN; default: <data-dir>/admin.token)")
	fl.StringVar(&f.chatID, "chat", "", "continue the chat with this `id`")
	fl.StringArrayVar(&f.tools, "tool", nil, "declare a dynamic tool that you answer: `NAME=FILE[:DESCRIPTION]`, FILE holding its JSON Schema (repeatable)")
	fl.StringSliceVar(&f.serverTools, "tools", nil, "offer a new chat's model only the server-side tools these `globs` match (comma-separated, repeatable; '' for none; default: every one)")
	fl.StringSliceVar(&f.approve, "approve", nil, "ask your approval of each call of the server-side tools these `globs` match, besides those the server requires it of (comma-separated, repeatable; new chats)")
	fl.StringVar(&f.model, "model", "", "`model` of a new chat (default: the server's default)")
	fl.StringVar(&f.systemPrompt, "system", "", "system `prompt` of a new chat")
	fl.DurationVar(&f.toolTimeout, "tool-timeout", 0, "how long a new chat waits for your tool results (default: the server's, 10m)")
	return cmd
}

// parseTools reads the --tool declarations.
func parseTools(specs []string) ([]client.DynamicTool, error) {
	var tools []client.DynamicTool
	for _, spec := range specs {
		name, rest, ok := strings.Cut(spec, "=")
		if !ok || name == "" || rest == "" {
			return nil, fmt.Errorf("--tool %q: want NAME=FILE[:DESCRIPTION]", spec)
		}
		file, desc := rest, ""
		if _, err := os.Stat(rest); err != nil {
			if f, d, ok := strings.Cut(rest, ":"); ok {
				file, desc = f, d
			}
		}
		schema, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--tool %s: %w", name, err)
		}
		if !json.Valid(schema) {
			return nil, fmt.Errorf("--tool %s: %s is not JSON", name, file)
		}
		tools = append(tools, client.DynamicTool{Name: name, Description: desc, InputSchema: json.RawMessage(schema)})
	}
	return tools, nil
}

// serverAccess resolves the server's URL and the token: flags, then the
// environment, then the defaults (the admin token file of the data dir).
func serverAccess(a *app, f chatFlags) (url, token string, err error) {
	url = first(f.url, a.getenv("PARLEY_URL"), defaultURL)
	token = first(f.token, a.getenv("PARLEY_TOKEN"))
	if token != "" {
		return url, token, nil
	}
	cfg, err := a.loadConfig()
	if err != nil {
		return "", "", err
	}
	path := filepath.Join(cfg.DataDir, adminTokenFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("no token: pass --token, set PARLEY_TOKEN, or run where the server's data dir is (%w)", err)
	}
	return url, strings.TrimSpace(string(b)), nil
}

// first returns the first non-empty value.
func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// runChat runs the session: the first message (argv, or asked for), then
// more when interactive.
func runChat(ctx context.Context, a *app, f chatFlags, tools []client.DynamicTool, argv []string) error {
	url, token, err := serverAccess(a, f)
	if err != nil {
		return err
	}
	s := &chatSession{
		c:        client.New(url, token),
		out:      a.stdout,
		info:     a.stderr,
		in:       newLineReader(os.Stdin),
		printed:  map[int64]bool{},
		streamed: map[int64]bool{},
		asked:    map[string]bool{},
	}
	defer func() {
		if s.stream != nil {
			s.stream.Close()
		}
	}()
	interactive := len(argv) == 0
	msg := ""
	if !interactive {
		msg = argv[0]
	} else if msg, err = s.ask(ctx, "> "); err != nil {
		return endOfInput(err)
	}

	if f.chatID == "" {
		err = s.create(ctx, client.CreateChatRequest{Model: f.model, SystemPrompt: f.systemPrompt,
			DynamicTools: tools, Tools: f.serverTools, Approve: f.approve, ToolResultTimeout: f.toolTimeout, Message: msg})
	} else {
		err = s.resume(ctx, f.chatID, msg)
	}
	for err == nil {
		if err = s.turn(ctx); err != nil || !interactive {
			break
		}
		if msg, err = s.ask(ctx, "> "); err != nil {
			return endOfInput(err) // the chat is idle: nothing to interrupt
		}
		err = s.post(ctx, msg)
	}
	if ctx.Err() != nil && s.chatID != "" {
		s.interrupt()
		return errors.New("interrupted")
	}
	return err
}

// endOfInput ends an interactive session at its prompt: the end of input,
// "/exit" and Ctrl-C end it without an error.
func endOfInput(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, errExit) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// errExit is the interactive "/exit".
var errExit = errors.New("exit")

// chatSession is one terminal conversation with a chat: one event stream,
// open for the whole session.
type chatSession struct {
	c      *client.Client
	chatID string
	stream *client.ChatStream
	out    io.Writer // the answers
	info   io.Writer // chat id, tool calls, prompts, notices
	in     *lineReader

	seen     int64           // the highest message id known
	since    int64           // a user message above this id is the turn's
	printed  map[int64]bool  // messages shown (or whose deltas were)
	asked    map[string]bool // the tool call ids asked about
	midLine  bool            // the answer output does not end with a newline
	streamed map[int64]bool
}

// create makes the chat with its first message and opens its stream.
func (s *chatSession) create(ctx context.Context, req client.CreateChatRequest) error {
	ch, err := s.c.CreateChat(ctx, req)
	if err != nil {
		return fmt.Errorf("create the chat: %w", err)
	}
	s.chatID = ch.ID
	fmt.Fprintf(s.info, "chat %s (continue it with: parley chat --chat %s)\n", ch.ID, ch.ID)
	for _, w := range ch.Warnings {
		fmt.Fprintf(s.info, "warning: %s\n", w)
	}
	if s.stream, err = s.c.Stream(ctx, ch.ID, 0); err != nil {
		return fmt.Errorf("stream the chat: %w", err)
	}
	return nil
}

// resume opens the stream of an existing chat after its last message,
// answers the tool calls it may wait for, then sends msg.
func (s *chatSession) resume(ctx context.Context, id, msg string) error {
	msgs, err := s.c.AllMessages(ctx, id, 0)
	if err != nil {
		return fmt.Errorf("read chat %s: %w", id, err)
	}
	s.chatID = id
	if len(msgs) > 0 {
		s.seen = msgs[len(msgs)-1].ID
	}
	if s.stream, err = s.c.Stream(ctx, id, s.seen); err != nil {
		return fmt.Errorf("stream chat %s: %w", id, err)
	}
	if !s.stream.Next() {
		return s.streamEnded(ctx)
	}
	if ev := s.stream.Event(); ev.Status == client.StatusRequiresAction && ev.Chat != nil && ev.Chat.RequiredAction != nil {
		if err := s.answerCalls(ctx, ev.Chat.RequiredAction.ToolCalls); err != nil {
			return err
		}
	}
	return s.post(ctx, msg)
}

// post sends a user message; the turn then waits for its answer.
func (s *chatSession) post(ctx context.Context, msg string) error {
	s.since = s.seen
	res, err := s.c.PostMessage(ctx, s.chatID, client.PostMessageRequest{Content: msg})
	if err != nil {
		return fmt.Errorf("send the message: %w", err)
	}
	if res.Queued != nil {
		fmt.Fprintln(s.info, "(the chat is busy: your message is queued and answered next)")
	}
	return nil
}

// turn streams the answer to the last message until the chat is idle,
// answering the tool calls it waits for on the way.
func (s *chatSession) turn(ctx context.Context) error {
	sawUser := false
	for s.stream.Next() {
		ev := s.stream.Event()
		switch ev.Kind {
		case client.EventStatus:
			if ev.Chat == nil {
				continue
			}
			if ev.Status == client.StatusRequiresAction && ev.Chat.RequiredAction != nil {
				if err := s.answerCalls(ctx, ev.Chat.RequiredAction.ToolCalls); err != nil {
					return err
				}
			}
			// An Initial status (a new connection) was read after the
			// message was sent: idle means answered.
			if (ev.Status == client.StatusWaiting || ev.Status == client.StatusError) && (sawUser || ev.Initial) {
				return s.finish(ctx, *ev.Chat)
			}
		case client.EventMessage:
			m := *ev.Message
			if m.Role == client.RoleUser && m.ID > s.since {
				sawUser = true
			}
			s.show(m)
		case client.EventPart:
			if ev.Part.Type == client.DeltaText && !s.printed[ev.MessageID] {
				s.write(ev.Part.Text)
				s.streamed[ev.MessageID] = true
			}
		case client.EventActionRequired:
			if err := s.answerCalls(ctx, ev.ToolCalls); err != nil {
				return err
			}
		case client.EventRetry:
			s.endLine()
			fmt.Fprintf(s.info, "(the model call failed: %s; retry %d in %dms)\n", ev.Retry.Error, ev.Retry.Attempt, ev.Retry.DelayMS)
		}
	}
	return s.streamEnded(ctx)
}

// streamEnded explains why the stream stopped.
func (s *chatSession) streamEnded(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := s.stream.Err(); err != nil {
		return fmt.Errorf("chat stream: %w", err)
	}
	return errors.New("chat stream: ended")
}

// finish ends a turn: the messages the stream has not delivered yet (after
// a reconnection) are read and shown; a failed run is an error.
func (s *chatSession) finish(ctx context.Context, ch client.Chat) error {
	msgs, err := s.c.AllMessages(ctx, s.chatID, s.stream.Cursor())
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	for _, m := range msgs {
		s.show(m)
	}
	s.endLine()
	if ch.Status == client.StatusError {
		if ch.LastError != nil {
			return fmt.Errorf("the chat failed (%s): %s", ch.LastError.Kind, ch.LastError.Message)
		}
		return errors.New("the chat failed")
	}
	return nil
}

// show prints an assistant message that was not streamed, once.
func (s *chatSession) show(m client.Message) {
	s.seen = max(s.seen, m.ID)
	if s.printed[m.ID] {
		return
	}
	s.printed[m.ID] = true
	if m.Role != client.RoleAssistant {
		return
	}
	if !s.streamed[m.ID] {
		s.write(m.Text())
	}
	s.endLine()
}

// write prints answer text.
func (s *chatSession) write(text string) {
	if text == "" {
		return
	}
	io.WriteString(s.out, text)
	s.midLine = !strings.HasSuffix(text, "\n")
}

// endLine ends the answer's current line, if any.
func (s *chatSession) endLine() {
	if s.midLine {
		io.WriteString(s.out, "\n")
		s.midLine = false
	}
}

// answerCalls shows each call the chat waits on and asks for its result
// (a dynamic tool) or for the decision on it (an approval), then posts the
// results and the decisions; each call is asked about once.
func (s *chatSession) answerCalls(ctx context.Context, calls []client.ToolCall) error {
	var fresh []client.ToolCall
	for _, c := range calls {
		if !s.asked[c.ToolCallID] {
			fresh = append(fresh, c)
			s.asked[c.ToolCallID] = true
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	s.endLine()
	var (
		results   []client.ToolResult
		approvals []client.ToolCall
		decisions []client.Decision
	)
	for _, call := range fresh {
		if call.NeedsApproval() {
			d, err := s.askDecision(ctx, call)
			if err != nil {
				return err
			}
			approvals, decisions = append(approvals, call), append(decisions, d)
			continue
		}
		fmt.Fprintf(s.info, "tool call %s %s\n", call.ToolName, compactJSON(call.Args))
		line, err := s.ask(ctx, "result (JSON, text, or !error TEXT)> ")
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("end of input while tool call %s waits for its result", call.ToolCallID)
			}
			return err
		}
		results = append(results, parseResult(call.ToolCallID, line))
	}
	if len(results) > 0 {
		_, err := s.c.SubmitToolResults(ctx, s.chatID, results)
		var ae *client.APIError
		switch {
		case errors.As(err, &ae) && ae.StatusCode == http.StatusConflict:
			fmt.Fprintf(s.info, "(results not taken: the chat is %v now)\n", ae.Details["status"])
		case err != nil:
			return fmt.Errorf("submit the tool results: %w", err)
		}
	}
	if len(approvals) > 0 {
		return s.decide(ctx, approvals, decisions)
	}
	return nil
}

// decide posts the decisions on the approvals. When the server refuses them
// (say, edited arguments that do not match the tool's schema) while the
// same approvals still wait, it says why and asks for the decisions again.
func (s *chatSession) decide(ctx context.Context, approvals []client.ToolCall, decisions []client.Decision) error {
	for {
		_, err := s.c.Decide(ctx, s.chatID, decisions)
		var ae *client.APIError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ae) && ae.StatusCode == http.StatusConflict:
			fmt.Fprintf(s.info, "(decisions not taken: someone decided first, or the chat moved on; it is %v now)\n", ae.Details["status"])
			return nil
		case !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || !s.stillPending(ctx, approvals):
			return fmt.Errorf("submit the decisions: %w", err)
		}
		fmt.Fprintf(s.info, "the server refused the decisions: %s\ndecide again:\n", ae.Message)
		for i, call := range approvals {
			if decisions[i], err = s.askDecision(ctx, call); err != nil {
				return err
			}
		}
	}
}

// stillPending reports whether the chat waits for decisions on exactly
// these calls.
func (s *chatSession) stillPending(ctx context.Context, approvals []client.ToolCall) bool {
	ch, err := s.c.GetChat(ctx, s.chatID)
	if err != nil || ch.Status != client.StatusRequiresAction || ch.RequiredAction == nil {
		return false
	}
	var pending []string
	for _, c := range ch.RequiredAction.ToolCalls {
		if c.NeedsApproval() {
			pending = append(pending, c.ToolCallID)
		}
	}
	if len(pending) != len(approvals) {
		return false
	}
	for i, c := range approvals {
		if pending[i] != c.ToolCallID {
			return false
		}
	}
	return true
}

// askDecision shows a call that needs approval and asks for the decision:
// y approves, n denies (with an optional reason), e approves with edited
// arguments.
func (s *chatSession) askDecision(ctx context.Context, call client.ToolCall) (client.Decision, error) {
	fmt.Fprintf(s.info, "tool call %s needs your approval", call.ToolName)
	if call.Source != "" {
		fmt.Fprintf(s.info, " (source %s)", call.Source)
	}
	fmt.Fprintln(s.info)
	if desc := strings.TrimSpace(call.Description); desc != "" {
		fmt.Fprintf(s.info, "  %s\n", strings.ReplaceAll(desc, "\n", "\n  "))
	}
	fmt.Fprintf(s.info, "  args: %s\n", prettyJSON(call.Args, "  "))
	for {
		line, err := s.ask(ctx, "approve? [y/n/e(dit)] ")
		if err != nil {
			return client.Decision{}, s.decisionInputErr(call, err)
		}
		switch strings.ToLower(line) {
		case "y", "yes":
			return client.Approve(call.ToolCallID), nil
		case "n", "no":
			fmt.Fprint(s.info, "reason (optional)> ")
			reason, err := s.in.read(ctx)
			if err != nil {
				fmt.Fprintln(s.info)
				return client.Decision{}, s.decisionInputErr(call, err)
			}
			return client.Deny(call.ToolCallID, strings.TrimSpace(reason)), nil
		case "e", "edit":
			args, err := s.editArgs(ctx)
			if err != nil {
				return client.Decision{}, s.decisionInputErr(call, err)
			}
			if args != nil {
				return client.ApproveWithArgs(call.ToolCallID, args), nil
			}
		default:
			fmt.Fprintln(s.info, "answer y (approve), n (deny) or e (edit the arguments, then approve)")
		}
	}
}

// decisionInputErr explains an input that ended before a decision.
func (s *chatSession) decisionInputErr(call client.ToolCall, err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("end of input while tool call %s waits for your decision", call.ToolCallID)
	}
	return err
}

// editArgs reads new arguments: a JSON object, on one line or over several
// ended by a blank line. A blank line first, or input that is not a JSON
// object, gives nil (with a notice): the caller asks again.
func (s *chatSession) editArgs(ctx context.Context) (json.RawMessage, error) {
	fmt.Fprintln(s.info, "new arguments, a JSON object (over several lines, end with a blank line; a blank line first cancels):")
	var buf strings.Builder
	for {
		if buf.Len() == 0 {
			fmt.Fprint(s.info, "args> ")
		} else {
			fmt.Fprint(s.info, "...> ")
		}
		line, err := s.in.read(ctx)
		if err != nil {
			fmt.Fprintln(s.info)
			return nil, err
		}
		if strings.TrimSpace(line) == "" {
			if buf.Len() == 0 {
				fmt.Fprintln(s.info, "(edit cancelled)")
				return nil, nil
			}
			break
		}
		buf.WriteString(line + "\n")
		if json.Valid([]byte(buf.String())) {
			break
		}
	}
	args, err := jsonObject(buf.String())
	if err != nil {
		fmt.Fprintf(s.info, "not a JSON object: %v\n", err)
		return nil, nil
	}
	return args, nil
}

// jsonObject checks that text is one JSON object and returns it compacted.
func jsonObject(text string) (json.RawMessage, error) {
	text = strings.TrimSpace(text)
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, err
	}
	if _, ok := v.(map[string]any); !ok {
		kind := "null"
		switch v.(type) {
		case []any:
			kind = "an array"
		case string:
			kind = "a string"
		case float64:
			kind = "a number"
		case bool:
			kind = "a boolean"
		}
		return nil, fmt.Errorf("got %s, want an object {...}", kind)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// prettyJSON renders arguments indented, their lines after the first
// starting with prefix.
func prettyJSON(raw json.RawMessage, prefix string) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, prefix, "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// parseResult reads a typed result: "!error TEXT", a JSON value, or text.
func parseResult(callID, line string) client.ToolResult {
	if msg, ok := strings.CutPrefix(line, "!error"); ok && (msg == "" || msg[0] == ' ') {
		return client.ErrorResult(callID, strings.TrimSpace(msg))
	}
	if json.Valid([]byte(line)) {
		return client.ToolResult{ToolCallID: callID, Output: json.RawMessage(line)}
	}
	return client.TextResult(callID, line)
}

// compactJSON renders arguments on one line.
func compactJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// ask prompts on the info stream and reads a non-empty line; "/exit" is
// errExit.
func (s *chatSession) ask(ctx context.Context, prompt string) (string, error) {
	for {
		fmt.Fprint(s.info, prompt)
		line, err := s.in.read(ctx)
		if err != nil {
			fmt.Fprintln(s.info)
			return "", err
		}
		line = strings.TrimSpace(line)
		switch line {
		case "":
			continue
		case "/exit":
			return "", errExit
		}
		return line, nil
	}
}

// interrupt stops the chat's run after Ctrl-C.
func (s *chatSession) interrupt() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.endLine()
	if _, err := s.c.Interrupt(ctx, s.chatID); err != nil {
		fmt.Fprintf(s.info, "could not interrupt the chat: %v\n", err)
	}
}

// lineReader reads lines from an input in the background, so that waiting
// for one can be cancelled. Reading starts with the first read.
type lineReader struct {
	r     io.Reader
	once  sync.Once
	lines chan string
	err   error // set before lines is closed
}

func newLineReader(r io.Reader) *lineReader { return &lineReader{r: r, lines: make(chan string)} }

func (l *lineReader) read(ctx context.Context) (string, error) {
	l.once.Do(func() {
		go func() {
			sc := bufio.NewScanner(l.r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				l.lines <- sc.Text()
			}
			l.err = sc.Err()
			close(l.lines)
		}()
	})
	select {
	case line, ok := <-l.lines:
		if !ok {
			if l.err != nil {
				return "", l.err
			}
			return "", io.EOF
		}
		return line, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
