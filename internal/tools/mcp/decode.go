package mcp

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A response the SDK cannot decode is the error of its call alone, not a
// lost session. The SDK decodes a response twice: its transport decodes the
// JSON-RPC message, and gives the whole connection up when that fails (a
// message nested deeper than the SDK allows); the call then decodes the
// result, and returns an error of no particular type when that fails (a
// text block whose text is a number, a content type MCP does not have).
//
// So responses checks the server's messages under the SDK's transport, as
// the SDK will decode them, and replaces a response that would fail by a
// JSON-RPC error response to the same request: code codeUndecodable, the
// reason as message, undecodableMark as data. The SDK's connections cannot
// be wrapped instead: the SDK looks for unexported methods on them.

// codeUndecodable is the JSON-RPC error code of a replaced response.
const codeUndecodable = -32090

// undecodableMark is the data of a replaced response, which tells it from
// an error the server sent with the same code: a random JSON string, new in
// every process.
var undecodableMark = json.RawMessage(strconv.Quote(rand.Text()))

// isUndecodable reports whether rpc is a response the filter replaced.
func isUndecodable(rpc *jsonrpc.Error) bool {
	return rpc.Code == codeUndecodable && bytes.Equal(rpc.Data, undecodableMark)
}

// briefly says why a response could not be decoded: the SDK's type errors
// quote the rest of the input and name its internal types, and it wraps its
// JSON errors in "unmarshaling jsonrpc message".
func briefly(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Type != nil {
		return fmt.Sprintf("json: a value of the wrong type where a %s belongs", te.Type)
	}
	if inner := errors.Unwrap(err); inner != nil {
		return inner.Error()
	}
	return err.Error()
}

// maxCheckedLine is the longest line the filter checks, the SDK's own limit
// for one message; a longer one passes unchecked, and the SDK refuses it.
const maxCheckedLine = mcp.DefaultMaxLineLength

// responses checks one connection's responses.
type responses struct {
	mu        sync.Mutex
	toolCalls map[jsonrpc.ID]bool // tools/call requests sent, not yet answered or cancelled
}

func newResponses() *responses {
	return &responses{toolCalls: map[jsonrpc.ID]bool{}}
}

// sent notes a message the client sends, before it goes: the response to a
// tools/call is awaited, and no longer once the call is cancelled (the SDK
// gives a call up by cancelling it).
func (r *responses) sent(data []byte) {
	if !bytes.Contains(data, []byte("tools/call")) && !bytes.Contains(data, []byte("notifications/cancelled")) {
		return // neither a call nor its cancellation: not worth decoding
	}
	msg, err := jsonrpc.DecodeMessage(bytes.TrimSpace(data))
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case req.IsCall() && req.Method == "tools/call":
		r.toolCalls[req.ID] = true
	case req.Method == "notifications/cancelled":
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
				delete(r.toolCalls, id)
			}
		}
	}
}

// filter returns src read line by line, each line that holds a response the
// SDK cannot decode replaced (see responses). After prefix ("data:" in an
// event stream) a line may have one space. Other lines, and lines longer
// than the SDK takes, pass unchanged. With delim 0, which JSON text never
// holds, the whole of src is one line: a JSON response body.
func (r *responses) filter(src io.Reader, prefix string, delim byte) io.Reader {
	return &lineFilter{src: bufio.NewReader(src), delim: delim, max: maxCheckedLine, check: func(line []byte) []byte {
		out, _ := r.checkLine(line, prefix)
		return out
	}}
}

// stdout returns a stdio server's stdout filtered as filter does, and with
// every line that is not a JSON-RPC message dropped and logged: the SDK
// would end the session on it, and with it every call in flight. A stdio
// server writes one message a line; a stray line (a library that prints to
// stdout, a pretty-printed message) is the server's mistake, not the end of
// its calls. The official TypeScript SDK skips such lines too.
func (r *responses) stdout(src io.Reader, log *slog.Logger) io.Reader {
	return &lineFilter{src: bufio.NewReader(src), delim: '\n', max: maxCheckedLine, check: func(line []byte) []byte {
		out, junk := r.checkLine(line, "")
		if junk != nil {
			log.Warn("mcp server: skipped a line on stdout that is not a JSON-RPC message",
				"line", clip(line, 200), "err", junk)
			return nil
		}
		return out
	}}
}

// clip returns line without its line end, cut to at most n bytes.
func clip(line []byte, n int) string {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) > n {
		return string(line[:n]) + "…"
	}
	return string(line)
}

// checkLine returns line, or its replacement when it holds a response the
// SDK cannot decode. junk is why the SDK would refuse the line as no
// message at all (not JSON; JSON but not JSON-RPC), which leaves it as is.
func (r *responses) checkLine(line []byte, prefix string) (out []byte, junk error) {
	msg, ok := bytes.CutPrefix(line, []byte(prefix))
	if !ok {
		return line, nil
	}
	msg = bytes.TrimPrefix(msg, []byte(" "))
	body := bytes.TrimRight(msg, "\r\n")
	if len(bytes.TrimSpace(body)) == 0 {
		return line, nil
	}
	id, err := r.decode(body)
	if err == nil || !id.IsValid() {
		return line, err
	}
	out, encErr := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
		Code: codeUndecodable, Message: briefly(err), Data: undecodableMark,
	}})
	if encErr != nil {
		return line, nil
	}
	head := line[:len(line)-len(msg)] // the prefix and its space
	end := msg[len(body):]
	return slices.Concat(head, out, end), nil
}

// decode decodes msg as the SDK will, and returns the id of a response it
// cannot decode, and why; with no id, the error says why the SDK would
// refuse body as no message at all. A nil error for anything else, and for
// a batch (a JSON array), which the SDK judges itself.
func (r *responses) decode(body []byte) (jsonrpc.ID, error) {
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		if trimmed := bytes.TrimSpace(body); trimmed[0] == '[' && json.Valid(trimmed) {
			return jsonrpc.ID{}, nil
		}
		// Find the id as the standard library can: it nests deeper.
		var m struct {
			ID     any             `json:"id"`
			Method json.RawMessage `json:"method"`
		}
		if jsonErr := json.Unmarshal(body, &m); jsonErr != nil {
			return jsonrpc.ID{}, jsonErr // not JSON, or not an object
		}
		if m.Method != nil {
			return jsonrpc.ID{}, err // a request or notification the SDK cannot decode
		}
		id, idErr := jsonrpc.MakeID(m.ID)
		if idErr != nil || !id.IsValid() {
			return jsonrpc.ID{}, err
		}
		r.answered(id)
		return id, err
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || !r.answered(resp.ID) || resp.Error != nil {
		return jsonrpc.ID{}, nil
	}
	return resp.ID, json.Unmarshal(resp.Result, new(mcp.CallToolResult))
}

// answered forgets an awaited tools/call, and reports whether id was one.
func (r *responses) answered(id jsonrpc.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := r.toolCalls[id]
	delete(r.toolCalls, id)
	return ok
}

// lineFilter reads src one line at a time and hands each line on as check
// returns it.
type lineFilter struct {
	src   *bufio.Reader
	delim byte
	max   int // the longest line checked
	check func(line []byte) []byte

	line []byte // the line being read
	out  []byte // what is left to hand on
	long bool   // in a line too long to check
	err  error  // src's error, returned once out is empty
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.next()
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// next reads the next line, or as much of a long line as fits, into out.
func (f *lineFilter) next() {
	if cap(f.line) > 1<<20 {
		f.line = nil // do not keep a large buffer for good
	}
	f.line = f.line[:0]
	for {
		chunk, err := f.src.ReadSlice(f.delim)
		f.line = append(f.line, chunk...)
		if err == bufio.ErrBufferFull {
			if len(f.line) <= f.max && !f.long {
				continue
			}
			f.out, f.long = f.line, true // pass it on; the rest follows unchecked
			return
		}
		f.err = err
		break
	}
	f.out = f.line
	if !f.long {
		f.out = f.check(f.line)
	}
	f.long = false
}
