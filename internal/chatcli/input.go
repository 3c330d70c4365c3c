package chatcli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
)

// ask prompts on the info stream and reads a non-empty line; "/exit" is
// errExit.
func (s *chatSession) ask(ctx context.Context, prompt string) (string, error) {
	for {
		fmt.Fprint(s.info, prompt)
		line, err := s.readLine(ctx)
		if err != nil {
			fmt.Fprintln(s.info)
			return "", err
		}
		line = strings.TrimSpace(line)
		switch line {
		case "":
			continue
		case "/exit":
			return "", errExit
		}
		return line, nil
	}
}

// readLine reads a line of input. While calls are asked about (s.watch), it
// watches the stream meanwhile: an event that shows the chat moved on ends
// the read with a *movedOnError; every event read waits in the backlog for
// the turn.
func (s *chatSession) readLine(ctx context.Context) (string, error) {
	if s.watch == nil {
		return s.in.read(ctx)
	}
	if s.watch.reason != "" {
		return "", &movedOnError{reason: s.watch.reason}
	}
	for {
		events := s.events
		if s.ended {
			events = nil
		}
		select {
		case ev, ok := <-events:
			if !ok {
				s.ended = true
				continue
			}
			s.backlog = append(s.backlog, ev)
			if s.watch.reason = s.watch.judge(ev); s.watch.reason != "" {
				return "", &movedOnError{reason: s.watch.reason}
			}
		case r := <-s.in.next():
			return r.line, r.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// lineReader reads lines from an input in the background, so that waiting
// for one can be cancelled, or combined with other waits. Reading starts
// with the first read.
type lineReader struct {
	r     io.Reader
	once  sync.Once
	lines chan readResult // the lines, then the end (an error) forever
}

// readResult is a line read, or why there is none (io.EOF at the end).
type readResult struct {
	line string
	err  error
}

func newLineReader(r io.Reader) *lineReader { return &lineReader{r: r, lines: make(chan readResult)} }

// next is the channel the next line (or the end) comes on.
func (l *lineReader) next() <-chan readResult {
	l.once.Do(func() {
		go func() {
			sc := bufio.NewScanner(l.r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				l.lines <- readResult{line: sc.Text()}
			}
			end := sc.Err()
			if end == nil {
				end = io.EOF
			}
			for {
				l.lines <- readResult{err: end}
			}
		}()
	})
	return l.lines
}

func (l *lineReader) read(ctx context.Context) (string, error) {
	select {
	case r := <-l.next():
		return r.line, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
