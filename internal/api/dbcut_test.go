package api_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/postgres"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestChatsSurviveCutDatabaseConnections: while chats run (a tool call,
// then an answer), every PostgreSQL connection of the server is cut every
// 150 ms for 3 s, as a flapping network or a restart would. Writes hit by
// a cut are tried again on fresh connections: every chat ends answered,
// none in error, every call has its result; a request hit by a cut answers
// 503 with the error body, never 500.
func TestChatsSurviveCutDatabaseConnections(t *testing.T) {
	dsn := pgtest.Migrated(t)
	channel := "parley_test_" + strings.ToLower(rand.Text()[:10])
	fake := llmtest.NewOpenAIChat(t)
	const chats = 30
	for i := range chats {
		fake.Push(
			llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: fmt.Sprint("call_", i), Name: "lookup", Args: `{}`}}},
			llmtest.Turn{Text: "answered"},
		)
	}
	for range chats { // spare answers, for model calls a lost lease makes again
		fake.Push(llmtest.Turn{Text: "answered"})
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	pg, ps := pgtest.Replica(t, dsn, channel, log)
	// The server and the engine write through a store that counts the
	// transactions a cut ended: cuts that hit no write would prove nothing.
	st := &cutCounter{Store: pg, t: t, dsn: dsn}
	st.forcing.Store(true)
	s := start(t, st, ps, setup{cfg: liveConfig(fake.URL), keepAlive: time.Hour})
	s.live = true
	// Wake-ups sent while the listener reconnects are lost: the poll
	// backs them up, as in production.
	// The fake hands its turns out in the order requests come, so one chat
	// may get several tool calls in a row: the step limit is not what this
	// test is about.
	runEngine(t, s, func(c *engine.Config) {
		c.Concurrency, c.Heartbeat, c.PollInterval, c.MaxSteps = 8, 500*time.Millisecond, 200*time.Millisecond, 4*chats
	})
	tok := s.token("alice")

	stop := make(chan struct{})
	var cuts sync.WaitGroup
	cuts.Add(1)
	go func() {
		defer cuts.Done()
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				pgtest.TerminateBackends(t, dsn)
			}
		}
	}()
	// Chats are created all through the cuts; a creation the cut refused
	// (503) is sent again, as a client would.
	var ids []string
	unavailable := 0
	for i := 0; len(ids) < chats; i++ {
		if i > 50*chats {
			t.Fatalf("only %d of %d chats created", len(ids), chats)
		}
		r := s.do("POST", "/api/v1/chats", tok, map[string]any{"title": "cut", "message": "look it up"})
		switch r.status {
		case http.StatusCreated:
			var c chat.Chat
			r.expect(t, http.StatusCreated, &c)
			ids = append(ids, c.ID)
		case http.StatusServiceUnavailable:
			var e apiErr
			r.expect(t, http.StatusServiceUnavailable, &e)
			if e.Error.Code != "unavailable" {
				t.Fatalf("503 with %s", r.body)
			}
			unavailable++
		default:
			t.Fatalf("create chat during the cuts: status %d, body %s", r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond) // pace the creations over the cuts
	}
	close(stop)
	cuts.Wait()
	st.forcing.Store(false)
	t.Logf("%d creations answered 503; %d transactions cut", unavailable, st.cut.Load())
	if st.cut.Load() == 0 {
		t.Fatal("the cuts hit no transaction: the test proved nothing")
	}

	deadline := time.Now().Add(60 * time.Second)
	for _, id := range ids {
		for {
			c, err := st.GetChat(context.Background(), id)
			if errors.Is(err, store.ErrUnavailable) {
				continue // a connection the last cut ended
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Status == chat.Error {
				t.Fatalf("chat %s ended in error: %+v", id, c.LastError)
			}
			if c.Status == chat.Waiting {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("chat %s is still %s", id, c.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// cutCounter is a PostgreSQL store whose InTx counts the transactions that
// failed because the database was out of reach (a cut connection). While
// forcing, it also cuts every connection in the middle of every fifth
// transaction (its work done, its commit not yet sent), so that cuts hit
// transactions however the ticker's cuts fall on a fast or a loaded
// machine.
type cutCounter struct {
	*postgres.Store
	t       testing.TB
	dsn     string
	forcing atomic.Bool
	begun   atomic.Int64
	cut     atomic.Int64
}

func (c *cutCounter) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	cutHere := c.forcing.Load() && c.begun.Add(1)%5 == 0
	err := c.Store.InTx(ctx, func(tx store.Tx) error {
		err := fn(tx)
		if err == nil && cutHere {
			cutHere = false // fn may run again: cut only its first run
			pgtest.TerminateBackends(c.t, c.dsn)
		}
		return err
	})
	if errors.Is(err, store.ErrUnavailable) {
		c.cut.Add(1)
	}
	return err
}
