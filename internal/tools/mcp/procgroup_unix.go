//go:build unix && !linux

package mcp

import (
	"os"
	"syscall"
)

// childProcAttr starts a stdio server as the leader of a process group of
// its own, so that closing the source can signal everything it started
// (signalGroup). Outside Linux nothing ends the server when parley is
// killed: it ends when it reads the end of its stdin, as it should.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the process group p leads.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
