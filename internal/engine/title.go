package engine

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/store"
)

const (
	titleTimeout  = 30 * time.Second
	titleMaxRunes = 80
	titlePrompt   = "Write a short title (at most 8 words) for a conversation that starts with the user's message below. Answer with the title alone: no quotes, no final period."
)

// maybeTitle generates a chat's title in the background when the run
// answers its first user message and the title is still the fallback made
// from that message. It never delays the answer; if it fails, the fallback
// stays. Only the chat's first run (its first lease) calls the model for a
// title: one after a hand-back, a recovery or a retry does not, so a chat
// costs one title call at most. The call's usage is the chat's and its
// owner's, like a step's, and counts against the owner's budgets; the
// call is cancelled when the engine shuts down, which it never holds up.
// The echo model cannot summarise, so its chats keep the fallback.
func (r *run) maybeTitle(model llm.Model, history []chat.Message) {
	if len(history) != 1 || history[0].Role != chat.RoleUser || r.lease.Generation != 1 {
		return
	}
	if n, ok := model.Provider.(llm.Named); ok && n.Name() == "echo" {
		return
	}
	fallback := chat.FallbackTitle(history[0].Parts, chat.DefaultLimits.MaxTitleBytes)
	if r.chat.Title != fallback {
		return // the client chose a title
	}
	e, id, first := r.e, r.chat.ID, history[0]
	ctx, cancel := context.WithTimeout(r.runs, titleTimeout)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer cancel()
		title, usage, err := generateTitle(ctx, model, first)
		if err != nil {
			e.log.Info("title not generated; keeping the fallback", "chat", id, "err", err)
		}
		if title == "" && usage == (chat.Usage{}) {
			return
		}
		// Recorded even when the engine is shutting down (the call was
		// made), within the bound of any write.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.WriteTimeout)
		defer cancel()
		if err := e.setTitle(wctx, id, fallback, title, usage); err != nil {
			e.log.Warn("title not saved", "chat", id, "err", err)
		}
	}()
}

// generateTitle asks the model for a title of the first message, and
// returns it ("" if the model wrote none) with the call's usage. A panic
// (a provider SDK's) is its error: it runs apart from any run, so nothing
// else would recover it, and the process would die with it.
func generateTitle(ctx context.Context, model llm.Model, first chat.Message) (title string, usage chat.Usage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	res, err := model.Provider.Stream(ctx, llm.Request{
		Model: model.ModelID, System: titlePrompt, MaxOutputTokens: 64,
		Messages: []chat.Message{{Role: chat.RoleUser, Parts: namedFiles(first.Parts)}},
	}, func(llm.Event) error { return nil })
	if err != nil {
		return "", chat.Usage{}, err
	}
	var b strings.Builder
	for _, p := range res.Parts {
		if p.Type == chat.PartText {
			b.WriteString(p.Text)
		}
	}
	usage = chat.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens, CostMicros: model.Cost(res.Usage)}
	return cleanTitle(b.String()), usage, nil
}

// namedFiles returns parts with each file as a text naming it: a title
// needs no file's content, and the title call loads none.
func namedFiles(parts []chat.Part) []chat.Part {
	out := make([]chat.Part, len(parts))
	for i, p := range parts {
		if p.Type == chat.PartFile {
			p = chat.TextPart("[" + chat.FileLabel(p) + "]")
		}
		out[i] = p
	}
	return out
}

// cleanTitle keeps the first line, without quotes or a final period, cut to
// titleMaxRunes, storable (a model may answer a NUL, which PostgreSQL refuses).
func cleanTitle(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(chat.StorableText(s)), "\n")
	s = strings.Trim(strings.TrimSpace(s), `"'“”`)
	s = strings.TrimSuffix(s, ".")
	if utf8.RuneCountInString(s) > titleMaxRunes {
		s = string([]rune(s)[:titleMaxRunes-1]) + "…"
	}
	return strings.TrimSpace(s)
}

// setTitle adds the title call's usage to the chat's (and so its
// owner's), and replaces the chat's title with title if it is still
// fallback, announcing the change. It is metadata, like a client's PATCH,
// so it takes no lease.
func (e *Engine) setTitle(ctx context.Context, id, fallback, title string, usage chat.Usage) error {
	return e.commit(ctx, func(tx store.Tx, n *events.Notice) error {
		c, err := tx.LockChat(ctx, id)
		if err != nil {
			return err
		}
		if usage != (chat.Usage{}) {
			if err := tx.AddUsage(ctx, id, usage); err != nil {
				return fmt.Errorf("add the title call's usage: %w", err)
			}
		}
		if title == "" || c.Title != fallback {
			return nil
		}
		c.Title = title
		if err := tx.UpdateChatMeta(ctx, &c); err != nil {
			return err
		}
		n.Feed = append(n.Feed, events.FeedEvent{Kind: events.KindTitleChange, Chat: c})
		return nil
	})
}
