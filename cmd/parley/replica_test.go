package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/parleybin"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// recoveryLimit is how long the other replica may take to finish a chat
// whose worker was killed.
const recoveryLimit = 20 * time.Second

// TestReplicaKilledMidStep runs two replicas on PostgreSQL, SIGKILLs the
// one whose worker is streaming a chat's answer, and checks that the other
// recovers the chat as soon as the killed worker's database session ends,
// long before its lease (30 s) would expire, and finishes it: one user
// message and one answer, none of the killed worker's output, and the chat
// waiting.
func TestReplicaKilledMidStep(t *testing.T) {
	t.Parallel()
	const (
		leaseTTL = 30 * time.Second
		answer   = "the answer of the replica that took over"
	)
	m := streamingOnOne(t, leaseTTL.String(), "a partial answer the killed worker never finishes", answer)
	if err := m.held.Cmd.Process.Kill(); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	killed := time.Now()
	m.held.Wait()

	msgs, _ := followUntilWaiting(t, m.evs, leaseTTL/2)
	t.Logf("the chat was finished by the other replica %v after the SIGKILL (lease_ttl %v)", time.Since(killed).Round(time.Millisecond), leaseTTL)
	for _, msg := range msgs {
		if msg.ID == m.partialMsgID {
			t.Errorf("the killed worker's message %d became durable: %+v", m.partialMsgID, msg)
		}
	}
	if len(msgs) != 1 || msgs[0].Role != chat.RoleAssistant || msgText(msgs[0]) != answer {
		t.Errorf("messages on the stream after the kill: %+v", msgs)
	}
	checkFinished(t, m.other, m.a.Token, m.id, "tell me", answer)
	if n := len(m.fake.Requests()); n != 2 {
		t.Errorf("the model got %d requests, want 2", n)
	}
	if !strings.Contains(m.other.Stderr.String(), "recovered a chat whose worker's database session ended") {
		t.Errorf("the other replica did not log the recovery by the dead worker's session\nstderr:\n%s", m.other.Stderr)
	}
	if code := m.other.Stop(); code != 0 {
		t.Errorf("the other replica exited %d\nstderr:\n%s", code, m.other.Stderr)
	}
}

// TestReplicaSIGTERMHandsChatBack: a replica stopped with SIGTERM while its
// worker streams an answer hands the chat back (pending), and the other
// replica finishes it at once, long before the lease would have expired.
func TestReplicaSIGTERMHandsChatBack(t *testing.T) {
	t.Parallel()
	const (
		leaseTTL = 30 * time.Second
		answer   = "the answer of the replica that stays"
	)
	m := streamingOnOne(t, leaseTTL.String(), "a partial answer cut short by the shutdown", answer)
	held, other, evs, a, id := m.held, m.other, m.evs, m.a, m.id
	stopped := time.Now()
	if code := held.Stop(); code != 0 {
		t.Fatalf("the holder exited %d after SIGTERM\nstderr:\n%s", code, held.Stderr)
	}
	limit := leaseTTL / 6
	msgs, statuses := followUntilWaiting(t, evs, limit)
	took := time.Since(stopped)
	t.Logf("after SIGTERM of the holder, the other replica finished the chat in %v (lease_ttl %v)", took.Round(time.Millisecond), leaseTTL)
	if len(statuses) < 3 || statuses[0] != string(chat.Pending) || statuses[1] != string(chat.Running) {
		t.Errorf("statuses after SIGTERM %v, want pending (handed back), running, ..., waiting", statuses)
	}
	if len(msgs) != 1 || msgs[0].Role != chat.RoleAssistant || msgText(msgs[0]) != answer {
		t.Errorf("messages on the stream after SIGTERM: %+v", msgs)
	}
	checkFinished(t, other, a.Token, id, "tell me", answer)
	if strings.Contains(other.Stderr.String(), "recovered a chat") {
		t.Errorf("the chat was recovered from an expired lease, not handed back\nstderr:\n%s", other.Stderr)
	}
	if code := other.Stop(); code != 0 {
		t.Errorf("the other replica exited %d\nstderr:\n%s", code, other.Stderr)
	}
}

// midAnswer is a chat whose answer one of two replicas is streaming: the
// fake model holds that answer after a few deltas, and answers the next
// request with answer.
type midAnswer struct {
	fake         *llmtest.OpenAIChat
	a            *replica // the replica that printed the admin token
	held, other  *replica // the one whose worker holds the chat, and the other
	id           string
	evs          <-chan sseEvent // the chat's stream, on the other replica
	partialMsgID int64           // the message the held answer streams into
	dsn          string          // the replicas' database
}

// streamingOnOne starts two replicas with the given lease on a fresh
// schema (its history check runs once they have stopped), creates a chat
// and returns once the holder's first delta reached the other replica's
// stream of it.
func streamingOnOne(t *testing.T, leaseTTL, partial, answer string) *midAnswer {
	t.Helper()
	dsn := pgtest.DSN(t)
	// Its cleanup, which runs after the servers' (registered later), checks
	// every chat's history once no replica writes.
	pgtest.Store(t, dsn)
	m := &midAnswer{fake: llmtest.NewOpenAIChat(t), dsn: dsn}
	m.fake.Push(
		llmtest.Turn{Text: partial, ChunkSize: 4, HoldAfter: 4},
		llmtest.Turn{Text: answer},
	)
	dir := t.TempDir()
	var b *replica
	m.a, b = startReplicas(t, dir, dsn, replicaConfig(t, dir, m.fake.URL, leaseTTL))
	m.id = createChatWith(t, m.a, "tell me")
	m.held, m.other = holder(t, dsn, m.id, m.a, b)
	m.evs = chatEvents(t, m.other.URL+"/api/v1/chats/"+m.id+"/stream", m.a.Token)
	m.partialMsgID = firstPart(t, m.evs)
	return m
}

// replicaConfig writes a configuration file whose only model is the
// OpenAI-compatible fake at fakeURL, with a short heartbeat and poll and
// the given lease, and returns its path.
func replicaConfig(t *testing.T, dir, fakeURL, leaseTTL string) string {
	t.Helper()
	return parleybin.FakeModelConfig(t, dir, fakeURL, fmt.Sprintf(`engine:
  lease_ttl: %s
  heartbeat: 500ms
  poll_interval: 500ms
`, leaseTTL))
}

// replica is a running serve process and the worker id of its engine.
type replica struct {
	*server
	worker string
}

// startReplicas starts two serve processes on the database of dsn with the
// configuration file cfg; the first one prints the admin token.
func startReplicas(t *testing.T, dir, dsn, cfg string) (a, b *replica) {
	t.Helper()
	env := []string{parleybin.FakeKeyEnv + "=test-key"}
	start := func(name string) *replica {
		s := startServe(t, dir, env, "--database", dsn, "--config", cfg, "--data-dir", filepath.Join(dir, name))
		return &replica{server: s, worker: workerID(t, s)}
	}
	a, b = start("a"), start("b")
	if a.Token == "" {
		t.Fatalf("the first replica printed no admin token\nstdout:\n%s", a.Stdout)
	}
	b.Token = a.Token
	return a, b
}

var engineStarted = regexp.MustCompile(`msg="engine started" worker=(\S+)`)

// workerID waits for the worker id a serve process logs when its engine
// starts. It is logged before the address is printed, but on stderr, which
// is read apart from stdout.
func workerID(t *testing.T, s *server) string {
	t.Helper()
	held, ended := s.Stderr.Wait(func(text string) bool { return engineStarted.MatchString(text) }, s.Exited, deadline)
	switch {
	case held:
		return engineStarted.FindStringSubmatch(s.Stderr.String())[1]
	case ended:
		t.Fatalf("serve exited\nstderr:\n%s", s.Stderr)
	default:
		t.Fatalf("serve logged no worker id\nstderr:\n%s", s.Stderr)
	}
	return ""
}

// createChatWith creates a chat with a first message through r and
// returns its id. The chat has a title, so no title is asked of the model:
// its scripted turns are the chat's steps alone.
func createChatWith(t *testing.T, r *replica, message string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"title": "replica test", "message": message})
	code, res := do(t, http.MethodPost, r.URL+"/api/v1/chats", r.Token, string(body))
	var c chat.Chat
	if code != http.StatusCreated || json.Unmarshal([]byte(res), &c) != nil {
		t.Fatalf("create chat: %d %s", code, res)
	}
	return c.ID
}

// holder waits until the chat runs and returns the replica whose worker
// holds its lease, read from the database (the API does not show it), and
// the other one.
func holder(t *testing.T, dsn, chatID string, a, b *replica) (held, other *replica) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for {
		var status, worker string
		err := conn.QueryRow(ctx, `SELECT status, worker_id FROM chats WHERE id = $1`, chatID).Scan(&status, &worker)
		if err != nil {
			t.Fatalf("read the chat's worker: %v", err)
		}
		if status == string(chat.Running) {
			switch worker {
			case a.worker:
				return a, b
			case b.worker:
				return b, a
			}
			t.Fatalf("chat runs on worker %q, neither replica's (%q, %q)", worker, a.worker, b.worker)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the chat is still %s\nA stderr:\n%s\nB stderr:\n%s", status, a.Stderr, b.Stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// sseEvent is one event of a stream.
type sseEvent struct {
	ID, Event, Data string
}

// chatEvents opens an event stream and delivers its events (not its
// comments) until the stream ends, when the channel is closed.
func chatEvents(t *testing.T, url, token string) <-chan sseEvent {
	t.Helper()
	body := openStream(t, url, token)
	out := make(chan sseEvent, 1024)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			switch line := sc.Text(); {
			case line == "":
				if ev.Event != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[len("id: "):]
			case strings.HasPrefix(line, "event: "):
				ev.Event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.Data = line[len("data: "):]
			}
		}
	}()
	return out
}

// nextEvent returns the next event before the timer fires.
func nextEvent(t *testing.T, evs <-chan sseEvent, timeout <-chan time.Time) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-evs:
		if !ok {
			t.Fatal("the chat stream ended")
		}
		return ev
	case <-timeout:
		t.Fatal("no chat stream event before the deadline")
	}
	return sseEvent{}
}

// firstPart waits for the first delta of the step in progress and returns
// the id of the message it belongs to.
func firstPart(t *testing.T, evs <-chan sseEvent) int64 {
	t.Helper()
	timeout := time.After(deadline)
	for {
		ev := nextEvent(t, evs, timeout)
		if ev.Event != events.KindPart {
			continue // the status and the replayed user message
		}
		var p struct {
			MessageID int64 `json:"message_id"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &p); err != nil || p.MessageID == 0 {
			t.Fatalf("part event %s: %v", ev.Data, err)
		}
		return p.MessageID
	}
}

// followUntilWaiting reads the stream until the chat is waiting, failing
// after limit, and returns the durable messages and the statuses it saw.
func followUntilWaiting(t *testing.T, evs <-chan sseEvent, limit time.Duration) (msgs []chat.Message, statuses []string) {
	t.Helper()
	timeout := time.After(limit)
	for {
		ev := nextEvent(t, evs, timeout)
		switch ev.Event {
		case events.KindMessage:
			var d struct{ Message chat.Message }
			if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
				t.Fatalf("message event %s: %v", ev.Data, err)
			}
			msgs = append(msgs, d.Message)
		case events.KindStatus:
			var d struct{ Status string }
			if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
				t.Fatalf("status event %s: %v", ev.Data, err)
			}
			statuses = append(statuses, d.Status)
			if d.Status == string(chat.Waiting) {
				return msgs, statuses
			}
			if d.Status == string(chat.Error) {
				t.Fatalf("the chat failed: %s", ev.Data)
			}
		}
	}
}

// checkFinished checks through the API of r that the chat is waiting with
// exactly the user's message and one answer, distinct and in order.
func checkFinished(t *testing.T, r *replica, token, id, question, answer string) {
	t.Helper()
	code, body := get(t, r.URL+"/api/v1/chats/"+id, token)
	var c chat.Chat
	if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil || c.Status != chat.Waiting || c.LastError != nil {
		t.Errorf("chat: %d %s", code, body)
	}
	code, body = get(t, r.URL+"/api/v1/chats/"+id+"/messages", token)
	var page struct{ Messages []chat.Message }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil {
		t.Fatalf("messages: %d %s", code, body)
	}
	m := page.Messages
	if len(m) != 2 || m[0].Role != chat.RoleUser || msgText(m[0]) != question ||
		m[1].Role != chat.RoleAssistant || msgText(m[1]) != answer || m[1].ID <= m[0].ID {
		t.Errorf("history, want the question and one answer:\n%s", body)
	}
}

// msgText joins the text parts of a message.
func msgText(m chat.Message) string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == chat.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// TestReplicaHungIsRecoveredByItsLease: a replica that hangs (SIGSTOP)
// keeps its database session, so its worker still looks alive; the lease
// it no longer renews is what brings its chat to the other replica. Woken
// again, the hung worker writes nothing: its lease is gone.
func TestReplicaHungIsRecoveredByItsLease(t *testing.T) {
	t.Parallel()
	const answer = "the answer of the replica that did not hang"
	m := streamingOnOne(t, "2s", "a partial answer of the hung worker", answer)
	held, other, evs, a, id := m.held, m.other, m.evs, m.a, m.id
	if err := held.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	msgs, _ := followUntilWaiting(t, evs, recoveryLimit)
	if err := held.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT: %v", err)
	}
	if len(msgs) != 1 || msgs[0].Role != chat.RoleAssistant || msgText(msgs[0]) != answer {
		t.Errorf("messages on the stream after the hang: %+v", msgs)
	}
	if !strings.Contains(other.Stderr.String(), "recovered a chat whose worker stopped renewing its lease") {
		t.Errorf("the hung replica's chat was not recovered by its lease\nstderr:\n%s", other.Stderr)
	}
	if strings.Contains(other.Stderr.String(), "database session ended") {
		t.Errorf("the hung replica, whose session lives, was taken for dead\nstderr:\n%s", other.Stderr)
	}
	if code := held.Stop(); code != 0 {
		t.Errorf("the woken replica exited %d\nstderr:\n%s", code, held.Stderr)
	}
	checkFinished(t, other, a.Token, id, "tell me", answer)
}

// TestReplicaWhoseSessionIsCutStopsItsChat: the database session that
// tells a replica's worker is alive is terminated while the worker streams
// an answer, and the process lives on: the worker stops the chat (another
// replica may take it now), the chat is finished once, by one replica, and
// the worker holds its liveness again on a new session.
func TestReplicaWhoseSessionIsCutStopsItsChat(t *testing.T) {
	t.Parallel()
	const (
		leaseTTL = 30 * time.Second
		answer   = "the answer after the session was cut"
	)
	m := streamingOnOne(t, leaseTTL.String(), "a partial answer of the cut worker", answer)
	held, other, evs, a, id, fake := m.held, m.other, m.evs, m.a, m.id, m.fake

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	conn, err := pgx.Connect(ctx, m.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var cut int
	err = conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
		AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended($1, 0)`, held.worker).Scan(&cut)
	if err != nil || cut != 1 {
		t.Fatalf("terminate the holder's liveness session: %d sessions, %v", cut, err)
	}
	msgs, _ := followUntilWaiting(t, evs, leaseTTL/2)
	if len(msgs) != 1 || msgs[0].Role != chat.RoleAssistant || msgText(msgs[0]) != answer {
		t.Errorf("messages on the stream after the cut: %+v", msgs)
	}
	if !strings.Contains(held.Stderr.String(), "the worker's database session was lost") {
		t.Errorf("the cut replica did not stop its chat\nstderr:\n%s", held.Stderr)
	}
	checkFinished(t, other, a.Token, id, "tell me", answer)
	if n := len(fake.Requests()); n != 2 {
		t.Errorf("the model got %d requests, want 2 (the cut one and the one that finished)", n)
	}
}
