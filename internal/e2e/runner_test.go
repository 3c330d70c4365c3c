package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/echo"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// pgReplica runs a replica on the PostgreSQL database dsn, with its own pool
// and its own LISTEN connection on channel.
func pgReplica(t *testing.T, dsn, channel, token string) *server {
	t.Helper()
	st, ps := pgtest.Replica(t, dsn, channel, nil)
	return startReplica(t, replica{st: st, ps: ps, token: token,
		models: models{"echo": {Name: "echo", Provider: echo.New(), ModelID: "echo"}}})
}

type cityIn struct {
	City string `json:"city"`
}

type cityOut struct {
	Runner string `json:"runner"`
	City   string `json:"city"`
}

// TestRunnersRaceAcrossPostgresReplicas: two replicas on one database, a
// runner on each, racing for the same calls: every call is answered exactly
// once in the history, whichever runner won.
func TestRunnersRaceAcrossPostgresReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	channel := fmt.Sprintf("parley_e2e_%d", time.Now().UnixNano())
	a := pgReplica(t, dsn, channel, "")
	b := pgReplica(t, dsn, channel, a.token)

	var mu sync.Mutex
	ran := map[string]int{}
	newRunner := func(s *server, name string) *client.Runner {
		r := client.NewRunner(client.New(s.url, s.token))
		client.Handle(r, "get_weather", "weather of a city", func(ctx context.Context, in cityIn) (cityOut, error) {
			mu.Lock()
			ran[in.City]++
			mu.Unlock()
			return cityOut{Runner: name, City: in.City}, nil
		})
		return r
	}
	ra, rb := newRunner(a, "a"), newRunner(b, "b")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range []*client.Runner{ra, rb} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	defer func() { cancel(); wg.Wait() }()

	ca := client.New(a.url, a.token)
	const chats = 6
	ids := make([]string, chats)
	for i := range chats {
		c, err := ca.CreateChat(ctx, client.CreateChatRequest{Title: "race", DynamicTools: ra.Tools(),
			Message: fmt.Sprintf("/call get_weather {\"city\":\"c%d\"}\n/call get_weather {\"city\":\"d%d\"}", i, i)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = c.ID
	}
	for i, id := range ids {
		b.waitStatus(id, chat.Waiting)
		results := map[string]int{}
		for _, m := range b.messages(id) {
			for _, p := range m.Parts {
				if p.Type == chat.PartToolResult {
					results[p.ToolCallID]++
					if p.IsError || !strings.Contains(string(p.Output), fmt.Sprintf("%d", i)) {
						t.Errorf("chat %d: result %+v", i, p)
					}
				}
			}
		}
		if len(results) != 2 {
			t.Fatalf("chat %d: results for %d calls, want 2: %v", i, len(results), results)
		}
		for id, n := range results {
			if n != 1 {
				t.Errorf("chat %d: call %s answered %d times", i, id, n)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 2*chats {
		t.Errorf("handlers ran for %d calls, want %d", len(ran), 2*chats)
	}
}
