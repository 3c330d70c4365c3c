package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/testutil/mcptest"
)

// TestServeWithMCPServers: serve starts with one MCP server up and two down
// (a command that does not exist, a URL nothing listens on); the tools of
// the one up are listed, the others' states say why they are absent; SIGTERM
// ends the server's child process with it.
func TestServeWithMCPServers(t *testing.T) {
	t.Parallel()
	bin := mcptest.Everything(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	offline := fmt.Sprintf("http://%s/mcp", ln.Addr())
	ln.Close()
	cfg := fmt.Sprintf(`tools:
  mcp:
    - name: everything
      command: [%q, "stdio"]
      deny: ["trigger-*"]
    - name: missing
      command: [%q]
      connect_timeout: 2s
    - name: offline
      url: %s
      connect_timeout: 2s
`, bin, filepath.Join(dir, "no-such-mcp-server"), offline)
	path := filepath.Join(dir, "parley.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, nil, "--config", path, "--data-dir", filepath.Join(dir, "data"))

	code, body := get(t, s.URL+"/api/v1/tools", s.Token)
	var list struct {
		Tools []struct {
			Name, Source string
		}
		Sources []struct {
			Name, State, Error string
			Tools              int
		}
	}
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/v1/tools = %d %s (%v)", code, body, err)
	}
	names := map[string]string{}
	for _, tl := range list.Tools {
		names[tl.Name] = tl.Source
	}
	if names["everything_echo"] != "everything" || names["everything_get-sum"] != "everything" {
		t.Errorf("everything's tools are not listed: %s", body)
	}
	for n := range names {
		if strings.HasPrefix(n, "everything_trigger-") {
			t.Errorf("denied tool %s is listed", n)
		}
	}
	if len(list.Sources) != 3 {
		t.Fatalf("sources: %s", body)
	}
	if src := list.Sources[0]; src.Name != "everything" || src.State != "ready" || src.Tools == 0 {
		t.Errorf("everything: %+v", src)
	}
	for _, src := range list.Sources[1:] {
		if src.State == "ready" || src.Error == "" || src.Tools != 0 {
			t.Errorf("%s is down but shows %+v", src.Name, src)
		}
	}
	if _, metrics := get(t, s.URL+"/metrics", ""); !strings.Contains(metrics, `parley_mcp_session_state{server="everything",state="ready"} 1`) {
		t.Errorf("no session state metric for everything")
	}

	children := childPIDs(t, s.Cmd.Process.Pid)
	if len(children) == 0 {
		t.Fatal("serve has no child process for the stdio MCP server")
	}
	if code := s.Stop(); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM\nstderr:\n%s", code, s.Stderr)
	}
	// One log line per connection, and one per failed first attempt.
	var connected, missing []string
	for _, l := range strings.Split(s.Stderr.String(), "\n") {
		low := strings.ToLower(l)
		if strings.Contains(low, "server connected") {
			connected = append(connected, l)
		}
		if strings.Contains(l, "missing") && strings.Contains(low, "connect") {
			missing = append(missing, l)
		}
	}
	if len(connected) != 1 || !strings.Contains(connected[0], `msg="mcp server connected"`) || !strings.Contains(connected[0], "mcp_server=everything") {
		t.Errorf("log lines of everything's connection:\n%s", strings.Join(connected, "\n"))
	}
	if len(missing) != 1 {
		t.Errorf("log lines of missing's failed start:\n%s", strings.Join(missing, "\n"))
	}
	for _, pid := range children {
		deadline := time.Now().Add(10 * time.Second)
		for running(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("the MCP server process %d still runs after serve exited", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// childPIDs lists the processes whose parent is pid, from /proc.
func childPIDs(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _ := procStat(child); ppid == pid {
			out = append(out, child)
		}
	}
	return out
}

// running reports whether pid is a live process (a zombie is not).
func running(pid int) bool {
	_, state := procStat(pid)
	return state != "" && state != "Z" && state != "X"
}

// procStat reads a process's parent and state from /proc/<pid>/stat.
func procStat(pid int) (ppid int, state string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, ""
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0, ""
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0]
}
