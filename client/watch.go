package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
)

// Owner feed event kinds (GET /api/v1/chats/watch).
const (
	FeedCreated        = "created"
	FeedDeleted        = "deleted"
	FeedStatusChange   = "status_change"
	FeedTitleChange    = "title_change"
	FeedActionRequired = "action_required"
	// FeedResync says events may have been missed: the feed reconnected
	// after a dropped connection, or the server found this reader too slow.
	// Re-read what you care about (ListChats): the feed is subscribed again
	// when it arrives, so nothing after the re-read is missed.
	FeedResync = "resync"
)

// FeedEvent is one event of the owner's feed. Chat is the chat after the
// change (as it was, for deleted); ToolCalls are set for action_required.
// A resync event has only its Kind.
type FeedEvent struct {
	Kind      string     `json:"kind"`
	Chat      Chat       `json:"chat"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// FeedStream reads the owner's feed, reconnecting on its own; after every
// reconnection it delivers a FeedResync event. Use it like a bufio.Scanner
// (see ChatStream); Close may be called from any goroutine.
type FeedStream struct {
	conn *sseConn
	ev   FeedEvent
	err  error
	done bool
}

// Watch opens the owner's feed. The first connection is made here (an
// invalid token is an *APIError, 401). Close the stream when done.
func (c *Client) Watch(ctx context.Context) (*FeedStream, error) {
	s := &FeedStream{conn: newSSEConn(ctx, c, v1+"/chats/watch", func() url.Values { return nil })}
	if err := s.conn.connect(); err != nil {
		s.conn.end(err)
		return nil, err
	}
	return s, nil
}

// Next waits for the next event and reports whether there is one; it is
// false once the stream is closed, its context ends, or the server refuses
// to reconnect (see Err).
func (s *FeedStream) Next() bool {
	for !s.done {
		raw, err := s.conn.next()
		if err == nil && raw.Event != FeedResync {
			var ev FeedEvent
			if err := json.Unmarshal([]byte(raw.Data), &ev); err != nil {
				s.fail(fmt.Errorf("feed: decode %s event: %w", raw.Event, err))
				return false
			}
			if ev.Kind == "" {
				ev.Kind = raw.Event
			}
			s.ev = ev
			return true
		}
		// Dropped, or told to resync: subscribe again, then say so.
		if err := s.conn.reconnect(); err != nil {
			s.fail(err)
			return false
		}
		s.ev = FeedEvent{Kind: FeedResync}
		return true
	}
	return false
}

// Event is the event Next found.
func (s *FeedStream) Event() FeedEvent { return s.ev }

// Err is why the stream ended: nil after Close, the context's error when it
// ended, or the server's refusal to reconnect (an *APIError).
func (s *FeedStream) Err() error { return s.err }

func (s *FeedStream) fail(err error) { s.done, s.err = true, s.conn.end(err) }

// Close ends the stream; a Next blocked in another goroutine returns false.
func (s *FeedStream) Close() error {
	s.conn.shutdown()
	return nil
}
