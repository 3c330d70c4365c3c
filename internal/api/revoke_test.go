package api_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// fastTokenCheck makes streams re-read their token every 20ms, so a test
// need not wait the default interval.
func fastTokenCheck(su *setup) { su.tokenCheck = 20 * time.Millisecond }

// endWait is a generous bound on a stream's end after its token is revoked.
const endWait = 30 * time.Second

// untilEnd reads r until the server ends the stream and returns its events;
// it fails if the stream is still open after endWait.
func untilEnd(t *testing.T, r *sseReader) []sseEv {
	t.Helper()
	var evs []sseEv
	deadline := time.After(endWait)
	for {
		select {
		case it, ok := <-r.items:
			if !ok {
				return evs
			}
			if it.Comment == "" {
				evs = append(evs, it)
			}
		case <-deadline:
			t.Fatalf("the stream is still open %s after its token was revoked; events %s", endWait, kinds(evs))
		}
	}
}

// endsUnauthorized fails unless evs end with the unauthorized event.
func endsUnauthorized(t *testing.T, what string, evs []sseEv) {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].Event != "unauthorized" {
		t.Fatalf("%s ended with events %s, want unauthorized last", what, kinds(evs))
	}
	var data struct{ Kind, Message string }
	if err := json.Unmarshal([]byte(evs[len(evs)-1].Data), &data); err != nil || data.Kind != "unauthorized" || !strings.Contains(data.Message, "revoked") {
		t.Fatalf("%s: unauthorized event data %q", what, evs[len(evs)-1].Data)
	}
}

// checkRevocationEndsStreams opens a feed, a chat stream and a multiplexed
// stream on serving with a token, revokes the token through revoking's
// store (as `parley token revoke` does), and checks that all three end
// with an unauthorized event while a stream of another token of the same
// owner goes on.
func checkRevocationEndsStreams(t *testing.T, serving, revoking *server) {
	ctx := context.Background()
	doomed, tok, err := auth.Issue(ctx, revoking.st, "alice", "doomed")
	if err != nil {
		t.Fatal(err)
	}
	other := revoking.token("alice")
	c := serving.createChat(other, nil)

	feed := serving.watch(doomed)
	chatStream, _ := serving.openSSE("/api/v1/chats/"+c.ID+"/stream", doomed, nil, false)
	mux, _ := serving.openSSE("/api/v1/chats/streams?chat="+c.ID, doomed, nil, false)
	kept := serving.watch(other)
	// Both deliver while the token is valid, checked many times over.
	if ev := chatStream.item(); ev.Event != events.KindStatus {
		t.Fatalf("chat stream opened with %q, want status", ev.Event)
	}
	if ev := mux.item(); ev.Event != events.KindStatus {
		t.Fatalf("multiplexed stream opened with %q, want status", ev.Event)
	}
	before := serving.createChat(other, nil)
	feed.expect(events.KindCreated, before.ID)
	kept.expect(events.KindCreated, before.ID)

	if err := revoking.st.InTx(ctx, func(tx store.Tx) error { return tx.RevokeToken(ctx, tok.ID) }); err != nil {
		t.Fatal(err)
	}
	endsUnauthorized(t, "the feed", untilEnd(t, feed.sseReader))
	endsUnauthorized(t, "the chat stream", untilEnd(t, chatStream))
	endsUnauthorized(t, "the multiplexed stream", untilEnd(t, mux))

	after := serving.createChat(other, nil)
	kept.expect(events.KindCreated, after.ID)
	serving.do("GET", "/api/v1/chats/watch", doomed, nil).expectError(t, http.StatusUnauthorized, "unauthorized")
}

// TestRevokedTokenEndsStreams checks that revoking a token ends the feed and
// chat streams already open with it, not only its new requests.
func TestRevokedTokenEndsStreams(t *testing.T) {
	s := newSQLite(t, fastTokenCheck)
	checkRevocationEndsStreams(t, s, s)
}

// TestRevokedTokenEndsStreamsOnEveryReplica revokes a token through one
// replica's store while its streams are open on another: the database is
// all they share.
func TestRevokedTokenEndsStreamsOnEveryReplica(t *testing.T) {
	dsn := pgtest.Migrated(t)
	channel := "parley_test_" + strings.ToLower(rand.Text()[:10])
	a := newPostgres(t, dsn, channel, fastTokenCheck)
	b := newPostgres(t, dsn, channel, fastTokenCheck)
	checkRevocationEndsStreams(t, b, a)
}
