//go:build !unix

package mcp

import (
	"os"
	"syscall"
)

// childProcAttr is nil without process groups: the server runs as any
// child does.
func childProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup signals p alone: there are no process groups. SIGKILL ends
// it; other signals may not be supported.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		return p.Kill()
	}
	return p.Signal(sig)
}
