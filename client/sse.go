package client

import (
	"bufio"
	"io"
	"strings"
)

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	ID    string // the id: field, "" if none
	Event string // the event: field, "message" if none
	Data  string // the data: lines, joined by "\n"
}

// sseReader reads Server-Sent Events from a stream, skipping comments.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the next event; io.EOF (or the read error) at the end of the
// stream. An event cut off by the end of the stream is dropped, as the SSE
// specification says.
func (s *sseReader) next() (sseEvent, error) {
	var (
		ev      sseEvent
		data    []string
		hasData bool
	)
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return sseEvent{}, err // a partial line or event is incomplete
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if !hasData {
				ev = sseEvent{}
				continue
			}
			ev.Data = strings.Join(data, "\n")
			if ev.Event == "" {
				ev.Event = "message"
			}
			return ev, nil
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment: keep-alive, "connected"
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.Event = value
		case "data":
			data, hasData = append(data, value), true
		case "id":
			ev.ID = value
		}
	}
}
