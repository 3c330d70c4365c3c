package main

import (
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
	files        []string // --file paths
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
prompts for messages until end of input (Ctrl-D) or "/exit"; a chat that
fails does not end the session, but its error is the exit status unless a
later turn succeeds. A new chat's id is printed on stderr at the start, and
at the end the command that continues the conversation (--chat ID, with the --url, --data-dir or --config that
reached the server; a --token you gave shows as "--token …", never its
value).

Commands of an interactive session (not sent to the model):
  /attach PATH attach the file at PATH to your next message (as --file)
  /compact     summarise the older part of the chat to free its model's
               context window, and wait; it prints "compacted: N tokens
               before", or why there is nothing to compact
  /edit TEXT   replace your last message with TEXT and stream the new answer
               (the answers after it are superseded)
  /retry       answer your last message again; a chat that failed runs its
               failed run again
  /help        list the commands
Other lines that start with "/" (like "/call" below) are messages.

While the model works, and until the first words of its answer, a status
line shows it (only when stdout and stderr are a terminal). The calls of
server-side tools are shown on stderr as their results arrive: the tool's
name and the start of its result.

A chat continued with --chat that waits for tool results or approvals
(requires_action) shows its pending calls at once and asks for them, before
any message.

Files: each --file PATH (repeatable) uploads the file at PATH and attaches it
to the first message sent: an image (PNG, JPEG, GIF, WebP), a PDF, or a text,
Markdown, JSON or CSV file, up to the server's size limit (files.max_bytes,
20 MB by default). The model must take the kind of file (its "inputs" on the
server): a file it cannot take is refused when the message is sent, and in an
interactive session the message is not sent and you are asked again. See
docs/files.md.

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

  # Ask about an image
  parley chat --file photo.png "What is in this picture?"

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
			tools, err := parseTools(cmd.CommandPath(), f.tools)
			if err != nil {
				return err
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
	fl.StringArrayVar(&f.files, "file", nil, "attach the file at `PATH` to the first message sent: an image, a PDF, a text, Markdown, JSON or CSV file (repeatable)")
	fl.StringVar(&f.model, "model", "", "`model` of a new chat (default: the server's default)")
	fl.StringVar(&f.systemPrompt, "system", "", "system `prompt` of a new chat")
	fl.DurationVar(&f.toolTimeout, "tool-timeout", 0, "how long a new chat waits for your tool results (default: the server's, 10m)")
	return cmd
}

// parseTools reads the --tool declarations.
func parseTools(cmdPath string, specs []string) ([]client.DynamicTool, error) {
	var tools []client.DynamicTool
	for _, spec := range specs {
		name, rest, ok := strings.Cut(spec, "=")
		if !ok || name == "" || rest == "" {
			return nil, &usageError{cmd: cmdPath, err: fmt.Errorf("--tool %q: want NAME=FILE[:DESCRIPTION]", spec)}
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
// tokenFile is the file the token was read from, "" when it was given.
func serverAccess(a *app, f chatFlags) (url, token, tokenFile string, err error) {
	url, err = serverURL(f, a.getenv("PARLEY_URL"))
	if err != nil {
		return "", "", "", err
	}
	token = first(f.token, a.getenv("PARLEY_TOKEN"))
	if token != "" {
		return url, token, "", nil
	}
	cfg, err := a.loadConfig()
	if err != nil {
		return "", "", "", err
	}
	path := filepath.Join(cfg.DataDir, adminTokenFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", "", fmt.Errorf("no token: pass --token, set PARLEY_TOKEN, or run where the server's data dir is (%w)", err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return url, strings.TrimSpace(string(b)), path, nil
}

// explainUnauthorized says, when the server refused the token (401), which
// token it was (its file, or the flag or variable that gave it: never the
// token) and how to give another.
func explainUnauthorized(err error, f chatFlags, tokenFile string) error {
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
		return err
	}
	from := "the token of PARLEY_TOKEN"
	switch {
	case tokenFile != "":
		from = "the token read from " + tokenFile
	case f.tokenGiven:
		from = "the token of --token"
	}
	return fmt.Errorf("%w\nthe server refused %s: pass another with --token (or PARLEY_TOKEN), or point --data-dir at the data dir of the server you talk to", err, from)
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
	url, token, tokenFile, err := serverAccess(a, f)
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
			fmt.Fprintf(s.info, "continue it with: %s chat --chat %s%s\n", a.prog, s.chatID, continueFlags(a, f, url, tokenFile != ""))
		}
		if err != nil {
			err = explainUnauthorized(explainConnError(err, url), f, tokenFile)
		}
	}()
	for _, path := range f.files {
		if err = s.attach(ctx, path); err != nil {
			return err
		}
	}
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
		fmt.Fprintln(s.info, `(type a message and press Enter; "/help" lists the commands; "/exit" or Ctrl-D ends the session)`)
		if msg, err = s.prompt(ctx); err != nil {
			return s.endOfInput(err)
		}
	}

	for {
		// The first message creates the chat, unless it is continued.
		if s.chatID == "" {
			err = s.create(ctx, client.CreateChatRequest{Model: f.model, SystemPrompt: f.systemPrompt,
				DynamicTools: tools, Tools: f.serverTools, Approve: f.approve, ToolResultTimeout: f.toolTimeout, Message: content(msg, s.files)})
		} else {
			err = s.post(ctx, msg)
		}
		if !interactive || !s.refusedFiles(err) {
			if err != nil {
				break
			}
			if err = s.turn(ctx, false); !interactive {
				break
			}
			if err = s.goOn(err, ""); err != nil {
				break
			}
		}
		if msg, err = s.prompt(ctx); err != nil {
			return s.endOfInput(err) // the chat is idle: nothing to interrupt
		}
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
// "/exit" and Ctrl-C end it without an error, unless the chat's last turn
// failed (and was not tried again with success): that is the error.
func (s *chatSession) endOfInput(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, errExit) || errors.Is(err, context.Canceled) {
		return s.failed
	}
	return err
}

// errExit is the interactive "/exit".
var errExit = errors.New("exit")
