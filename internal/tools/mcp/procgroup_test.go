package mcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/tool"
)

// dead reports whether the process pid has ended: no process has the pid,
// or it is a zombie nobody reaped yet (an orphan waits for whoever adopts
// it).
func dead(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) state ...": the state follows the last ")".
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// killOnCleanup kills pid when the test ends, if it still runs, so a
// failed test leaves nothing running.
func killOnCleanup(t *testing.T, pid int) {
	t.Cleanup(func() {
		if !dead(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// Closing a source ends the server's whole process group: a grandchild the
// server started, which would outlive it, ends too.
func TestCloseStopsTheServersChildren(t *testing.T) {
	for _, mode := range []string{"serve", "ignore-stdin"} {
		t.Run(mode, func(t *testing.T) {
			s := openChild(t, mode, Config{})
			waitConnected(t, s)
			grandchild, err := strconv.Atoi(okText(t, invoke(t, s, call("c_spawn", `{}`))[0]))
			if err != nil {
				t.Fatal(err)
			}
			killOnCleanup(t, grandchild)
			if dead(grandchild) {
				t.Fatalf("the grandchild %d is not running", grandchild)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the grandchild to end", func() bool { return dead(grandchild) })
		})
	}
}

// runParent is a parley of its own, in a process the test can SIGKILL: it
// opens a source whose server keeps running after its stdin closes, writes
// the server's pid to stdout and waits to be killed.
func runParent() {
	cfg := Config{Name: "c", Command: []string{os.Args[0], "-test.run=^$"}, Env: map[string]string{childEnv: "ignore-stdin"}}
	s := Open(cfg, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.WaitConnected(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	res, err := s.InvokeBatch(ctx, []tool.Call{call("c_pid", `{}`)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%s\n", res[0].Output)
	for {
		time.Sleep(time.Hour) // until killed
	}
}

// A stdio server ends with a parley that is SIGKILLed, even one that does
// not stop when its stdin closes (Linux only: Pdeathsig).
func TestServerEndsWithAKilledParley(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a server outlives a killed parley outside Linux")
	}
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = []string{childEnv + "=parent"}
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	killOnCleanup(t, parent.Process.Pid)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read the server's pid: %v", err)
	}
	server, err := strconv.Atoi(strings.Trim(strings.TrimSpace(line), `"`))
	if err != nil {
		t.Fatal(err)
	}
	killOnCleanup(t, server)
	if dead(server) {
		t.Fatalf("the server %d is not running", server)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	eventually(t, "the server to end", func() bool { return dead(server) })
}
