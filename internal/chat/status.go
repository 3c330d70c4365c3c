// Package chat holds parley's domain: chats, messages and their parts, the
// status state machine (the table of legal status changes), validation, and
// what the model sees of a history. Of parley it uses only jsonscan, which
// measures how deep a JSON value nests.
package chat

import "slices"

// Status is where a chat stands in its life cycle (docs/architecture.md,
// "The state machine").
type Status string

const (
	// Waiting: idle, ready for a user message.
	Waiting Status = "waiting"
	// Pending: needs a worker.
	Pending Status = "pending"
	// Running: a worker holds the lease.
	Running Status = "running"
	// RequiresAction: no worker holds it; its last step left calls that
	// only someone outside the server can settle: a client's results for
	// calls of its dynamic tools, a person's decisions on calls that need
	// approval, or both. A deadline bounds the wait.
	RequiresAction Status = "requires_action"
	// Error: the last run failed; the chat's LastError says why.
	Error Status = "error"
)

// New is where a chat stands before it exists: the table's first row, the
// statuses a chat may be created in. It is not a status a chat can have.
const New Status = ""

// Statuses lists every status, in a stable order.
var Statuses = []Status{Waiting, Pending, Running, RequiresAction, Error}

// transitions lists every legal status change; nothing else may change a
// chat's status. Running -> Running is a step that continues the loop.
var transitions = map[Status][]Status{
	New:            {Waiting, Pending},
	Waiting:        {Pending},
	Pending:        {Running, Waiting},
	Running:        {Running, Waiting, Pending, RequiresAction, Error},
	RequiresAction: {Pending, Waiting},
	Error:          {Pending},
}

// CanTransition reports whether a chat may go from one status to another.
func CanTransition(from, to Status) bool { return slices.Contains(transitions[from], to) }

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// Busy reports whether a chat in this status has work in progress, so a new
// user message is subject to the busy mode (queue, interrupt, reject).
func (s Status) Busy() bool { return s == Pending || s == Running || s == RequiresAction }

// BusyMode says what a new user message does to a busy chat.
type BusyMode string

const (
	// BusyQueue stores the message; it is promoted when the run ends. The default.
	BusyQueue BusyMode = "queue"
	// BusyInterrupt stops the run in progress and answers the new message.
	BusyInterrupt BusyMode = "interrupt"
	// BusyReject refuses the message with a conflict.
	BusyReject BusyMode = "reject"
)

// Valid reports whether m is a known busy mode.
func (m BusyMode) Valid() bool { return m == BusyQueue || m == BusyInterrupt || m == BusyReject }
