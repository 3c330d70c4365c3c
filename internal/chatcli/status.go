package chatcli

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// statusLine shows, on a terminal, that the chat is at work: a spinner and
// a label on one line, erased before anything else is written there. When
// disabled (not a terminal), it writes nothing.
type statusLine struct {
	w       io.Writer
	enabled bool

	mu   sync.Mutex
	stop chan struct{} // closed to stop the spinner; nil when none runs
	done chan struct{} // closed when it stopped
}

// statusFrames are the spinner's frames, one per statusTick.
var statusFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

const statusTick = 100 * time.Millisecond

func newStatusLine(w io.Writer, enabled bool) *statusLine {
	return &statusLine{w: w, enabled: enabled}
}

// start shows label with a spinner (replacing what it showed), until clear.
func (l *statusLine) start(label string) {
	if !l.enabled {
		return
	}
	l.clear()
	l.mu.Lock()
	defer l.mu.Unlock()
	stop, done := make(chan struct{}), make(chan struct{})
	l.stop, l.done = stop, done
	fmt.Fprintf(l.w, "\r%s %s…", statusFrames[0], label)
	go func() {
		defer close(done)
		tick := time.NewTicker(statusTick)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
				l.mu.Lock()
				fmt.Fprintf(l.w, "\r%s %s…", statusFrames[i%len(statusFrames)], label)
				l.mu.Unlock()
			}
		}
	}()
}

// clear stops the spinner and erases its line, if it shows.
func (l *statusLine) clear() {
	l.mu.Lock()
	stop, done := l.stop, l.done
	l.stop, l.done = nil, nil
	l.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
	fmt.Fprint(l.w, "\r\033[K")
}

// clearing is a writer that erases the status line before it writes.
type clearing struct {
	status *statusLine
	w      io.Writer
}

func (c clearing) Write(p []byte) (int, error) {
	c.status.clear()
	return c.w.Write(p)
}
