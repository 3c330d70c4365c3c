package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// connectTimeout bounds one attempt to open the listening connection.
	connectTimeout = 10 * time.Second
	// fetchTimeout bounds the fetch of one stored payload.
	fetchTimeout = 5 * time.Second
	// Reconnection backoff: the first retry is quick (a killed backend is
	// replaced at once), then it doubles up to a few seconds.
	minBackoff = 50 * time.Millisecond
	maxBackoff = 3 * time.Second
)

// connect opens the listening connection and LISTENs on the channel.
func (p *PubSub) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, p.listen)
	if err != nil {
		return nil, fmt.Errorf("pubsub: connect listener: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{p.opts.channel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("pubsub: listen on %q: %w", p.opts.channel, err)
	}
	return conn, nil
}

// closeConn closes a connection without waiting long for a dead server.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn.Close(ctx)
}

// receiveLoop dispatches notifications until ctx is done. When the
// connection fails it reconnects, then tells every subscriber that it may
// have missed messages, since notifications sent meanwhile are lost.
func (p *PubSub) receiveLoop(ctx context.Context, conn *pgx.Conn) {
	defer p.wg.Done()
	for {
		err := p.receive(ctx, conn)
		closeConn(conn)
		if ctx.Err() != nil {
			return
		}
		p.log.Warn("pubsub listener connection lost, reconnecting", "err", err)
		if conn = p.reconnect(ctx); conn == nil {
			return
		}
		p.log.Info("pubsub listener reconnected; subscribers told they may have missed messages")
		p.hub.MissedAll()
	}
}

// receive dispatches notifications until the connection fails or ctx is done.
func (p *PubSub) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		p.dispatch(ctx, n)
	}
}

// reconnect retries connect with capped, jittered exponential backoff until
// it succeeds or ctx is done (then it returns nil).
func (p *PubSub) reconnect(ctx context.Context) *pgx.Conn {
	delay := minBackoff
	for attempt := 1; ; attempt++ {
		conn, err := p.connect(ctx)
		if err == nil {
			return conn
		}
		if ctx.Err() != nil {
			return nil
		}
		wait := delay/2 + rand.N(delay/2+1)
		p.log.Warn("pubsub listener reconnect failed", "attempt", attempt, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		delay = min(2*delay, maxBackoff)
	}
}

// dispatch delivers the messages of one notification to the local
// subscribers of their topics. A message that cannot be delivered becomes a
// Missed marker, never nothing.
func (p *PubSub) dispatch(ctx context.Context, n *pgconn.Notification) {
	if strings.HasPrefix(n.Payload, p.ownPrefix) {
		return // our own, delivered locally when published: skip decoding it
	}
	// A note without messages is malformed too: an older replica's
	// one-message frame, say, during a rolling upgrade.
	var nt note
	if err := json.Unmarshal([]byte(n.Payload), &nt); err != nil || nt.Origin == "" || len(nt.Msgs) == 0 {
		p.log.Warn("pubsub: malformed notification; telling every subscriber it may have missed messages",
			"err", err, "notification", truncate(n.Payload, 200))
		p.hub.MissedAll()
		return
	}
	if nt.Origin == p.origin {
		return // delivered locally when published
	}
	for _, it := range nt.Msgs {
		p.dispatchItem(ctx, it)
	}
}

// dispatchItem delivers one message of a notification.
func (p *PubSub) dispatchItem(ctx context.Context, f item) {
	topic := string(f.Topic)
	if !p.hub.HasSubscribers(topic) {
		return // nobody here wants it: skip fetching a stored payload
	}
	payload := f.Payload
	if f.Ref != 0 {
		fctx, cancel := context.WithTimeout(ctx, fetchTimeout)
		var err error
		payload, err = p.fetch(fctx, f.Ref)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return // closing: every subscription is ending anyway
			}
			p.log.Warn("pubsub: large payload lost; telling the topic's subscribers", "topic", topic, "err", err)
			p.hub.Missed(topic)
			return
		}
	}
	p.hub.Publish(topic, payload)
}

// truncate shortens s for a log line.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
