package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
)

// refusingBatches is a store whose EndRuns refuses any batch of more than
// one end, as a database refuses a value one end of a batch carries.
type refusingBatches struct{ store.Store }

func (s refusingBatches) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.InTx(ctx, func(tx store.Tx) error { return fn(refusingTx{tx}) })
}

type refusingTx struct{ store.Tx }

func (t refusingTx) EndRuns(ctx context.Context, ends []store.RunEnd) ([]store.RunEnded, error) {
	if len(ends) > 1 {
		return nil, errors.New("injected: the batch is refused")
	}
	return t.Tx.EndRuns(ctx, ends)
}

// TestCommitEndsWritesEachAloneWhenTheBatchFails: a batch of run ends that
// fails as a whole is written end by end, so every run ends, each with its
// own answer, and a lost lease among them is that end's alone.
func TestCommitEndsWritesEachAloneWhenTheBatchFails(t *testing.T) {
	ctx := context.Background()
	st := sqlitetest.Open(t, t.TempDir())
	ps := memory.New()
	t.Cleanup(func() { ps.Close() })
	e := New(Config{WorkerID: "w"}, refusingBatches{st}, ps, nil, nil, nil)
	if err := st.InTx(ctx, func(tx store.Tx) error { _, err := tx.CreateOwner(ctx, "alice"); return err }); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c := chat.Chat{ID: fmt.Sprint("c", i), Owner: "alice", Model: "m", Title: "t", Status: chat.Pending}
		err := st.InTx(ctx, func(tx store.Tx) error {
			if err := tx.InsertChat(ctx, &c); err != nil {
				return err
			}
			m := chat.Message{ChatID: c.ID, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("hi")}}
			return tx.InsertMessage(ctx, &m)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	chats, leases, err := st.AcquireChats(ctx, "w", time.Minute, 3)
	if err != nil || len(chats) != 3 {
		t.Fatalf("acquire: %d chats, %v", len(chats), err)
	}
	// The second run's lease is gone.
	if err := st.InTx(ctx, func(tx store.Tx) error {
		_, err := tx.TransitionChat(ctx, leases[1].ChatID, store.Transition{From: chat.Running, To: chat.Waiting})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ids, err := st.ReserveMessageIDs(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	ends := make([]store.RunEnd, 3)
	for i, l := range leases {
		ends[i] = store.RunEnd{Lease: l, Answer: chat.Message{ID: ids[i], ChatID: l.ChatID, Role: chat.RoleAssistant,
			Parts: []chat.Part{chat.TextPart(fmt.Sprint("answer ", i))}}}
	}
	res, err := e.commitEnds(ends)
	if err != nil || len(res) != 3 {
		t.Fatalf("commitEnds: %d results, %v", len(res), err)
	}
	for i, r := range res {
		if i == 1 {
			if !errors.Is(r.Err, store.ErrLeaseLost) {
				t.Errorf("end 1 (lease gone): %v, want ErrLeaseLost", r.Err)
			}
			continue
		}
		if r.Err != nil || r.Chat.Status != chat.Waiting || r.Answer.Parts[0].Text != fmt.Sprint("answer ", i) {
			t.Errorf("end %d: %+v", i, r)
		}
		msgs, err := st.ListMessages(ctx, leases[i].ChatID, 0, 10)
		if err != nil || len(msgs) != 2 || msgs[1].ID != ids[i] {
			t.Errorf("history of chat %d: %+v, %v", i, msgs, err)
		}
	}
}
