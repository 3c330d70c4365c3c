package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/parleyhq/parley/client"
)

// feed reads the owner's feed (GET /api/v1/chats/watch) through the Go
// client on one connection and hands each chat's events to whoever waits
// for that chat. Events of a chat nobody waits for yet (one created a
// moment ago, whose POST has not returned) are kept until it does.
type feed struct {
	c       *client.Client
	s       *client.FeedStream
	resyncs atomic.Int64
	done    chan struct{} // closed when the reader stops

	mu    sync.Mutex
	boxes map[string]chan client.FeedEvent
}

// boxSize bounds the unread events of one chat; a cycle makes about eight.
const boxSize = 64

// openFeed subscribes to the owner's feed and starts reading it.
func openFeed(ctx context.Context, c *client.Client) (*feed, error) {
	s, err := c.Watch(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch the feed: %w", err)
	}
	f := &feed{c: c, s: s, done: make(chan struct{}), boxes: map[string]chan client.FeedEvent{}}
	go f.read()
	return f, nil
}

// close ends the feed and waits for its reader.
func (f *feed) close() {
	f.s.Close()
	<-f.done
}

func (f *feed) read() {
	defer close(f.done)
	for f.s.Next() {
		ev := f.s.Event()
		if ev.Kind == client.FeedResync {
			// Events may be lost: every waiter re-reads its chat.
			f.resyncs.Add(1)
			f.mu.Lock()
			for _, b := range f.boxes {
				select {
				case b <- ev:
				default: // the box is full: its waiter wakes up anyway
				}
			}
			f.mu.Unlock()
			continue
		}
		f.box(ev.Chat.ID) <- ev
	}
}

// box returns the mailbox of a chat's events, making it if needed.
func (f *feed) box(id string) chan client.FeedEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.boxes[id]
	if b == nil {
		b = make(chan client.FeedEvent, boxSize)
		f.boxes[id] = b
	}
	return b
}

// forget drops a chat's mailbox once its cycle is over.
func (f *feed) forget(id string) {
	f.mu.Lock()
	delete(f.boxes, id)
	f.mu.Unlock()
}

// await waits for the first event of chat id that match accepts; after a
// resync it re-reads the chat and accepts it when recheck does. A chat that
// ends in error fails the wait.
func (f *feed) await(ctx context.Context, id string, match func(client.FeedEvent) bool, recheck func(client.Chat) bool) (client.FeedEvent, error) {
	b := f.box(id)
	for {
		select {
		case <-ctx.Done():
			return client.FeedEvent{}, fmt.Errorf("chat %s: %w", id, context.Cause(ctx))
		case <-f.done:
			return client.FeedEvent{}, fmt.Errorf("chat %s: the feed ended: %v", id, f.s.Err())
		case ev := <-b:
			if ev.Kind == client.FeedResync {
				c, err := f.c.GetChat(ctx, id)
				if err != nil {
					return client.FeedEvent{}, err
				}
				ev = client.FeedEvent{Kind: client.FeedStatusChange, Chat: c}
				if c.RequiredAction != nil {
					ev.ToolCalls = c.RequiredAction.ToolCalls
				}
				if recheck(c) {
					return ev, nil
				}
			} else if match(ev) {
				return ev, nil
			}
			if ev.Chat.Status == client.StatusError {
				msg := "no last_error"
				if ev.Chat.LastError != nil {
					msg = ev.Chat.LastError.Message
				}
				return client.FeedEvent{}, fmt.Errorf("chat %s ended in error: %s", id, msg)
			}
		}
	}
}
