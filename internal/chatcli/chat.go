// Package chatcli is parley's terminal client, "parley chat": a session
// that creates a chat (or continues one), streams the answers to stdout, and
// asks the person at the terminal for what the chat waits for (the results
// of their dynamic tools, approvals), with commands of its own (/compact,
// /edit, /retry, /attach). It talks to a parley server only through the Go
// client; the command line that fills its Options is cmd/parley's.
package chatcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/parleyhq/parley/client"
)

// DefaultURL is the server a session talks to without --url or PARLEY_URL.
const DefaultURL = "http://127.0.0.1:8080"

// Options are a session's settings: the command line's, and what the
// process gives it.
type Options struct {
	URL, Token   string
	ChatID       string               // continue this chat; "": a new one
	Tools        []client.DynamicTool // --tool: dynamic tools the person answers
	ServerTools  []string             // --tools globs; nil: not given
	Approve      []string             // --approve globs
	Files        []string             // --file paths
	Model        string
	SystemPrompt string
	Agent        string // --agent: a new chat starts from this agent
	ToolTimeout  time.Duration

	URLGiven, TokenGiven bool // --url, --token on the command line

	Stdin          io.Reader // the person's lines
	Stdout, Stderr io.Writer // the answers; the rest (chat id, calls, prompts, notices)
	Terminal       bool      // stdout and stderr are a terminal: show the status line
	Getenv         func(string) string
	Prog           string // how parley was started, for the command that continues the chat
	// AdminTokenFile returns, when neither --token nor PARLEY_TOKEN gives a
	// token, the path of the file that holds the admin token, and the
	// flags that chose it (" --config X --data-dir Y", shell-quoted) for
	// the command that continues the chat. nil: there is none.
	AdminTokenFile func() (path, flags string, err error)
}

// serverAccess resolves the server's URL and the token: flags, then the
// environment, then the defaults (the admin token file of the data dir).
// tokenFile is the file the token was read from, "" when it was given, and
// fileFlags the flags that chose that file.
func serverAccess(o Options) (url, token, tokenFile, fileFlags string, err error) {
	url, err = serverURL(o, o.Getenv("PARLEY_URL"))
	if err != nil {
		return "", "", "", "", err
	}
	token = first(o.Token, o.Getenv("PARLEY_TOKEN"))
	if token != "" {
		return url, token, "", "", nil
	}
	if o.AdminTokenFile == nil {
		return "", "", "", "", errors.New("no token: pass --token or set PARLEY_TOKEN")
	}
	path, fileFlags, err := o.AdminTokenFile()
	if err != nil {
		return "", "", "", "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", "", "", fmt.Errorf("no token: pass --token, set PARLEY_TOKEN, or run where the server's data dir is (%w)", err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return url, strings.TrimSpace(string(b)), path, fileFlags, nil
}

// explainUnauthorized says, when the server refused the token (401), which
// token it was (its file, or the flag or variable that gave it: never the
// token) and how to give another.
func explainUnauthorized(err error, o Options, tokenFile string) error {
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
		return err
	}
	from := "the token of PARLEY_TOKEN"
	switch {
	case tokenFile != "":
		from = "the token read from " + tokenFile
	case o.TokenGiven:
		from = "the token of --token"
	}
	return fmt.Errorf("%w\nthe server refused %s: pass another with --token (or PARLEY_TOKEN), or point --data-dir at the data dir of the server you talk to", err, from)
}

// serverURL is the server's URL: --url, else env (PARLEY_URL), else the
// default. An address without a scheme (127.0.0.1:8080, localhost:8080) is
// taken as http://; a scheme other than http or https is an error that says
// what to write.
func serverURL(o Options, env string) (string, error) {
	raw, from := o.URL, "--url"
	if raw == "" {
		raw, from = env, "PARLEY_URL"
	}
	if raw == "" {
		return DefaultURL, nil
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := neturl.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s %q: want the server's address, like %s or https://parley.example.com", from, first(o.URL, env), DefaultURL)
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
// continues the chat: --url if given, the flags that chose the file the
// token was read from (fileFlags), and "--token …" (never the token) if
// given.
func continueFlags(o Options, url, fileFlags string) string {
	var b strings.Builder
	if o.URLGiven {
		b.WriteString(" --url " + ShellQuote(url))
	}
	b.WriteString(fileFlags)
	if o.TokenGiven {
		b.WriteString(" --token …")
	}
	return b.String()
}

// ShellQuote quotes s for a POSIX shell, unless it needs no quoting.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Run runs a session: the first message (argv[0], or asked for when argv
// is empty), then, when interactive, more until the end of input or
// "/exit". Its error is the session's: the last turn's failure, a refused
// token or an unreachable server explained.
func Run(ctx context.Context, o Options, argv []string) (err error) {
	url, token, tokenFile, fileFlags, err := serverAccess(o)
	if err != nil {
		return err
	}
	work := newStatusLine(o.Stderr, o.Terminal)
	s := &chatSession{
		c:        client.New(url, token),
		out:      clearing{work, o.Stdout},
		info:     clearing{work, o.Stderr},
		work:     work,
		in:       newLineReader(o.Stdin),
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
			fmt.Fprintf(s.info, "continue it with: %s chat --chat %s%s\n", o.Prog, s.chatID, continueFlags(o, url, fileFlags))
		}
		if err != nil {
			err = explainUnauthorized(explainConnError(err, url), o, tokenFile)
		}
	}()
	for _, path := range o.Files {
		if err = s.attach(ctx, path); err != nil {
			return err
		}
	}
	interactive := len(argv) == 0
	if o.ChatID != "" {
		if err = s.open(ctx, o.ChatID); err != nil {
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
			err = s.create(ctx, client.CreateChatRequest{Agent: o.Agent, Model: o.Model, SystemPrompt: o.SystemPrompt,
				DynamicTools: o.Tools, Tools: o.ServerTools, Approve: o.Approve, ToolResultTimeout: o.ToolTimeout, Message: content(msg, s.files)})
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
