package chatcli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/parleyhq/parley/client"
)

// chatHelp lists the commands of an interactive session.
const chatHelp = `commands:
  /attach PATH attach the file at PATH to your next message
  /compact     summarise the older part of the chat, to free its model's context window
  /edit TEXT   replace your last message with TEXT and answer it again
  /retry       answer your last message again (after a failure: try the failed run again)
  /help        show this list
  /exit        end the session (Ctrl-D too)
Other lines that start with "/" (like "/call" of the echo model) are sent as messages.
`

// commandError is a command the session refuses or the server refused: it
// is shown, and the session goes on.
type commandError struct{ msg string }

func (e *commandError) Error() string { return e.msg }

// chatFailedError is a turn that ended with the chat in error: an
// interactive session shows it and goes on, so that /retry can try again.
type chatFailedError struct{ msg string }

func (e *chatFailedError) Error() string { return e.msg }

// prompt asks for the next message of an interactive session, running the
// session's commands typed meanwhile; a line that is not one of them is the
// message.
func (s *chatSession) prompt(ctx context.Context) (string, error) {
	for {
		line, err := s.ask(ctx, "> ")
		if err != nil {
			return "", err
		}
		name, arg, _ := strings.Cut(line, " ")
		arg = strings.TrimSpace(arg)
		var run func(context.Context, string) error
		switch name {
		case "/help":
			fmt.Fprint(s.info, chatHelp)
			continue
		case "/attach":
			// There need be no chat yet: the file goes with the next message.
			if err := s.goOn(s.attachCommand(ctx, arg), name); err != nil {
				return "", err
			}
			continue
		case "/compact":
			run = s.compact
		case "/edit":
			run = s.edit
		case "/retry":
			run = s.retry
		default:
			return line, nil
		}
		if s.chatID == "" {
			fmt.Fprintf(s.info, "%s: there is no chat yet; send a message first\n", name)
			continue
		}
		if err := s.goOn(run(ctx, arg), name); err != nil {
			return "", err
		}
	}
}

// goOn shows what went wrong in an interactive session when the session
// can go on: a chat that failed, and, after the command name, a command
// refused by the session or the server. It returns the errors that end the
// session; none clears the failure remembered for the end (endOfInput).
func (s *chatSession) goOn(err error, name string) error {
	var (
		ce *commandError
		ae *client.APIError
		cf *chatFailedError
	)
	switch {
	case err == nil:
		s.failed = nil
	case errors.As(err, &cf):
		s.failed = err
		fmt.Fprintf(s.info, "%s (/retry tries again)\n", cf.msg)
	case name != "" && errors.As(err, &ce):
		fmt.Fprintf(s.info, "%s: %s\n", name, ce.msg)
	case name != "" && errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500 &&
		ae.StatusCode != 401 && ae.Code != "not_found":
		fmt.Fprintf(s.info, "%s: %s\n", name, ae.Message)
	default:
		return err
	}
	return nil
}

// compact asks the server to compact the chat and waits until it did; the
// compaction message shows how big the context was (show).
func (s *chatSession) compact(ctx context.Context, arg string) error {
	if arg != "" {
		return &commandError{"takes no argument"}
	}
	ch, err := s.c.Compact(ctx, s.chatID)
	if err != nil {
		return err
	}
	s.awaitRun(ch, "compacting")
	return s.turn(ctx, true)
}

// edit replaces the chat's last user message with text, and streams the
// new answer.
func (s *chatSession) edit(ctx context.Context, text string) error {
	if text == "" {
		return &commandError{"give the new text of your last message: /edit TEXT"}
	}
	msgs, err := s.c.AllMessages(ctx, s.chatID, 0)
	if err != nil {
		return fmt.Errorf("read the chat: %w", err)
	}
	var last int64
	for _, m := range msgs {
		if m.Role == client.RoleUser && !m.IsRepair() {
			last = m.ID
		}
	}
	if last == 0 {
		return &commandError{"the chat has no message of yours to edit"}
	}
	ch, err := s.c.EditMessage(ctx, s.chatID, last, text)
	if err != nil {
		return err
	}
	s.awaitRun(ch, "waiting for the model")
	return s.turn(ctx, true)
}

// retry answers the last user message again: a chat in error runs its
// failed run again, any other one regenerates its last answer.
func (s *chatSession) retry(ctx context.Context, arg string) error {
	if arg != "" {
		return &commandError{"takes no argument"}
	}
	ch, err := s.c.GetChat(ctx, s.chatID)
	if err != nil {
		return err
	}
	if ch.Status == client.StatusError {
		ch, err = s.c.Retry(ctx, s.chatID)
	} else {
		ch, err = s.c.Regenerate(ctx, s.chatID)
	}
	if err != nil {
		return err
	}
	s.awaitRun(ch, "waiting for the model")
	return s.turn(ctx, true)
}

// awaitRun prepares the turn of a run a command started, whose answer was
// ch: only a status newer than ch ends it.
func (s *chatSession) awaitRun(ch client.Chat, label string) {
	s.minVersion = ch.Version
	s.busy(label)
}

// showCompaction tells of a compaction message: how big the context was.
func (s *chatSession) showCompaction(p client.Part) {
	s.endLine()
	if p.Source == client.CompactManual {
		fmt.Fprintf(s.info, "compacted: %d tokens before\n", p.TokensBefore)
		return
	}
	fmt.Fprintf(s.info, "compacted (%s): %d tokens before\n", p.Source, p.TokensBefore)
}
