package mcptest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartEverythingHTTP runs the reference server bin over streamable HTTP on
// a free loopback port until the test ends, and returns its MCP URL once
// the server says it listens. Node can take many seconds to start on a
// loaded machine, so it waits for that line (up to 2 minutes), and fails
// the test with the server's output if it ends first.
func StartEverythingHTTP(t testing.TB, bin string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	listening, ended := make(chan struct{}), make(chan string, 1)
	go func() {
		var said strings.Builder
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			said.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "listening on port") {
				close(listening)
				_, _ = io.Copy(io.Discard, out)
				return
			}
		}
		ended <- said.String()
	}()
	select {
	case <-listening:
	case said := <-ended:
		t.Fatalf("server-everything ended before it listened:\n%s", said)
	case <-time.After(2 * time.Minute):
		t.Fatal("server-everything did not say it listens within 2 minutes")
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}
