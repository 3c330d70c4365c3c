package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/parleyhq/parley/internal/testutil/parleybin"
)

// TestServeAddressOnceInATerminal: when stdout is a terminal, a person
// reads the address once: on stdout, and not again in the log on stderr
// (the log line is at debug level there).
func TestServeAddressOnceInATerminal(t *testing.T) {
	t.Parallel()
	ptm, pts := openPTY(t)
	dir := t.TempDir()
	cmd := command(dir, nil, "serve", "--listen", "127.0.0.1:0")
	stderr := parleybin.NewOutput()
	cmd.Stdout, cmd.Stderr = pts, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(ptm)
		for sc.Scan() {
			lines <- strings.TrimRight(sc.Text(), "\r")
		}
		close(lines)
	}()
	var got []string
	for l := range lines {
		got = append(got, l)
		if strings.HasPrefix(l, "parley listening on http://127.0.0.1:") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range lines { // the terminal until the process has ended
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve: %v\nterminal:\n%s\nstderr:\n%s", err, strings.Join(got, "\n"), stderr)
	}
	if !strings.HasPrefix(got[len(got)-1], "parley listening on ") {
		t.Fatalf("the terminal showed no address:\n%s", strings.Join(got, "\n"))
	}
	if strings.Contains(stderr.String(), "msg=listening") {
		t.Errorf("with stdout a terminal, the log repeats the address:\n%s", stderr)
	}
}

// openPTY opens a pseudo-terminal: its controlling side and the terminal.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Skipf("unlock the pseudo-terminal: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Skipf("number the pseudo-terminal: %v", e)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptm, pts
}
