package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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

	urlGiven, tokenGiven bool // --url, --token on the command line
}

func newChatCmd(a *app) *cobra.Command {
	var f chatFlags
	cmd := &cobra.Command{
		Use:   "chat [MESSAGE]",
		Short: "Chat with a model on a parley server, from the terminal",
		Long: `Start a chat (or continue one with --chat ID) on a running parley server and
stream the answer to stdout as it is written.

With a MESSAGE, chat sends it, prints the answer and exits. Without one, it
prompts for messages until end of input (Ctrl-D) or "/exit". A new chat's id
is printed on stderr at the start, and at the end the command that continues
the conversation (--chat ID, with the --url, --data-dir or --config that
reached the server; a --token you gave shows as "--token …", never its
value).

While the model works, and until the first words of its answer, a status
line shows it (only when stdout and stderr are a terminal). The calls of
server-side tools are shown on stderr as their results arrive: the tool's
name and the start of its result.

A chat continued with --chat that waits for tool results or approvals
(requires_action) shows its pending calls at once and asks for them, before
any message.

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
The prompt shows the chat's deadline for the results (local time, and how
long is left). Then the answer streams on. If the chat moves on while you
are asked (the deadline passed, another client answered, the chat was
interrupted), chat says so at once and the answer streams on without your
result. Tools are declared when the chat is created, so --tool does not go
with --chat (a continued chat keeps its tools, and chat still asks for their
results).

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

The server is --url (env PARLEY_URL; default ` + defaultURL + `; without a
scheme, like 127.0.0.1:8080, http:// is assumed); the token is
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
			f.urlGiven, f.tokenGiven = cmd.Flags().Changed("url"), cmd.Flags().Changed("token")
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
// fromDataDir tells that the token came from the data dir.
func serverAccess(a *app, f chatFlags) (url, token string, fromDataDir bool, err error) {
	url, err = serverURL(f, a.getenv("PARLEY_URL"))
	if err != nil {
		return "", "", false, err
	}
	token = first(f.token, a.getenv("PARLEY_TOKEN"))
	if token != "" {
		return url, token, false, nil
	}
	cfg, err := a.loadConfig()
	if err != nil {
		return "", "", false, err
	}
	path := filepath.Join(cfg.DataDir, adminTokenFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", false, fmt.Errorf("no token: pass --token, set PARLEY_TOKEN, or run where the server's data dir is (%w)", err)
	}
	return url, strings.TrimSpace(string(b)), true, nil
}

// serverURL is the server's URL: --url, else env (PARLEY_URL), else the
// default. An address without a scheme (127.0.0.1:8080, localhost:8080) is
// taken as http://; a scheme other than http or https is an error that says
// what to write.
func serverURL(f chatFlags, env string) (string, error) {
	raw, from := f.url, "--url"
	if raw == "" {
		raw, from = env, "PARLEY_URL"
	}
	if raw == "" {
		return defaultURL, nil
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := neturl.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s %q: want the server's address, like %s or https://parley.example.com", from, first(f.url, env), defaultURL)
	}
	return strings.TrimRight(raw, "/"), nil
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

// explainConnError says what to check when the server cannot be reached.
func explainConnError(err error, url string) error {
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("nothing answers at %s (connection refused): is \"parley serve\" running at that address? Start it, or point --url (or PARLEY_URL) at the server", url)
	case errors.As(err, &dns):
		return fmt.Errorf("cannot find the host of %s (%v): check --url (or PARLEY_URL)", url, dns)
	}
	return err
}

// continueFlags are the flags that reached the server, for the command that
// continues the chat: --url if given, the data dir or the configuration the
// token was read from, and "--token …" (never the token) if given.
func continueFlags(a *app, f chatFlags, url string, fromDataDir bool) string {
	var b strings.Builder
	if f.urlGiven {
		b.WriteString(" --url " + shellQuote(url))
	}
	if fromDataDir {
		if a.flags.ConfigFile != "" {
			b.WriteString(" --config " + shellQuote(a.flags.ConfigFile))
		}
		if a.flags.DataDir != "" {
			b.WriteString(" --data-dir " + shellQuote(a.flags.DataDir))
		}
	}
	if f.tokenGiven {
		b.WriteString(" --token …")
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell, unless it needs no quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runChat runs the session: the first message (argv, or asked for), then
// more when interactive.
func runChat(ctx context.Context, a *app, f chatFlags, tools []client.DynamicTool, argv []string) (err error) {
	url, token, fromDataDir, err := serverAccess(a, f)
	if err != nil {
		return err
	}
	work := newStatusLine(a.stderr, isTerminal(a.stdout) && isTerminal(a.stderr))
	s := &chatSession{
		c:        client.New(url, token),
		out:      clearing{work, a.stdout},
		info:     clearing{work, a.stderr},
		work:     work,
		in:       newLineReader(os.Stdin),
		quit:     make(chan struct{}),
		printed:  map[int64]bool{},
		streamed: map[int64]bool{},
		asked:    map[string]bool{},
		answered: map[string]bool{},
	}
	defer func() {
		work.clear()
		close(s.quit)
		if s.stream != nil {
			s.stream.Close()
		}
		if s.chatID != "" {
			fmt.Fprintf(s.info, "continue it with: parley chat --chat %s%s\n", s.chatID, continueFlags(a, f, url, fromDataDir))
		}
		if err != nil {
			err = explainConnError(err, url)
		}
	}()
	interactive := len(argv) == 0
	if f.chatID != "" {
		if err = s.open(ctx, f.chatID); err != nil {
			return s.stopped(ctx, err)
		}
	}
	msg := ""
	if !interactive {
		msg = argv[0]
	} else {
		fmt.Fprintln(s.info, `(type a message and press Enter; "/exit" or Ctrl-D ends the session)`)
		if msg, err = s.ask(ctx, "> "); err != nil {
			return endOfInput(err)
		}
	}

	if f.chatID == "" {
		err = s.create(ctx, client.CreateChatRequest{Model: f.model, SystemPrompt: f.systemPrompt,
			DynamicTools: tools, Tools: f.serverTools, Approve: f.approve, ToolResultTimeout: f.toolTimeout, Message: msg})
	} else {
		err = s.post(ctx, msg)
	}
	for err == nil {
		if err = s.turn(ctx, false); err != nil || !interactive {
			break
		}
		if msg, err = s.ask(ctx, "> "); err != nil {
			return endOfInput(err) // the chat is idle: nothing to interrupt
		}
		err = s.post(ctx, msg)
	}
	return s.stopped(ctx, err)
}

// stopped ends a session that err stopped: after Ctrl-C, the chat's run is
// interrupted.
func (s *chatSession) stopped(ctx context.Context, err error) error {
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
// open for the whole session, read in the background (events), so that the
// prompts for tool calls can watch it while they wait for input.
type chatSession struct {
	c      *client.Client
	chatID string
	stream *client.ChatStream
	out    io.Writer // the answers
	info   io.Writer // chat id, tool calls, prompts, notices
	work   *statusLine
	in     *lineReader

	events    chan client.ChatEvent // the stream's events; closed when it ends
	streamErr error                 // why it ended; set before events is closed
	ended     bool                  // events is closed
	backlog   []client.ChatEvent    // events read while asking, not handled yet
	watch     *callWatch            // the calls being asked about, while asked
	quit      chan struct{}         // closed when the session ends

	seen     int64           // the highest message id known
	since    int64           // a user message above this id is the turn's
	printed  map[int64]bool  // messages shown (or whose deltas were)
	asked    map[string]bool // the tool call ids asked about
	answered map[string]bool // calls whose results are not shown: this person's answers and denials, and calls whose end was told
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
	fmt.Fprintf(s.info, "chat %s\n", ch.ID)
	for _, w := range ch.Warnings {
		fmt.Fprintf(s.info, "warning: %s\n", w)
	}
	if err := s.openStream(ctx, 0); err != nil {
		return fmt.Errorf("stream the chat: %w", err)
	}
	s.busy("waiting for the model")
	return nil
}

// open opens the stream of an existing chat after its last message. A chat
// that waits for tool results or decisions shows its calls and asks for
// them at once, and its answer streams until it is idle again.
func (s *chatSession) open(ctx context.Context, id string) error {
	msgs, err := s.c.AllMessages(ctx, id, 0)
	if err != nil {
		return fmt.Errorf("read chat %s: %w", id, err)
	}
	s.chatID = id
	if len(msgs) > 0 {
		s.seen = msgs[len(msgs)-1].ID
	}
	if err := s.openStream(ctx, s.seen); err != nil {
		return fmt.Errorf("stream chat %s: %w", id, err)
	}
	ev, ok := s.next(ctx)
	if !ok {
		return s.streamEnded(ctx)
	}
	if ev.Status != client.StatusRequiresAction || ev.Chat == nil || ev.Chat.RequiredAction == nil {
		return nil
	}
	ra := ev.Chat.RequiredAction
	fmt.Fprintf(s.info, "chat %s waits for answers to its tool calls:\n", id)
	if err := s.answerCalls(ctx, ra.ToolCalls, ra.Deadline); err != nil {
		return err
	}
	return s.turn(ctx, true)
}

// openStream opens the chat's stream after the message id after, and reads
// it in the background into s.events.
func (s *chatSession) openStream(ctx context.Context, after int64) error {
	st, err := s.c.Stream(ctx, s.chatID, after)
	if err != nil {
		return err
	}
	s.stream, s.events = st, make(chan client.ChatEvent)
	go func() {
		defer close(s.events)
		for st.Next() {
			select {
			case s.events <- st.Event():
			case <-s.quit:
				return
			}
		}
		s.streamErr = st.Err()
	}()
	return nil
}

// next returns the next event to handle: from the backlog, else from the
// stream; false once the stream ended (or ctx did).
func (s *chatSession) next(ctx context.Context) (client.ChatEvent, bool) {
	if len(s.backlog) > 0 {
		ev := s.backlog[0]
		s.backlog = s.backlog[1:]
		return ev, true
	}
	if s.ended {
		return client.ChatEvent{}, false
	}
	select {
	case ev, ok := <-s.events:
		if !ok {
			s.ended = true
		}
		return ev, ok
	case <-ctx.Done():
		return client.ChatEvent{}, false
	}
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
	s.busy("waiting for the model")
	return nil
}

// turn streams the answer to the last message until the chat is idle,
// answering the tool calls it waits for on the way. With anyIdle, the first
// idle status ends it (no message of the turn was sent: the chat runs on
// after its calls were answered).
func (s *chatSession) turn(ctx context.Context, anyIdle bool) error {
	sawUser := false
	for {
		ev, ok := s.next(ctx)
		if !ok {
			break
		}
		switch ev.Kind {
		case client.EventStatus:
			if ev.Chat == nil {
				continue
			}
			switch ev.Status {
			case client.StatusPending:
				s.busy("waiting for the model")
			case client.StatusRunning:
				s.busy("the model is working")
			case client.StatusRequiresAction:
				if ra := ev.Chat.RequiredAction; ra != nil {
					if err := s.answerCalls(ctx, ra.ToolCalls, ra.Deadline); err != nil {
						return err
					}
				}
			}
			// An Initial status (a new connection) was read after the
			// message was sent: idle means answered.
			if (ev.Status == client.StatusWaiting || ev.Status == client.StatusError) && (sawUser || ev.Initial || anyIdle) {
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
			if err := s.answerCalls(ctx, ev.ToolCalls, ev.Deadline); err != nil {
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
	if s.ended && s.streamErr != nil {
		return fmt.Errorf("chat stream: %w", s.streamErr)
	}
	return errors.New("chat stream: ended")
}

// finish ends a turn: the messages the stream has not delivered yet (after
// a reconnection) are read and shown; a failed run is an error.
func (s *chatSession) finish(ctx context.Context, ch client.Chat) error {
	s.work.clear()
	msgs, err := s.c.AllMessages(ctx, s.chatID, s.seen)
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

// show prints an assistant message that was not streamed, once, and the
// results of tool calls this person did not answer (the server's tools,
// mostly) as they arrive.
func (s *chatSession) show(m client.Message) {
	s.seen = max(s.seen, m.ID)
	if s.printed[m.ID] {
		return
	}
	s.printed[m.ID] = true
	switch m.Role {
	case client.RoleTool:
		s.showResults(m)
		return
	case client.RoleAssistant:
	default:
		return
	}
	if !s.streamed[m.ID] {
		s.write(m.Text())
	}
	s.endLine()
	for _, p := range m.Parts {
		if p.Type == client.PartToolCall {
			s.busy("calling " + p.ToolName)
			break
		}
	}
}

// showResults prints the results of a tool message on the info stream, one
// line each: the tool and the start of its result.
func (s *chatSession) showResults(m client.Message) {
	shown := false
	for _, p := range m.Parts {
		if p.Type != client.PartToolResult || s.answered[p.ToolCallID] {
			continue
		}
		s.endLine()
		if p.IsError {
			fmt.Fprintf(s.info, "tool %s (error): %s\n", p.ToolName, shortResult(p.Output))
		} else {
			fmt.Fprintf(s.info, "tool %s: %s\n", p.ToolName, shortResult(p.Output))
		}
		shown = true
	}
	if shown {
		s.busy("the model is working")
	}
}

// shortResultRunes bounds the view of a tool result.
const shortResultRunes = 100

// shortResult is a tool output on one line: a JSON string as its text,
// anything else as compact JSON, cut to about shortResultRunes.
func shortResult(raw json.RawMessage) string {
	var text string
	if json.Unmarshal(raw, &text) != nil {
		text = compactJSON(raw)
	}
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > shortResultRunes {
		text = string(r[:shortResultRunes]) + "…"
	}
	return text
}

// busy shows that the chat is at work, unless an answer's line is open.
func (s *chatSession) busy(label string) {
	if !s.midLine {
		s.work.start(label)
	}
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
// results and the decisions; each call is asked about once. While it asks,
// it watches the stream: when the chat moves on without these answers (the
// deadline passed, another client answered), it says so at once and
// returns, leaving the events to the turn.
func (s *chatSession) answerCalls(ctx context.Context, calls []client.ToolCall, deadline time.Time) error {
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
	s.work.clear()
	s.watch = newCallWatch(fresh, deadline)
	defer func() { s.watch = nil }()
	// The events read but not handled yet came after these calls: they may
	// show the chat has moved on already.
	for _, ev := range s.backlog {
		if s.watch.reason = s.watch.judge(ev); s.watch.reason != "" {
			break
		}
	}
	err := s.answer(ctx, fresh, deadline)
	var mo *movedOnError
	if errors.As(err, &mo) {
		fmt.Fprintf(s.info, "the chat moved on: %s\n", mo.reason)
		if !strings.HasPrefix(mo.reason, "another client") {
			for id := range s.watch.calls {
				s.answered[id] = true // their results say what was just said
			}
		}
		for _, id := range s.watch.stillPending {
			delete(s.asked, id) // asked again when the turn reads that they wait
		}
		return nil
	}
	return err
}

// answer asks about the calls and posts the answers.
func (s *chatSession) answer(ctx context.Context, calls []client.ToolCall, deadline time.Time) error {
	var (
		results   []client.ToolResult
		approvals []client.ToolCall
		decisions []client.Decision
	)
	for _, call := range calls {
		if call.NeedsApproval() {
			if !deadline.IsZero() {
				fmt.Fprintf(s.info, "(decide by %s)\n", deadlineText(deadline, time.Now()))
			}
			d, err := s.askDecision(ctx, call)
			if err != nil {
				return err
			}
			approvals, decisions = append(approvals, call), append(decisions, d)
			continue
		}
		fmt.Fprintf(s.info, "tool call %s %s\n", call.ToolName, compactJSON(call.Args))
		prompt := "result (JSON, text, or !error TEXT)> "
		if !deadline.IsZero() {
			prompt = fmt.Sprintf("result (JSON, text, or !error TEXT; by %s)> ", deadlineText(deadline, time.Now()))
		}
		line, err := s.ask(ctx, prompt)
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
		default:
			for _, r := range results {
				s.answered[r.ToolCallID] = true
				s.watch.forget(r.ToolCallID) // the chat moves on with them
			}
		}
	}
	if len(approvals) > 0 {
		if err := s.decide(ctx, approvals, decisions); err != nil {
			return err
		}
	}
	s.busy("waiting for the model")
	return nil
}

// deadlineText is when a deadline is, in local time, and how long is left
// at now.
func deadlineText(deadline, now time.Time) string {
	local := deadline.Local()
	when := local.Format("15:04:05")
	if y, m, d := local.Date(); y != now.Local().Year() || m != now.Local().Month() || d != now.Local().Day() {
		when = local.Format("Jan 2 15:04:05")
	}
	left := deadline.Sub(now).Round(time.Second)
	if left <= 0 {
		return when + ", passed"
	}
	return fmt.Sprintf("%s, %s left", when, left)
}

// callWatch follows the stream while the person is asked about calls, to
// tell when the chat moves on without the answers.
type callWatch struct {
	calls    map[string]bool // the calls still waiting for this person's answers
	deadline time.Time
	reason   string // the backlog showed it moved on already

	// stillPending are the calls the chat waits for after it moved on (a
	// requires_action status without some of the calls asked about).
	stillPending []string
}

func newCallWatch(calls []client.ToolCall, deadline time.Time) *callWatch {
	w := &callWatch{calls: map[string]bool{}, deadline: deadline}
	for _, c := range calls {
		w.calls[c.ToolCallID] = true
	}
	return w
}

// forget stops watching a call this person answered.
func (w *callWatch) forget(id string) { delete(w.calls, id) }

// judge says why ev shows that the chat moved on without the answers, or ""
// when it does not.
func (w *callWatch) judge(ev client.ChatEvent) string {
	if w == nil || len(w.calls) == 0 {
		return ""
	}
	switch ev.Kind {
	case client.EventMessage:
		for _, p := range ev.Message.Parts {
			if w.calls[p.ToolCallID] && (p.Type == client.PartToolResult || p.Type == client.PartToolDecision) {
				return answeredBy(p)
			}
		}
	case client.EventStatus:
		switch {
		case ev.Chat == nil:
		case ev.Status != client.StatusRequiresAction:
			if !w.deadline.IsZero() && !time.Now().Before(w.deadline) {
				return "the deadline passed"
			}
			if ev.Status == client.StatusError {
				return "the run failed"
			}
			return "another client answered"
		case ev.Chat.RequiredAction != nil:
			return w.missing(ev.Chat.RequiredAction.ToolCalls)
		}
	case client.EventActionRequired:
		return w.missing(ev.ToolCalls)
	}
	return ""
}

// missing tells whether some of the calls asked about no longer wait among
// pending, which then are the calls the chat waits for.
func (w *callWatch) missing(pending []client.ToolCall) string {
	waiting := map[string]bool{}
	for _, c := range pending {
		waiting[c.ToolCallID] = true
	}
	for id := range w.calls {
		if !waiting[id] {
			w.stillPending = w.stillPending[:0]
			for _, c := range pending {
				w.stillPending = append(w.stillPending, c.ToolCallID)
			}
			return "another client answered"
		}
	}
	return ""
}

// answeredBy says who answered a call, from the part that answered it.
func answeredBy(p client.Part) string {
	if p.Type == client.PartToolDecision {
		if p.Decision != nil && p.Decision.DecidedBy != "" {
			return "another client decided (" + p.Decision.DecidedBy + ")"
		}
		return "another client decided"
	}
	var out string
	json.Unmarshal(p.Output, &out)
	switch {
	case p.IsError && strings.Contains(out, "before deadline"):
		return "the deadline passed"
	case p.IsError && out == "cancelled: interrupted":
		return "it was interrupted"
	case p.IsError && out == "cancelled: the user sent a new message":
		return "a new message was sent to it"
	}
	return "another client answered"
}

// movedOnError ends a prompt when the chat moved on without the answer.
type movedOnError struct{ reason string }

func (e *movedOnError) Error() string { return "the chat moved on: " + e.reason }

// decide posts the decisions on the approvals. When the server refuses them
// (say, edited arguments that do not match the tool's schema) while the
// same approvals still wait, it says why and asks for the decisions again.
func (s *chatSession) decide(ctx context.Context, approvals []client.ToolCall, decisions []client.Decision) error {
	for {
		_, err := s.c.Decide(ctx, s.chatID, decisions)
		var ae *client.APIError
		switch {
		case err == nil:
			for i, d := range decisions {
				if !d.Approve {
					s.answered[approvals[i].ToolCallID] = true // the denial is this person's
				}
			}
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
			reason, err := s.readLine(ctx)
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
		line, err := s.readLine(ctx)
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
		line, err := s.readLine(ctx)
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

// readLine reads a line of input. While calls are asked about (s.watch), it
// watches the stream meanwhile: an event that shows the chat moved on ends
// the read with a *movedOnError; every event read waits in the backlog for
// the turn.
func (s *chatSession) readLine(ctx context.Context) (string, error) {
	if s.watch == nil {
		return s.in.read(ctx)
	}
	if s.watch.reason != "" {
		return "", &movedOnError{reason: s.watch.reason}
	}
	for {
		events := s.events
		if s.ended {
			events = nil
		}
		select {
		case ev, ok := <-events:
			if !ok {
				s.ended = true
				continue
			}
			s.backlog = append(s.backlog, ev)
			if s.watch.reason = s.watch.judge(ev); s.watch.reason != "" {
				return "", &movedOnError{reason: s.watch.reason}
			}
		case r := <-s.in.next():
			return r.line, r.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
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
// for one can be cancelled, or combined with other waits. Reading starts
// with the first read.
type lineReader struct {
	r     io.Reader
	once  sync.Once
	lines chan readResult // the lines, then the end (an error) forever
}

// readResult is a line read, or why there is none (io.EOF at the end).
type readResult struct {
	line string
	err  error
}

func newLineReader(r io.Reader) *lineReader { return &lineReader{r: r, lines: make(chan readResult)} }

// next is the channel the next line (or the end) comes on.
func (l *lineReader) next() <-chan readResult {
	l.once.Do(func() {
		go func() {
			sc := bufio.NewScanner(l.r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				l.lines <- readResult{line: sc.Text()}
			}
			end := sc.Err()
			if end == nil {
				end = io.EOF
			}
			for {
				l.lines <- readResult{err: end}
			}
		}()
	})
	return l.lines
}

func (l *lineReader) read(ctx context.Context) (string, error) {
	select {
	case r := <-l.next():
		return r.line, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// statusLine shows, on a terminal, that the chat is at work: a spinner and
// a label on one line, erased before anything else is written there. When
// disabled (not a terminal), it writes nothing.
type statusLine struct {
	w       io.Writer
	enabled bool

	mu   sync.Mutex
	stop chan struct{} // closed to stop the spinner; nil when none runs
	done chan struct{} // closed when it stopped
}

// statusFrames are the spinner's frames, one per statusTick.
var statusFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

const statusTick = 100 * time.Millisecond

func newStatusLine(w io.Writer, enabled bool) *statusLine {
	return &statusLine{w: w, enabled: enabled}
}

// start shows label with a spinner (replacing what it showed), until clear.
func (l *statusLine) start(label string) {
	if !l.enabled {
		return
	}
	l.clear()
	l.mu.Lock()
	defer l.mu.Unlock()
	stop, done := make(chan struct{}), make(chan struct{})
	l.stop, l.done = stop, done
	fmt.Fprintf(l.w, "\r%s %s…", statusFrames[0], label)
	go func() {
		defer close(done)
		tick := time.NewTicker(statusTick)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
				l.mu.Lock()
				fmt.Fprintf(l.w, "\r%s %s…", statusFrames[i%len(statusFrames)], label)
				l.mu.Unlock()
			}
		}
	}()
}

// clear stops the spinner and erases its line, if it shows.
func (l *statusLine) clear() {
	l.mu.Lock()
	stop, done := l.stop, l.done
	l.stop, l.done = nil, nil
	l.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
	fmt.Fprint(l.w, "\r\033[K")
}

// clearing is a writer that erases the status line before it writes.
type clearing struct {
	status *statusLine
	w      io.Writer
}

func (c clearing) Write(p []byte) (int, error) {
	c.status.clear()
	return c.w.Write(p)
}
