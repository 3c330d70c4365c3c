package mcp

import (
	"os"
	"syscall"
)

// childProcAttr starts a stdio server as the leader of a process group of
// its own, so that closing the source can signal everything it started
// (signalGroup), and has the kernel SIGKILL it when parley dies, so a
// SIGKILLed parley does not leave it running. Pdeathsig fires when the
// thread that started the child exits; the Go runtime keeps its threads
// unless a goroutine locked to one ends, which parley does not do.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to the process group p leads.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
