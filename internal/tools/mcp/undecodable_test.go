package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/tool"
)

// undecodableKinds are results the SDK cannot decode, by the kind the "bad"
// tool takes: a text block whose text is a number, a content block of a type
// MCP does not have, structured content nested 1,100 levels deep.
var undecodableKinds = []struct {
	kind   string
	reason string // in the call's error result
}{
	{"number", "json: a value of the wrong type where a string belongs"},
	{"widget", `unrecognized content type "widget"`},
	{"deep", "json: exceeded maximum nesting depth of 1000"},
}

// tamper turns the bad tool's results, written by the SDK, into the
// undecodable ones: the tool writes a marker the SDK can encode, tamper
// replaces it on the wire.
var tamper = strings.NewReplacer(
	`"@@number@@"`, `42`,
	`"type":"text","text":"@@widget@@"`, `"type":"widget","text":"x"`,
	`"@@deep@@"`, strings.Repeat("[", 1100)+strings.Repeat("]", 1100),
)

type badIn struct {
	Kind string `json:"kind"`
}

// addUndecodable adds to srv the tools of the undecodable tests: "bad"
// answers with the marker of its kind once a "gate" call is in flight;
// with a non-nil noise, "noise" writes noiseLines to it once a "gate" call
// is in flight, and answers "quiet";
// each "gate" call ends when an "open" call lets it, or for good once
// release is called (a test that failed early must not leave a handler
// running, an HTTP test server waits for it).
func addUndecodable(srv *mcp.Server, noise io.Writer) (release func()) {
	gateArrived := make(chan struct{}, 100)
	gateOpen := make(chan struct{})
	released := make(chan struct{})
	mcp.AddTool(srv, &mcp.Tool{Name: "bad"}, func(ctx context.Context, _ *mcp.CallToolRequest, in badIn) (*mcp.CallToolResult, any, error) {
		select {
		case <-gateArrived:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		res := text("@@" + in.Kind + "@@")
		if in.Kind == "deep" {
			res = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deep"}}, StructuredContent: "@@deep@@"}
		}
		return res, nil, nil
	})
	if noise != nil {
		mcp.AddTool(srv, &mcp.Tool{Name: "noise"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			select {
			case <-gateArrived:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			if _, err := io.WriteString(noise, noiseLines); err != nil { // one write: no message splits it
				return nil, nil, err
			}
			return text("quiet"), nil, nil
		})
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "gate"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		gateArrived <- struct{}{}
		select {
		case <-gateOpen:
			return text("opened"), nil, nil
		case <-released:
			return nil, nil, errors.New("released")
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "open"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case gateOpen <- struct{}{}:
			return text("open"), nil, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	})
	return sync.OnceFunc(func() { close(released) })
}

// tamperWriter writes what the SDK writes, tampered. The SDK writes each
// message in one Write, so a marker is never split.
type tamperWriter struct{ w io.Writer }

func (t tamperWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, tamper.Replace(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (tamperWriter) Close() error { return nil }

// tamperResponseWriter tampers an HTTP response body, JSON or event stream.
type tamperResponseWriter struct{ http.ResponseWriter }

func (t tamperResponseWriter) Write(p []byte) (int, error) {
	return tamperWriter{t.ResponseWriter}.Write(p)
}

func (t tamperResponseWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

func (t tamperResponseWriter) Flush() { http.NewResponseController(t.ResponseWriter).Flush() }

// checkUndecodable runs, for each kind, a batch of a good call, a bad one and
// the good call again, while another batch's call is in flight on the same
// session, and checks that only the bad call fails and the session stays.
// prefix is the source's tool prefix; good must answer want.
func checkUndecodable(t *testing.T, s *Source, prefix string, good tool.Call, want string) {
	for _, k := range undecodableKinds {
		t.Run(k.kind, func(t *testing.T) {
			eventually(t, "a session", func() bool { return s.Status().State == tool.StateReady })
			before := s.current0()
			other := make(chan error, 1) // the other batch's outcome
			go func() {
				res, err := s.InvokeBatch(context.Background(), []tool.Call{call(prefix+"gate", `{}`)})
				if err == nil && (res[0].IsError || string(res[0].Output) != `"opened"`) {
					err = fmt.Errorf("its call: %s (error %v)", res[0].Output, res[0].IsError)
				}
				other <- err
			}()
			res := invoke(t, s, good, call(prefix+"bad", `{"kind":"`+k.kind+`"}`), good)
			if got := okText(t, res[0]); got != want {
				t.Errorf("first good call: %q", got)
			}
			if got := okText(t, res[2]); got != want {
				t.Errorf("second good call: %q", got)
			}
			var out string
			_ = json.Unmarshal(res[1].Output, &out)
			if want := fmt.Sprintf("tool %q failed: the server's result could not be decoded: %s", prefix+"bad", k.reason); !res[1].IsError || out != want {
				t.Errorf("bad call: %s (error %v), want %q", res[1].Output, res[1].IsError, want)
			}
			okText(t, invoke(t, s, call(prefix+"open", `{}`))[0])
			if err := receive(t, "the other batch", other); err != nil {
				t.Errorf("the other batch: %v", err)
			}
			if s.current0() != before {
				t.Errorf("the session was replaced")
			}
		})
	}
}

func TestStdioUndecodableResult(t *testing.T) {
	s := openChild(t, "serve", Config{})
	waitConnected(t, s)
	pid := childPID(t, s)
	checkUndecodable(t, s, "c_", call("c_pid", `{}`), strconv.Itoa(pid))
	if after := childPID(t, s); after != pid {
		t.Fatalf("the server was restarted: pid %d, then %d", pid, after)
	}
}

func TestHTTPUndecodableResult(t *testing.T) {
	for _, version := range protocols {
		t.Run(version, func(t *testing.T) {
			_, hs := serveHTTP(t, version)
			s := openHTTP(t, hs.URL, Config{})
			waitConnected(t, s)
			checkUndecodable(t, s, "h_", call("h_echo", `{"msg":"fine"}`), "fine")
		})
	}
}

// The filter passes everything through byte for byte but a response the
// SDK cannot decode, which becomes an empty result for its request.
func TestFilterReplacesOnlyUndecodableResponses(t *testing.T) {
	deep := strings.Repeat("[", 1100) + strings.Repeat("]", 1100)
	same := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}` + "\n",
		`{"jsonrpc":"2.0","id":2,"result":{}}` + "\r\n",
		"{\"jsonrpc\":\"2.0\",\n\"id\":3,\"result\":" + deep + "}\n",                  // one message on two lines: left to the SDK
		`{"jsonrpc":"2.0","method":"notifications/progress","params":` + deep + "}\n", // not a response
		"not json\n",
		"\n",
		`{"jsonrpc":"2.0","id":4,"result":{}}`, // no newline at the end
		`{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":42}]}}` + "\n", // not a tools/call
	}
	for _, in := range same {
		for _, prefix := range []string{"", "data:"} {
			in := prefix + in
			got, err := io.ReadAll(newResponses().filter(strings.NewReader(in), prefix, '\n'))
			if err != nil || string(got) != in {
				t.Errorf("prefix %q: %.100q came out as %.100q, %v", prefix, in, got, err)
			}
		}
	}

	// A JSON body is one message, whatever its lines.
	in := "{\"jsonrpc\":\"2.0\",\n\"id\":3,\"result\":" + deep + "}\n"
	got, err := io.ReadAll(newResponses().filter(strings.NewReader(in), "", 0))
	if err != nil || !strings.HasSuffix(string(got), "\n") {
		t.Fatalf("JSON body: %.100q, %v", got, err)
	}
	checkReplaced(t, got[:len(got)-1], `3`, "json: exceeded maximum nesting depth of 1000")

	// The results of tools/call are decoded as such; other responses' are not.
	r := newResponses()
	r.sent([]byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x"}}` + "\n"))
	r.sent([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}` + "\n"))
	r.sent([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}` + "\n"))
	number := `"result":{"content":[{"type":"text","text":42}]}}`
	in = `data: {"jsonrpc":"2.0","id":5,` + number + "\r\n" +
		`data:{"jsonrpc":"2.0","id":6,` + number + "\n" + // not a tools/call
		`data: {"jsonrpc":"2.0","id":7,` + number + "\n" + // cancelled
		`data: {"jsonrpc":"2.0","id":"s","result":` + deep + "}\n"
	got, err = io.ReadAll(r.filter(strings.NewReader(in), "data:", '\n'))
	lines := strings.SplitAfter(string(got), "\n")
	if err != nil || len(lines) != 5 || lines[4] != "" {
		t.Fatalf("got %q, %v", got, err)
	}
	if !strings.HasPrefix(lines[0], "data: ") || !strings.HasSuffix(lines[0], "\r\n") {
		t.Errorf("line 0: %q", lines[0])
	}
	checkReplaced(t, []byte(strings.TrimSuffix(lines[0][len("data: "):], "\r\n")), `5`, "json: a value of the wrong type where a string belongs")
	if want := `data:{"jsonrpc":"2.0","id":6,` + number + "\n"; lines[1] != want {
		t.Errorf("line 1: %q, want it unchanged", lines[1])
	}
	if want := `data: {"jsonrpc":"2.0","id":7,` + number + "\n"; lines[2] != want {
		t.Errorf("line 2: %q, want it unchanged", lines[2])
	}
	checkReplaced(t, []byte(strings.TrimSuffix(lines[3][len("data: "):], "\n")), `"s"`, "json: exceeded maximum nesting depth of 1000")
	if len(r.toolCalls) != 0 {
		t.Errorf("still awaited: %v", r.toolCalls)
	}
}

// checkReplaced checks that msg is the filter's error response to id.
func checkReplaced(t *testing.T, msg []byte, id, reason string) {
	t.Helper()
	m, err := jsonrpc.DecodeMessage(msg)
	resp, ok := m.(*jsonrpc.Response)
	if err != nil || !ok {
		t.Fatalf("%q: %v", msg, err)
	}
	rawID, _ := json.Marshal(resp.ID.Raw())
	rpc, ok := resp.Error.(*jsonrpc.Error)
	if string(rawID) != id || !ok || !isUndecodable(rpc) || rpc.Message != reason {
		t.Errorf("%s, want the error response to %s: %s", msg, id, reason)
	}
}

// A line longer than the filter checks passes unchecked, all of it.
func TestFilterPassesLongLines(t *testing.T) {
	long := strings.Repeat("x", 100)
	in := "a\n" + long + "\nb\n" + long
	f := &lineFilter{src: bufio.NewReaderSize(strings.NewReader(in), 16), delim: '\n', max: 40,
		check: func([]byte) []byte { return []byte("checked\n") }}
	got, err := io.ReadAll(f)
	if want := "checked\n" + long + "\nchecked\n" + long; err != nil || string(got) != want {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
}
