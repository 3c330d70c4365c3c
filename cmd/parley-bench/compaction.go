package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// The compaction row: a long conversation on a model with a small window.
const (
	compactionWindow = 3000
	turnChars        = 600 // each question and each answer: about 150 tokens
)

// windowedModel is an in-process model with a context window: it counts a
// request's tokens as parley estimates them (characters / 4), refuses one
// over the window as a provider does ("context too long"), and answers
// any other at once with a text of turnChars characters.
type windowedModel struct {
	window int64

	mu        sync.Mutex
	calls     int
	refused   int
	maxTokens int64
}

func (m *windowedModel) Stream(_ context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	tokens := req.EstimateTokens()
	m.mu.Lock()
	m.calls++
	m.maxTokens = max(m.maxTokens, tokens)
	over := tokens > m.window
	if over {
		m.refused++
	}
	m.mu.Unlock()
	if over {
		return llm.Result{}, &llm.Error{Kind: llm.KindContextLength, Provider: "bench", HTTPStatus: 400,
			Message: fmt.Sprintf("%d tokens exceed the context window of %d", tokens, m.window)}
	}
	text := strings.Repeat("answer ", turnChars/7)
	if err := emit(llm.Event{Type: llm.TextDelta, Text: text}); err != nil {
		return llm.Result{}, err
	}
	return llm.Result{Parts: []chat.Part{chat.TextPart(text)}, FinishReason: "stop",
		Usage: llm.Usage{InputTokens: tokens, OutputTokens: chat.EstimateText(text)}}, nil
}

// windowedModels serves modelName from a windowedModel, compacting at 0.8.
type windowedModels struct{ m *windowedModel }

func (w windowedModels) Model(name string) (llm.Model, bool) {
	if name != modelName {
		return llm.Model{}, false
	}
	return llm.Model{Name: modelName, Provider: w.m, ModelID: modelName, ContextWindow: w.m.window, CompactAt: config.DefaultCompactAt}, true
}

// compactionRows runs one chat of -compaction-turns turns on a model with a
// window of compactionWindow tokens and reports whether every turn was
// answered with no request over the window, how often it compacted, and
// what share of the tokens the summaries took.
func (b *bench) compactionRows(ctx context.Context, db string, r *replica) {
	compactionTurns := b.o.compactionTurns
	metric := fmt.Sprintf("%d-turn chat on a %s-token window, %s: turns answered, none over the window",
		compactionTurns, thousands(compactionWindow), db)
	b.step("compaction, %s: a chat of %d turns on a %d-token window", db, compactionTurns, compactionWindow)
	m := &windowedModel{window: compactionWindow}
	answered, compactions, share, err := runLongChat(ctx, r, m, compactionTurns, b.log)
	if err != nil {
		b.t.failed(metric, err)
		return
	}
	ok := verdict(answered == compactionTurns && m.refused == 0 && m.maxTokens <= compactionWindow)
	b.t.add(row{metric: metric, value: fmt.Sprintf("%d of %d; largest request %d tokens", answered, compactionTurns, m.maxTokens),
		target: fmt.Sprintf("%d, ≤ %d", compactionTurns, compactionWindow), pass: ok})
	b.t.add(row{metric: fmt.Sprintf("the same chat, %s: compactions, and their share of the tokens spent", db),
		value: fmt.Sprintf("%d compactions; %.1f%% of tokens", compactions, 100*share)})
}

// runLongChat posts turns messages to one chat, each after the
// answer to the one before, and returns how many were answered, how many
// compactions the chat has, and their share of its tokens.
func runLongChat(ctx context.Context, r *replica, m *windowedModel, turns int, log *slog.Logger) (answered, compactions int, share float64, err error) {
	if err := createOwner(ctx, r.st); err != nil && !strings.Contains(err.Error(), "exists") {
		return 0, 0, 0, err
	}
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: modelName, Provider: "echo", Model: "echo"}}
	cfg.DefaultModel = modelName
	svc := service.New(r.st, r.ps, &cfg, log)
	c, err := svc.CreateChat(ctx, owner, service.NewChat{Title: "long chat"})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("create chat: %w", err)
	}
	stop := runEngine(engine.New(engine.Config{Concurrency: 1}, r.st, r.ps, windowedModels{m}, nil, log))
	defer stop()
	question := fmt.Sprintf("%q", strings.Repeat("question ", turnChars/9))
	for range turns {
		if _, err := svc.PostMessage(ctx, owner, c.ID, []byte(question), ""); err != nil {
			return 0, 0, 0, fmt.Errorf("post: %w", err)
		}
		if c, err = waitIdle(ctx, r.st, c.ID); err != nil {
			return 0, 0, 0, err
		}
		if c.Status != chat.Waiting {
			break
		}
		answered++
	}
	var spent, summaries int64
	err = store.ForEachMessage(ctx, r.st, c.ID, 0, func(msg chat.Message) error {
		if msg.Usage != nil {
			spent += msg.Usage.InputTokens + msg.Usage.OutputTokens
			if chat.IsCompaction(msg) {
				summaries += msg.Usage.InputTokens + msg.Usage.OutputTokens
			}
		}
		if chat.IsCompaction(msg) {
			compactions++
		}
		return nil
	})
	if spent > 0 {
		share = float64(summaries) / float64(spent)
	}
	return answered, compactions, share, err
}

// waitIdle waits until the chat is neither pending nor running.
func waitIdle(ctx context.Context, st store.Store, id string) (chat.Chat, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := st.GetChat(ctx, id)
		if err != nil {
			return c, err
		}
		if c.Status != chat.Pending && c.Status != chat.Running {
			return c, nil
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("chat %s still %s after 30s", id, c.Status)
		}
		time.Sleep(time.Millisecond)
	}
}
