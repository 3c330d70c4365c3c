package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// streamClient is one SSE client of GET /api/v1/chats/{id}/stream, on its
// own loopback connection. For each part event it records the receive time
// minus the send time the streamer embedded in the delta ("t=<ns>;"). It
// reads until the chat, having run, is waiting again: so it stays
// subscribed while the chat is held mid-step.
type streamClient struct {
	url, token string
	base       time.Time
	received   *atomic.Int64 // parts received by all clients

	ready     chan struct{} // closed at the first status event (subscribed), or on a failure before it
	openErr   error         // why the stream failed before ready; set before ready closes
	latencies []time.Duration
	resynced  bool
	err       error // why the stream failed; read after run returns
}

func newStreamClient(url, token string, base time.Time, want int, received *atomic.Int64) *streamClient {
	return &streamClient{url: url, token: token, base: base, received: received,
		ready: make(chan struct{}), latencies: make([]time.Duration, 0, want)}
}

var (
	dataMark    = []byte("data: ")
	eventMark   = []byte("event: ")
	textMark    = []byte(`"text":"t=`)
	runningMark = []byte(`"status":"running"`)
	waitingMark = []byte(`"status":"waiting"`)
)

// run reads the stream until the chat ran and is waiting again, the server
// sent resync, the stream ended, or ctx ended. A failure before the first
// status event is in c.openErr when ready closes; any failure is in c.err
// when run returns.
func (c *streamClient) run(ctx context.Context, hc *http.Client) {
	subscribed := false
	signal := func() {
		if !subscribed {
			subscribed = true
			c.openErr = c.err
			close(c.ready)
		}
	}
	defer func() {
		if c.err == nil && !subscribed {
			c.err = fmt.Errorf("stream ended before its first event")
		}
		signal() // a client that failed does not hold the others up
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		c.err = err
		return
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	res, err := hc.Do(req)
	if err != nil {
		c.err = err
		return
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		c.err = fmt.Errorf("stream: HTTP %d: %s", res.StatusCode, b)
		return
	}
	rd := bufio.NewReaderSize(res.Body, 4096)
	var event []byte
	ran := false
	for {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			if ctx.Err() == nil {
				c.err = fmt.Errorf("stream ended after %d parts: %w", len(c.latencies), err)
			}
			return
		}
		got := time.Since(c.base)
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			event = event[:0]
		case bytes.HasPrefix(line, eventMark):
			event = append(event[:0], line[len(eventMark):]...)
			if string(event) == "resync" {
				c.resynced = true
				return
			}
		case !bytes.HasPrefix(line, dataMark):
		case string(event) == "part":
			sent, ok := sendTime(line)
			if !ok {
				c.err = fmt.Errorf("part without a send time: %s", line)
				return
			}
			c.latencies = append(c.latencies, got-sent)
			c.received.Add(1)
		case string(event) == "status":
			signal()
			switch {
			case bytes.Contains(line, runningMark):
				ran = true
			case ran && bytes.Contains(line, waitingMark):
				return
			}
		}
	}
}

// sendTime finds "t=<ns>;" in a part event's data line.
func sendTime(line []byte) (time.Duration, bool) {
	i := bytes.Index(line, textMark)
	if i < 0 {
		return 0, false
	}
	rest := line[i+len(textMark):]
	j := bytes.IndexByte(rest, ';')
	if j < 0 {
		return 0, false
	}
	ns, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	return time.Duration(ns), err == nil
}
