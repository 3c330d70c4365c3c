package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/tool"
)

// stepState is what a run has streamed of the step in progress. Deltas are
// published in batches (at most DeltaFlush late) on the chat's topic, and
// kept, so a subscriber that joins mid-step gets them in a snapshot.
//
// Deltas cross replicas only once the run is watched: until some stream
// asks for a snapshot, they go to this process's subscribers only (on
// PostgreSQL each publication to other replicas is a round trip of its own,
// wasted on a chat nobody elsewhere streams).
type stepState struct {
	pubMu sync.Mutex // held while publishing: batches and snapshots leave in order

	mu        sync.Mutex
	e         *Engine
	chatID    string
	msgID     int64          // 0 between steps
	deltas    []events.Delta // everything streamed of this step
	published int            // deltas[:published] have been published (or skipped)
	timer     *time.Timer    // pending flush, if any
	// watched: a snapshot was asked for during this run, so its deltas go to
	// every replica from then on. Set under pubMu too, and kept across steps.
	watched bool
	// reported: when each tool call of the run last had a progress report
	// published.
	reported map[string]time.Time
}

func newStepState() *stepState { return &stepState{} }

// begin starts a step whose answer will be message msgID. A watched run
// stays watched: its streams need every step's deltas.
func (s *stepState) begin(e *Engine, chatID string, msgID int64) *stepState {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.e, s.chatID, s.msgID, s.deltas, s.published = e, chatID, msgID, nil, 0
	return s
}

// emit records one provider event and schedules its publication.
func (s *stepState) emit(ev llm.Event) error {
	d := events.Delta{Text: ev.Text, Index: ev.Index}
	switch ev.Type {
	case llm.TextDelta:
		d.Type = events.DeltaText
	case llm.ReasoningDelta:
		d.Type = events.DeltaReasoning
	case llm.ToolCallStart:
		d.Type, d.ToolCallID, d.ToolName = events.DeltaToolCallStart, ev.ToolCallID, ev.ToolName
	case llm.ToolCallDelta:
		d.Type = events.DeltaToolCallDelta
	default:
		return nil // ToolCallEnd: the durable message carries the whole call
	}
	s.mu.Lock()
	s.deltas = append(s.deltas, d)
	if s.timer == nil {
		s.timer = time.AfterFunc(s.e.cfg.DeltaFlush, s.flush)
	}
	s.mu.Unlock()
	return nil
}

// flush publishes the deltas not yet published as one part event: to every
// replica if the run is watched, else to this process's subscribers only.
// Their sequence numbers advance either way, so a snapshot covers them.
func (s *stepState) flush() {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	s.mu.Lock()
	s.timer = nil
	batch := events.PartBatch{MessageID: s.msgID, Seq: s.published, Deltas: s.deltas[s.published:]}
	s.published = len(s.deltas)
	e, chatID, watched := s.e, s.chatID, s.watched
	s.mu.Unlock()
	if len(batch.Deltas) == 0 {
		return
	}
	if err := e.publishLive(chatID, events.ChatEvent{Kind: events.KindPart, Parts: &batch}, watched); err != nil {
		e.log.Warn("deltas not published", "chat", chatID, "err", err)
	}
}

// publishLive publishes a live event of a run (deltas, tool progress) on the
// chat's topic. A watched run's go to every replica; an unwatched run's go to
// this process's subscribers only (PublishLocal, where the PubSub is shared),
// and are not even encoded when the PubSub knows there are none.
func (e *Engine) publishLive(chatID string, ev events.ChatEvent, watched bool) error {
	topic := events.ChatTopic(chatID)
	if !watched && !pubsub.MayHear(e.ps, topic) {
		return nil
	}
	payload := events.Encode(ev)
	if lp, ok := e.ps.(pubsub.LocalPublisher); ok && !watched {
		if err := lp.PublishLocal(topic, payload); err != nil {
			return fmt.Errorf("publish deltas locally: %w", err)
		}
		return nil
	}
	return e.ps.Publish(context.Background(), topic, payload)
}

// progressEvery is the least time between two progress reports of one call
// that reach the stream: a person reading them needs no more.
const progressEvery = 50 * time.Millisecond

// progress publishes a progress report of one of the step's tool calls,
// routed as the step's deltas are (to every replica once the run is
// watched). Reports are not kept for snapshots: the next one supersedes it.
func (s *stepState) progress(msgID int64, c chat.ToolCall, p tool.Progress) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	s.mu.Lock()
	e, chatID, watched := s.e, s.chatID, s.watched
	now := time.Now()
	last, seen := s.reported[c.ToolCallID]
	final := p.Total > 0 && p.Progress >= p.Total
	if seen && now.Sub(last) < progressEvery && !final {
		s.mu.Unlock()
		return // a chatty tool: at most one report per call each progressEvery
	}
	if s.reported == nil {
		s.reported = map[string]time.Time{}
	}
	s.reported[c.ToolCallID] = now
	s.mu.Unlock()
	ev := events.ChatEvent{Kind: events.KindToolProgress, Progress: &events.ToolProgress{
		Type: events.KindToolProgress, MessageID: msgID, ToolCallID: c.ToolCallID, ToolName: c.ToolName,
		Progress: p.Progress, Total: p.Total, Message: p.Message}}
	if err := e.publishLive(chatID, ev, watched); err != nil {
		e.log.Warn("tool progress not published", "chat", chatID, "err", err)
	}
}

// end publishes what is left of the step; the step's deltas stay readable by
// partial until the next begin.
func (s *stepState) end() {
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.flush()
	s.mu.Lock()
	s.msgID = 0
	s.mu.Unlock()
}

// partial assembles the text and reasoning streamed so far, for an
// interrupted step. Tool calls are left out: they never ran, and an
// unfinished call would need a result of its own.
func (s *stepState) partial() []chat.Part {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []chat.Part
	var cur *strings.Builder
	curType := ""
	for _, d := range s.deltas {
		var t string
		switch d.Type {
		case events.DeltaText:
			t = chat.PartText
		case events.DeltaReasoning:
			t = chat.PartReasoning
		default:
			continue
		}
		if t != curType {
			if cur != nil {
				parts = append(parts, chat.Part{Type: curType, Text: cur.String()})
			}
			cur, curType = &strings.Builder{}, t
		}
		cur.WriteString(d.Text)
	}
	if cur != nil {
		parts = append(parts, chat.Part{Type: curType, Text: cur.String()})
	}
	return parts
}

// markWatched makes the rest of the run's deltas go to every replica, as a
// snapshot request does, without a snapshot.
func (s *stepState) markWatched() {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	s.mu.Lock()
	s.watched = true
	s.mu.Unlock()
}

// answer publishes, to every replica, a snapshot of the published deltas of
// the step in progress (none between steps) for the subscriber that sent
// nonce, and marks the run watched first: the subscriber may be on another
// replica, and every batch flushed after the snapshot must reach it too.
func (s *stepState) answer(ctx context.Context, e *Engine, chatID, nonce string) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	s.mu.Lock()
	s.watched = true
	batch := events.PartBatch{MessageID: s.msgID}
	if s.msgID != 0 {
		batch.Deltas = append([]events.Delta(nil), s.deltas[:s.published]...)
	}
	s.mu.Unlock()
	ev := events.ChatEvent{Kind: events.KindSnapshot, Nonce: nonce, Parts: &batch}
	if err := e.ps.Publish(ctx, events.ChatTopic(chatID), events.Encode(ev)); err != nil && ctx.Err() == nil {
		// A run that ended meanwhile needs no snapshot: its stream reads
		// the messages it wrote.
		e.log.Warn("snapshot not published", "chat", chatID, "err", err)
	}
}
