package engine

import (
	"context"
	"errors"
	"sync"
)

// errNoID: a freshly reserved block had no id above the chat's last message,
// which the store's contract rules out.
var errNoID = errors.New("reserved message ids are not above the chat's last message")

// idBlockSize is how many message ids the engine reserves at a time.
const idBlockSize = 64

// idBlock hands out message ids reserved in blocks, so naming a step's
// message before it exists costs no database round trip. The ids of a block
// increase, and every worker insert of a running chat takes one, so a chat's
// ids keep increasing; an id not above the chat's last message is skipped.
type idBlock struct {
	mu  sync.Mutex
	ids []int64
}

// nextMessageID returns an id greater than after (the chat's last message id).
func (e *Engine) nextMessageID(ctx context.Context, after int64) (int64, error) {
	b := &e.ids
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.ids) > 0 && b.ids[0] <= after {
		b.ids = b.ids[1:]
	}
	if len(b.ids) == 0 {
		var ids []int64
		err := e.untilAvailable(ctx, e.log, func(ctx context.Context) (err error) {
			ids, err = e.st.ReserveMessageIDs(ctx, idBlockSize)
			return err
		})
		if err != nil {
			return 0, err
		}
		b.ids = ids
	}
	for len(b.ids) > 0 && b.ids[0] <= after { // a fresh block is above every id; keep the rule anyway
		b.ids = b.ids[1:]
	}
	if len(b.ids) == 0 {
		return 0, errNoID
	}
	id := b.ids[0]
	b.ids = b.ids[1:]
	return id, nil
}
