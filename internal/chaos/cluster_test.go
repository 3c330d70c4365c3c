package chaos

// The cluster: a PostgreSQL instance of the test's own, three "parley serve"
// processes on it, and what their tools talk to (the effect recorder, the
// MCP reference server). Faults are made here: a replica killed (SIGKILL or
// SIGTERM) and started again, the database restarted.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/testutil/notice"
)

// startLimit bounds every start: the build, initdb, a replica, node.
const startLimit = 3 * time.Minute

// postgresBin finds the directory of PostgreSQL's server programs (initdb,
// pg_ctl). Without one the test is skipped with a notice, or fails when
// CI=true.
func postgresBin(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("PARLEY_TEST_PG_BIN"); dir != "" {
		return dir
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) < versionOf(dirs[j]) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	const why = "the chaos test needs PostgreSQL's initdb and pg_ctl (on PATH, in /usr/lib/postgresql/*/bin, or PARLEY_TEST_PG_BIN)"
	if os.Getenv("CI") == "true" {
		t.Fatal(why + ": CI must run it")
	}
	notice.Once("chaos-postgres", why+"; skipped")
	t.Skip(why)
	return ""
}

func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// pgInstance is a PostgreSQL instance the test owns: its own data directory
// and port, so restarting it disturbs no other test.
type pgInstance struct {
	t    *testing.T
	bin  string
	data string
	dsn  string
	attr *syscall.SysProcAttr // runs its programs as the postgres user when the test runs as root
}

// startPostgres initialises and starts an instance listening on 127.0.0.1
// only, with a socket in its own directory. It is stopped and deleted when
// the test ends.
func startPostgres(t *testing.T, bin string) *pgInstance {
	t.Helper()
	dir := keptDir(t, "parley-chaos-pg-")
	pg := &pgInstance{t: t, bin: bin, data: filepath.Join(dir, "data")}
	// initdb refuses to run as root: run the server programs as postgres.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, the chaos test runs PostgreSQL as the user postgres: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		pg.attr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	pg.run("initdb", "-D", pg.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
	port := freePort(t)
	// fsync off: the instance need not survive a crash of the machine, and
	// a restart is clean (-m fast).
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", port, dir)
	pg.run("pg_ctl", "-D", pg.data, "-l", filepath.Join(dir, "postgres.log"), "-o", opts, "-w", "-t", "120", "start")
	t.Cleanup(func() { pg.run("pg_ctl", "-D", pg.data, "-m", "immediate", "-w", "stop") })
	pg.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=10", port)
	return pg
}

// restart stops the instance (fast: every connection is ended) and starts
// it again with the same options, returning when it accepts connections.
func (pg *pgInstance) restart() {
	pg.run("pg_ctl", "-D", pg.data, "-m", "fast", "-w", "-t", "120", "restart")
}

// run runs one of PostgreSQL's programs to completion.
func (pg *pgInstance) run(name string, args ...string) {
	pg.t.Helper()
	cmd := exec.Command(filepath.Join(pg.bin, name), args...)
	cmd.SysProcAttr = pg.attr
	cmd.Dir = os.TempDir()
	// pg_ctl leaves the server's stdout open: a buffer would make Wait
	// wait for the server. The log file has what the server says.
	out, err := os.CreateTemp("", "parley-chaos-"+name+"-")
	if err != nil {
		pg.t.Fatal(err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		said, _ := os.ReadFile(out.Name())
		pg.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, said)
	}
}

// keptDir makes a temporary directory, removed when the test ends unless
// it failed: then the logs in it (the replicas', PostgreSQL's) are kept,
// and the test says where.
func keptDir(t *testing.T, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept %s for its logs", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// recorder is the HTTP endpoint the side-effecting tools call: the Lua tools
// POST to it, the built-in http_fetch GETs from it. It counts the requests
// per key (a key names one tool call of the workload), which is the tool's
// effect: a call must have it at most once.
type recorder struct {
	url string
	mu  sync.Mutex
	n   map[string]int
	by  map[string][]string // key -> "chat/call id" of each request, as the Lua tool reports it
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{n: map[string]int{}, by: map[string][]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		q := req.URL.Query()
		key := q.Get("key")
		if key == "" {
			http.Error(w, "no key", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.n[key]++
		n := r.n[key]
		if c := q.Get("chat"); c != "" {
			r.by[key] = append(r.by[key], c+"/"+q.Get("call"))
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"recorded":%q,"n":%d}`, key, n)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// counts returns a copy of the counts per key and the calls that made them.
func (r *recorder) counts() (map[string]int, map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	by := map[string][]string{}
	for k, v := range r.by {
		by[k] = slices.Clone(v)
	}
	n := map[string]int{}
	for k, v := range r.n {
		n[k] = v
	}
	return n, by
}

// writeConfig writes the replicas' configuration into dir: the echo model,
// short leases, the Lua tools of luaTools (record and guarded_record, the
// latter always waiting for approval), http_fetch allowed to reach the
// recorder, and the MCP reference server at mcpURL.
func writeConfig(t *testing.T, dir, recorderURL, mcpURL string) string {
	t.Helper()
	script := filepath.Join(dir, "effects.lua")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(luaTools, recorderURL)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`default_model: echo
models:
  - name: echo
    provider: echo
engine:
  lease_ttl: 2s
  heartbeat: 500ms
  poll_interval: 500ms
tools:
  lua:
    - name: effects
      path: %s
  lua_runtime:
    call_timeout: 30s
    http_allow_hosts: ["127.0.0.1"]
    reload_interval: 0s
  http_fetch:
    allow_hosts: ["127.0.0.1"]
  mcp:
    - name: everything
      url: %s
  approval:
    - {match: guarded_record, approval: always}
`, script, mcpURL)
	path := filepath.Join(dir, "parley.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// luaTools is the Lua source: two tools whose effect is a POST to the
// recorder (%s), keyed by the key the call carries, reporting the chat and
// call id too.
const luaTools = `
local base = %q

local function record(input, call)
  local url = base .. "/effect?key=" .. input.key .. "&chat=" .. call.chat .. "&call=" .. call.id
  local resp, err = http.request{method = "POST", url = url, timeout = 20}
  if not resp then return nil, err end
  if resp.status ~= 200 then return nil, "the recorder answered " .. resp.status end
  return json.decode(resp.body)
end

local schema = {properties = {key = {type = "string", pattern = "^[a-z0-9-]+$"}}, required = {"key"}}

tool{
  name = "record",
  description = "Records that it ran: once per call.",
  input_schema = schema,
  handler = record,
}

tool{
  name = "guarded_record",
  description = "Records that it ran, once a person approved the call.",
  input_schema = schema,
  handler = record,
}
`

// replica is one "parley serve" process.
type replica struct {
	slot   int
	url    string
	cmd    *exec.Cmd
	log    string        // its stderr, a file
	exited chan struct{} // closed when the process has ended
}

// cluster is the three replica slots on one database, and the faults made
// to them.
type cluster struct {
	t       *testing.T
	bin     string
	dir     string
	cfg     string
	pg      *pgInstance
	token   string // the admin's, printed by the first replica
	logs    []string
	mu      sync.Mutex
	up      []*replica // by slot; nil while a slot is down
	next    int        // round robin over the replicas that are up
	started int        // processes started, for the log file names
}

// startCluster starts n replicas: the first alone (it migrates the database
// and prints the admin token), then the others.
func startCluster(t *testing.T, bin, dir, cfg string, pg *pgInstance, n int) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: bin, dir: dir, cfg: cfg, pg: pg, up: make([]*replica, n)}
	t.Cleanup(c.stopAll)
	first, token, err := c.start(0)
	if err != nil {
		t.Fatal(err)
	}
	if token == "" {
		t.Fatalf("the first replica printed no admin token; its log is %s", first.log)
	}
	c.token = token
	for slot := 1; slot < n; slot++ {
		if _, _, err := c.start(slot); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// start starts a serve process in slot and waits until it listens; it
// returns the admin token if the process printed one.
func (c *cluster) start(slot int) (*replica, string, error) {
	c.mu.Lock()
	c.started++
	logPath := filepath.Join(c.dir, fmt.Sprintf("replica-%d.%02d.log", slot, c.started))
	c.logs = append(c.logs, logPath)
	c.mu.Unlock()
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	defer logFile.Close()
	cmd := exec.Command(c.bin, "serve", "--listen", "127.0.0.1:0", "--database", c.pg.dsn,
		"--config", c.cfg, "--data-dir", filepath.Join(c.dir, fmt.Sprintf("data-%d", slot)))
	cmd.Dir = c.dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PARLEY_") && !strings.HasPrefix(kv, "GORACE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// A -race binary otherwise sleeps 1 s before it exits.
	cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	r := &replica{slot: slot, cmd: cmd, log: logPath, exited: make(chan struct{})}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads any more
			}
		}
		cmd.Wait()
		close(r.exited)
	}()
	var token string
	timeout := time.After(startLimit)
	for r.url == "" {
		select {
		case l := <-lines:
			if v, ok := strings.CutPrefix(l, "admin token: "); ok {
				token = v
			}
			if v, ok := strings.CutPrefix(l, "parley listening on "); ok {
				r.url = v
			}
		case <-r.exited:
			return nil, "", fmt.Errorf("replica %d exited before it listened (%v); its log is %s:\n%s", slot, cmd.ProcessState, logPath, tail(logPath))
		case <-timeout:
			cmd.Process.Kill()
			<-r.exited
			return nil, "", fmt.Errorf("replica %d did not listen within %v; its log is %s:\n%s", slot, startLimit, logPath, tail(logPath))
		}
	}
	c.mu.Lock()
	c.up[slot] = r
	c.mu.Unlock()
	return r, token, nil
}

// restartSlot starts slot again, trying anew while the start fails (the
// database may be restarting) until the start limit.
func (c *cluster) restartSlot(slot int) {
	deadline := time.Now().Add(startLimit)
	for {
		_, _, err := c.start(slot)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Errorf("restart replica %d: %v", slot, err)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// take marks slot down and returns its process.
func (c *cluster) take(slot int) *replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.up[slot]
	c.up[slot] = nil
	return r
}

// kill ends the process in slot with sig and waits for it. After SIGTERM
// the process must exit 0 (a clean shutdown hands its chats back).
func (c *cluster) kill(slot int, sig syscall.Signal) {
	r := c.take(slot)
	if r == nil {
		return
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		c.t.Errorf("signal replica %d: %v", slot, err)
	}
	select {
	case <-r.exited:
	case <-time.After(startLimit):
		r.cmd.Process.Kill()
		<-r.exited
		c.t.Errorf("replica %d did not exit within %v of %v; its log is %s", slot, startLimit, sig, r.log)
	}
	if sig == syscall.SIGTERM && r.cmd.ProcessState.ExitCode() != 0 {
		c.t.Errorf("replica %d exited %v after SIGTERM, want 0; its log is %s:\n%s", slot, r.cmd.ProcessState, r.log, tail(r.log))
	}
}

// stopAll stops every replica with SIGTERM.
func (c *cluster) stopAll() {
	for slot := range c.up {
		c.kill(slot, syscall.SIGTERM)
	}
}

// pick returns the URL of a replica that is up, in turn.
func (c *cluster) pick() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range c.up {
		c.next = (c.next + 1) % len(c.up)
		if r := c.up[c.next]; r != nil {
			return r.url
		}
	}
	return "" // all down for a moment: the caller tries again
}

// checkLogs fails the test for a data race or a panic in any replica's log.
func (c *cluster) checkLogs() {
	c.mu.Lock()
	logs := slices.Clone(c.logs)
	c.mu.Unlock()
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			c.t.Error(err)
			continue
		}
		for _, bad := range []string{"WARNING: DATA RACE", "panic:", "fatal error:"} {
			if i := strings.Index(string(b), bad); i >= 0 {
				c.t.Errorf("replica log %s has %q:\n%s", path, bad, clip(string(b[i:]), 4000))
			}
		}
	}
}

// tail returns the end of a log file, for a failure message.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	s := string(b)
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// waitTools waits until the tools list of every replica that is up shows
// every name in want (the MCP server's among them), so the workload starts
// with every tool offered.
func (c *cluster) waitTools(ctx context.Context, cl *client, want ...string) {
	c.t.Helper()
	c.mu.Lock()
	var urls []string
	for _, r := range c.up {
		if r != nil {
			urls = append(urls, r.url)
		}
	}
	c.mu.Unlock()
	for _, u := range urls {
		for {
			var list struct {
				Tools []struct{ Name string }
			}
			code, err := cl.doAt(ctx, u, http.MethodGet, "/api/v1/tools", nil, &list)
			have := map[string]bool{}
			for _, tl := range list.Tools {
				have[tl.Name] = true
			}
			missing := slices.DeleteFunc(slices.Clone(want), func(n string) bool { return have[n] })
			if err == nil && code == http.StatusOK && len(missing) == 0 {
				break
			}
			select {
			case <-ctx.Done():
				c.t.Fatalf("replica %s does not offer %v (last answer %d, %v)", u, missing, code, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// fault is one fault the cluster suffers.
type fault struct {
	kind string // "SIGKILL", "SIGTERM" or "postgres restart"
	slot int    // the replica, for a signal
}

func (f fault) String() string {
	if f.kind == faultPostgres {
		return f.kind
	}
	return fmt.Sprintf("%s of replica %d", f.kind, f.slot)
}

const faultPostgres = "postgres restart"

// makeFaults draws n faults from rng: one PostgreSQL restart, the rest
// SIGKILL and SIGTERM of random replicas, in random order.
func makeFaults(rng *rand.Rand, n, replicas int) []fault {
	fs := []fault{{kind: faultPostgres}}
	for len(fs) < n {
		k := "SIGKILL"
		if rng.IntN(5) < 2 {
			k = "SIGTERM"
		}
		fs = append(fs, fault{kind: k, slot: rng.IntN(replicas)})
	}
	rng.Shuffle(len(fs), func(a, b int) { fs[a], fs[b] = fs[b], fs[a] })
	return fs
}

// inject makes the fault happen now and returns a channel closed once the
// cluster is whole again (the replica restarted, the database back).
func (c *cluster) inject(f fault) <-chan struct{} {
	done := make(chan struct{})
	switch f.kind {
	case faultPostgres:
		go func() {
			defer close(done)
			c.pg.restart()
		}()
	default:
		sig := syscall.SIGKILL
		if f.kind == "SIGTERM" {
			sig = syscall.SIGTERM
		}
		go func() {
			defer close(done)
			c.kill(f.slot, sig)
			c.restartSlot(f.slot)
		}()
	}
	return done
}
