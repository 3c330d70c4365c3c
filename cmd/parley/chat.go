package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/chatcli"
)

// newChatCmd is "parley chat": its flags and help; the session is
// chatcli's.
func newChatCmd(a *app) *cobra.Command {
	var (
		f     chatcli.Options
		tools []string // --tool NAME=FILE[:DESCRIPTION]
	)
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

Agents: --agent NAME starts the new chat from a stored agent (see
docs/agents.md): its model, system prompt, tools, approvals and dynamic
tools, each of which --model, --system, --tools, --approve and --tool
override for this chat.

Try it with no provider key on the built-in echo model: the message
'/call get_weather {"city": "Paris"}' makes it call get_weather.

The server is --url (env PARLEY_URL; default ` + chatcli.DefaultURL + `; without a
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

  # A chat with a stored agent
  parley chat --agent researcher "What changed in Go 1.26?"

  # Only some of the server's tools
  parley chat --tools 'weather_*,github_search_issues' "Any open issue about rain?"

  # Approve each call of the built-in http_fetch yourself
  parley chat --approve http_fetch "What is on https://example.com?"`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if f.ChatID != "" && len(tools) > 0 {
				return &usageError{cmd: cmd.CommandPath(), err: errors.New("--tool declares tools of a new chat; it does not go with --chat")}
			}
			if cmd.Flags().Changed("tools") {
				if f.ChatID != "" {
					return &usageError{cmd: cmd.CommandPath(), err: errors.New("--tools selects the server-side tools of a new chat; it does not go with --chat")}
				}
				if f.ServerTools == nil {
					f.ServerTools = []string{} // --tools '': none
				}
			}
			if f.ChatID != "" && len(f.Approve) > 0 {
				return &usageError{cmd: cmd.CommandPath(), err: errors.New("--approve selects the tools a new chat asks approval of; it does not go with --chat")}
			}
			f.URLGiven, f.TokenGiven = cmd.Flags().Changed("url"), cmd.Flags().Changed("token")
			var err error
			if f.Tools, err = parseTools(cmd.CommandPath(), tools); err != nil {
				return err
			}
			f.Stdin, f.Stdout, f.Stderr = os.Stdin, a.stdout, a.stderr
			f.Terminal = isTerminal(a.stdout) && isTerminal(a.stderr)
			f.Getenv, f.Prog = a.getenv, a.prog
			f.AdminTokenFile = func() (string, string, error) { return adminTokenOf(a) }
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			return chatcli.Run(ctx, f, argv)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.URL, "url", "", "server `URL` (env PARLEY_URL; default "+chatcli.DefaultURL+")")
	fl.StringVar(&f.Token, "token", "", "API `token` (env PARLEY_TOKEN; default: <data-dir>/admin.token)")
	fl.StringVar(&f.ChatID, "chat", "", "continue the chat with this `id`")
	fl.StringArrayVar(&tools, "tool", nil, "declare a dynamic tool that you answer: `NAME=FILE[:DESCRIPTION]`, FILE holding its JSON Schema (repeatable)")
	fl.StringSliceVar(&f.ServerTools, "tools", nil, "offer a new chat's model only the server-side tools these `globs` match (comma-separated, repeatable; '' for none; default: every one)")
	fl.StringSliceVar(&f.Approve, "approve", nil, "ask your approval of each call of the server-side tools these `globs` match, besides those the server requires it of (comma-separated, repeatable; new chats)")
	fl.StringArrayVar(&f.Files, "file", nil, "attach the file at `PATH` to the first message sent: an image, a PDF, a text, Markdown, JSON or CSV file (repeatable)")
	fl.StringVar(&f.Model, "model", "", "`model` of a new chat (default: the server's default)")
	fl.StringVar(&f.SystemPrompt, "system", "", "system `prompt` of a new chat")
	fl.StringVar(&f.Agent, "agent", "", "start a new chat from the agent of this `name`: its model, system prompt and tools, which --model, --system, --tools, --tool and --approve override")
	fl.DurationVar(&f.ToolTimeout, "tool-timeout", 0, "how long a new chat waits for your tool results (default: the server's, 10m)")
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

// adminTokenOf is the admin token file of the configuration's data dir, for
// a chat given no token, and the flags that chose that configuration, for
// the command that continues the chat.
func adminTokenOf(a *app) (path, flags string, err error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return "", "", err
	}
	if a.flags.ConfigFile != "" {
		flags += " --config " + chatcli.ShellQuote(a.flags.ConfigFile)
	}
	if a.flags.DataDir != "" {
		flags += " --data-dir " + chatcli.ShellQuote(a.flags.DataDir)
	}
	return filepath.Join(cfg.DataDir, adminTokenFile), flags, nil
}
