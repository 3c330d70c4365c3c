package api_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// heldControls is the worker replica's PubSub with its first subscription
// to a chat's control topic held back: it returns only once a snapshot
// request on that topic reached this replica and went unheard (a probe
// sees it), so a stream on another replica joins inside the window between
// the worker's commit of running and its subscription.
type heldControls struct {
	pubsub.PubSub // *pgpubsub.PubSub, with its optional interfaces below
	t             *testing.T
	reached       chan struct{} // closed when the worker subscribes
	once          sync.Once
}

func (h *heldControls) Subscribe(ctx context.Context, topic string) (pubsub.Subscription, error) {
	first := false
	if strings.HasPrefix(topic, "control.") {
		h.once.Do(func() { first = true })
	}
	if !first {
		return h.PubSub.Subscribe(ctx, topic)
	}
	probe, err := h.PubSub.Subscribe(ctx, topic)
	if err != nil {
		return nil, err
	}
	close(h.reached)
	select {
	case <-probe.C(): // the stream's request: lost for the worker
	case <-ctx.Done():
	case <-time.After(streamTimeout):
		h.t.Error("no snapshot request reached the worker's replica")
	}
	probe.Close()
	return h.PubSub.Subscribe(ctx, topic)
}

func (h *heldControls) PublishLocal(topic string, payload []byte) error {
	return h.PubSub.(pubsub.LocalPublisher).PublishLocal(topic, payload)
}

func (h *heldControls) Stage(ctx context.Context, ob pubsub.Outbox, msgs []pubsub.Message) (func(), error) {
	return h.PubSub.(pubsub.Stager).Stage(ctx, ob, msgs)
}

// heldPending is the streaming replica's store: a chat read while it is
// pending is read again once the worker took it (reached), so a follow
// that starts the run itself (the OpenAI-compatible routes) reads it
// running, inside the window too.
type heldPending struct {
	store.Store
	reached <-chan struct{}
}

func (h heldPending) GetChat(ctx context.Context, id string) (chat.Chat, error) {
	c, err := h.Store.GetChat(ctx, id)
	if err != nil || c.Status != chat.Pending {
		return c, err
	}
	select {
	case <-h.reached:
	case <-ctx.Done():
		return c, ctx.Err()
	}
	return h.Store.GetChat(ctx, id)
}

// textReader reads a view's stream in the background and sends the text
// of its deltas, piece by piece, closing pieces at the run's end.
type textReader struct {
	pieces chan string
}

// lineReader reads res's SSE data lines (with their event names) and hands
// each to fn until fn says the run ended.
func lineReader(t *testing.T, res *http.Response, fn func(event, data string, r *textReader) bool) *textReader {
	r := &textReader{pieces: make(chan string, 1024)}
	t.Cleanup(func() { res.Body.Close() })
	go func() {
		defer close(r.pieces)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var event string
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				if fn(event, d, r) {
					return
				}
				event = ""
			}
		}
	}()
	return r
}

// viewOnB opens one view of the chat's run on replica b.
type viewOnB struct {
	name string
	// open opens the view: on chat id, whose run A already took, or (id
	// "") starting a run itself.
	open         func(t *testing.T, b *server, tok, id string) *textReader
	startsItself bool
}

func getStream(t *testing.T, b *server, tok, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", b.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, res.StatusCode)
	}
	return res
}

var followViews = []viewOnB{
	{name: "chat stream", open: func(t *testing.T, b *server, tok, id string) *textReader {
		return lineReader(t, getStream(t, b, tok, "/api/v1/chats/"+id+"/stream"), func(event, data string, r *textReader) bool {
			switch event {
			case events.KindPart:
				var p struct {
					Part events.Delta `json:"part"`
				}
				if json.Unmarshal([]byte(data), &p) == nil && p.Part.Type == events.DeltaText {
					r.pieces <- p.Part.Text
				}
			case events.KindStatus:
				return strings.Contains(data, `"status":"waiting"`)
			}
			return false
		})
	}},
	{name: "multiplexed stream", open: func(t *testing.T, b *server, tok, id string) *textReader {
		return lineReader(t, getStream(t, b, tok, "/api/v1/chats/streams?chat="+id), func(event, data string, r *textReader) bool {
			switch event {
			case events.KindPart:
				var p struct {
					ChatID string       `json:"chat_id"`
					Part   events.Delta `json:"part"`
				}
				if json.Unmarshal([]byte(data), &p) == nil && p.Part.Type == events.DeltaText && p.ChatID == id {
					r.pieces <- p.Part.Text
				}
			case events.KindStatus:
				return strings.Contains(data, `"status":"waiting"`)
			}
			return false
		})
	}},
	{name: "AI SDK stream", open: func(t *testing.T, b *server, tok, id string) *textReader {
		return lineReader(t, getStream(t, b, tok, "/api/v1/ai-sdk/chat/"+id+"/stream"), func(_, data string, r *textReader) bool {
			if data == "[DONE]" {
				return true
			}
			var c struct{ Type, Delta string }
			if json.Unmarshal([]byte(data), &c) == nil && c.Type == "text-delta" {
				r.pieces <- c.Delta
			}
			return false
		})
	}},
	{name: "OpenAI-compatible stream", startsItself: true, open: func(t *testing.T, b *server, tok, _ string) *textReader {
		body := `{"model":"fake","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		req, err := http.NewRequest("POST", b.url+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST /v1/chat/completions: %d", res.StatusCode)
		}
		return lineReader(t, res, func(_, data string, r *textReader) bool {
			if data == "[DONE]" {
				return true
			}
			var c struct {
				Choices []struct {
					Delta struct{ Content string } `json:"delta"`
				} `json:"choices"`
			}
			if json.Unmarshal([]byte(data), &c) == nil && len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
				r.pieces <- c.Choices[0].Delta.Content
			}
			return false
		})
	}},
}

// TestEveryViewOnAnotherReplicaGetsEveryDelta: a stream on replica B that
// reads the chat between A's commit of running and A's subscription to the
// chat's control topic sends its snapshot request to nobody. A announces
// the run once it listens, with the version B already read; B must ask
// again then, and get every delta of the run while it runs: the chat
// stream, the multiplexed stream, the AI SDK stream and the
// OpenAI-compatible stream alike (views of one follower).
func TestEveryViewOnAnotherReplicaGetsEveryDelta(t *testing.T) {
	pgtest.Require(t)
	for _, v := range followViews {
		t.Run(v.name, func(t *testing.T) {
			dsn := pgtest.Migrated(t) // a database each: no row's chats are another's worker's
			channel := "parley_test_" + strings.ToLower(rand.Text()[:10])
			fake := llmtest.NewOpenAIChat(t)
			log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
			stA, psA := pgtest.Replica(t, dsn, channel, log)
			held := &heldControls{PubSub: psA, t: t, reached: make(chan struct{})}
			a := start(t, stA, held, setup{cfg: liveConfig(fake.URL), keepAlive: time.Hour})
			stB, psB := pgtest.Replica(t, dsn, channel, log)
			b := start(t, heldPending{Store: stB, reached: held.reached}, psB, setup{cfg: liveConfig(fake.URL), keepAlive: time.Hour})
			runEngine(t, a)
			tok := a.token("alice")

			model := make(chan struct{})
			const answer = "Every delta crosses to the other replica."
			fake.Push(llmtest.Turn{Text: answer, ChunkSize: 3, Gate: model, GateAfter: 3})
			var onB *textReader
			if v.startsItself {
				onB = v.open(t, b, tok, "")
			} else {
				c := a.createChat(tok, map[string]any{"title": "t"})
				a.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, map[string]any{"content": "hi"}).expect(t, http.StatusAccepted, nil)
				<-held.reached // A committed running and is about to listen
				onB = v.open(t, b, tok, c.ID)
			}
			var got strings.Builder
			select {
			case p, ok := <-onB.pieces:
				if !ok {
					t.Fatal("B's stream ended without a delta")
				}
				got.WriteString(p)
			case <-time.After(streamTimeout):
				t.Fatal("B got no delta of the run while it ran")
			}
			close(model)
			for p := range onB.pieces {
				got.WriteString(p)
			}
			if got.String() != answer {
				t.Fatalf("B streamed %q, want %q", got.String(), answer)
			}
		})
	}
}
