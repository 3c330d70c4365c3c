// Package store persists parley's state. Store is the one interface both
// backends (sqlite/, postgres/) implement; storetest/ is the conformance
// suite every implementation must pass.
//
// Reads happen on the Store directly. Every change happens inside InTx, so a
// flow that checks a chat's status and then writes (post a message, submit
// tool results) is one atomic step: the transaction holds the chat's row lock
// from LockChat to commit (PostgreSQL: SELECT ... FOR UPDATE; SQLite: the
// single writer transaction, BEGIN IMMEDIATE).
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
)

var (
	// ErrNotFound: no such row (for chats: also another owner's chat).
	ErrNotFound = errors.New("not found")
	// ErrExists: a row with that key already exists.
	ErrExists = errors.New("already exists")
	// ErrCapReached: a write refused because the owner already has what a
	// cap the caller gave allows (counted in the writing transaction).
	ErrCapReached = errors.New("cap reached")
	// ErrBadCursor: a pagination cursor that this store did not issue.
	ErrBadCursor = errors.New("invalid cursor")
	// ErrLeaseLost: a fenced write by a worker that no longer holds the chat
	// (its lease expired and was recovered, or the chat left running). The
	// worker must write nothing more for that chat.
	ErrLeaseLost = errors.New("lease lost")
	// ErrUnavailable: the database could not be reached or dropped the
	// connection (a restart, a network cut, a terminated backend). It
	// passes: the same request may succeed a moment later. A transaction
	// that fails with it before its commit was sent has written nothing.
	ErrUnavailable = errors.New("database unavailable")
)

// Lease is a worker's hold on a running chat. Every write the worker makes
// for the chat is fenced by it: same worker id and
// same generation, which AcquireChats increments each time.
type Lease struct {
	ChatID     string
	WorkerID   string
	Generation int64
}

// StatusConflictError is a conditional status change that found the chat in
// another status than expected.
type StatusConflictError struct {
	ChatID string
	Status chat.Status // the status the chat is really in
}

func (e *StatusConflictError) Error() string {
	return fmt.Sprintf("chat %s is %s", e.ChatID, e.Status)
}

// IllegalTransitionError is a status change the state machine forbids.
type IllegalTransitionError struct{ From, To chat.Status }

func (e *IllegalTransitionError) Error() string {
	return fmt.Sprintf("illegal status transition %s -> %s", e.From, e.To)
}

// Store is parley's persistence. Implementations are safe for concurrent use.
type Store interface {
	Reader
	Webhooks
	Files
	// InTx runs fn in one transaction, committed if fn returns nil and rolled
	// back otherwise. fn may run more than once if the database asks for a
	// retry (serialization failure), so it must not have other side effects.
	InTx(ctx context.Context, fn func(tx Tx) error) error
	// AcquireChats moves up to a.Max pending chats to running, each under a
	// new lease held by a.WorkerID until now+a.TTL, skipping chats another
	// transaction has locked (PostgreSQL: FOR UPDATE SKIP LOCKED). It is
	// fair across owners: it takes first the chats of the owners with the
	// fewest running (counting the ones it takes), and of one owner the
	// chats that waited longest (oldest updated_at first); it never lets an
	// owner run more than its max_running (a.MaxRunning unless the owner's
	// quotas override it; 0: unlimited), also when replicas acquire at the
	// same time. It increments each lease generation and clears nothing
	// else. It returns the chats and their leases; none when no chat may
	// start.
	AcquireChats(ctx context.Context, a Acquire) ([]chat.Chat, []Lease, error)
	// RenewLease extends l to now+ttl and reports whether an interrupt was
	// requested for the chat. ErrLeaseLost if l no longer holds the chat.
	RenewLease(ctx context.Context, l Lease, ttl time.Duration) (interruptRequested bool, err error)
	// RecoverExpiredLeases moves every running chat whose lease expired back
	// to pending (clearing its worker and expiry; the generation stays, so the
	// old lease's Fence fails), counts the recovery in the chat's
	// LeaseRecoveries when count is true (not for leases that expired
	// because the database itself was out of reach), and returns their ids.
	// Replicas may run it at the same time: each chat is recovered by one
	// of them.
	RecoverExpiredLeases(ctx context.Context, count bool) ([]string, error)
	// ReserveMessageIDs takes n message ids (1 <= n <= 1000) without
	// inserting messages, in increasing order, so a worker can name a
	// message before it exists (a step's streamed parts name the message they
	// will be) and insert it with that ID set. Every id reserved or inserted
	// later is greater than all of them.
	ReserveMessageIDs(ctx context.Context, n int) ([]int64, error)
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	Close() error
}

// Reader holds the queries that need no transaction.
type Reader interface {
	AgentReader
	// GetChat returns a chat by id; ErrNotFound if it does not exist.
	GetChat(ctx context.Context, id string) (chat.Chat, error)
	// ListChats returns one page of a owner's chats, newest first.
	ListChats(ctx context.Context, q ChatQuery) (ChatPage, error)
	// ListMessages returns up to limit messages of a chat with id > after, in
	// id order, leaving out superseded ones.
	ListMessages(ctx context.Context, chatID string, after int64, limit int) ([]chat.Message, error)
	// ListEveryMessage is ListMessages with the superseded messages among
	// the others (Message.Superseded set).
	ListEveryMessage(ctx context.Context, chatID string, after int64, limit int) ([]chat.Message, error)
	// MessageVersions returns the versions of the chat's message id, in id
	// order: the messages with the same parent (Message.ParentID; a message
	// of the history follows the history's message before it, compactions
	// aside), superseded or not, compactions left out; a compaction's only
	// version is itself. At most MaxPageSize, the newest. ErrNotFound if
	// the chat has no message id.
	MessageVersions(ctx context.Context, chatID string, id int64) ([]chat.Message, error)
	// LastTurn returns the chat's last assistant message and the messages
	// after it (superseded ones left out), in id order (the whole history, if it has no assistant
	// message), at most MaxPageSize: what a request needs to find the calls
	// still open, read on an index whatever the history's length.
	LastTurn(ctx context.Context, chatID string) ([]chat.Message, error)
	// SinceCompaction returns, for each chat of chatIDs, up to limit of
	// the messages its model sees verbatim, in id order: those after the
	// ThroughMessageID of its newest compaction (every message, if it has
	// none), that compaction's message among them; superseded ones left
	// out. One query serves a batch of chats a worker just acquired, on an
	// index whatever the histories' length. A chat without messages, or
	// unknown, is absent from the map. At most MaxPageSize chats and limit.
	SinceCompaction(ctx context.Context, chatIDs []string, limit int) (map[string][]chat.Message, error)
	// ListQueued returns the chat's queued messages in arrival order.
	ListQueued(ctx context.Context, chatID string) ([]chat.QueuedMessage, error)
	// AppChat returns the id of the chat BindAppChat bound the owner's app
	// chat id to; ErrNotFound if none.
	AppChat(ctx context.Context, owner, appID string) (string, error)

	// OwnerQuotas returns the quotas an admin set for the owner (the zero
	// value if none); ErrNotFound if the owner does not exist.
	OwnerQuotas(ctx context.Context, owner string) (quota.Overrides, error)
	// OwnerUsage returns the usage recorded for the owner's chats on the
	// UTC days from since's day on (TransitionChat's AddUsage and AddUsage
	// record it, on the database's clock, in the transaction that adds it
	// to the chat).
	OwnerUsage(ctx context.Context, owner string, since time.Time) (chat.Usage, error)
	// CountChats returns how many chats the owner has.
	CountChats(ctx context.Context, owner string) (int, error)
	// OwnerStats returns, for every owner with pending or running chats
	// or usage recorded from since's day on, those counts and that usage:
	// what the metrics show per owner.
	OwnerStats(ctx context.Context, since time.Time) ([]OwnerStat, error)

	// CountOwners returns how many owners exist.
	CountOwners(ctx context.Context) (int, error)
	// GetToken returns an API token by id, revoked or not; ErrNotFound if none.
	GetToken(ctx context.Context, id string) (Token, error)
	// ListTokens returns every token (owner "" ) or one owner's, oldest first.
	ListTokens(ctx context.Context, owner string) ([]Token, error)
	// HasPending reports whether some chat is pending. It waits for no
	// lock, so it also sees chats that AcquireChats passed over because
	// another transaction held their row.
	HasPending(ctx context.Context) (bool, error)
	// ExpiredActions returns up to limit requires_action chats whose
	// deadline is at or before the database's now, earliest deadline first.
	ExpiredActions(ctx context.Context, limit int) ([]Expired, error)
}

// Tx is one transaction. Its methods may only be used inside InTx's fn.
type Tx interface {
	Reader
	AgentWriter

	// AfterCommit has fn run once the transaction has committed (never if it
	// rolls back), before the caller of InTx gets its result. Where the
	// store runs transactions in groups, the functions of a group run in
	// the order of its transactions, before the next group starts: what
	// they announce locally follows commit order. fn must be quick, must
	// not block, and must not use the store (the group waits for it).
	AfterCommit(fn func())
	// LockChat reads a chat and locks its row until the transaction ends.
	LockChat(ctx context.Context, id string) (chat.Chat, error)
	// Now returns the database's clock, in UTC to the microsecond: the clock
	// action deadlines (Transition.ActionTimeout, ExpiredActions) and leases
	// are reckoned on, so a transaction can tell whether a chat's deadline
	// has passed as every replica would. On PostgreSQL it is now(), the
	// time the transaction began.
	Now(ctx context.Context) (time.Time, error)
	// Fence locks the chat's row if l still holds the chat (status running,
	// same worker id and generation); ErrLeaseLost if l no longer holds it,
	// and then the transaction must end. A worker calls it first in every
	// transaction it writes in. A store may send the check together with the
	// transaction's next statement, which then reports ErrLeaseLost (the
	// check runs first, and a failed check stops the statements after it).
	Fence(ctx context.Context, l Lease) error
	// InsertChat stores a new chat. It sets CreatedAt and UpdatedAt; ID,
	// Owner, Model and Status must be set. ErrExists on a duplicate id.
	InsertChat(ctx context.Context, c *chat.Chat) error
	// UpdateChatMeta writes the fields a client may patch (title, labels,
	// archived) and bumps UpdatedAt, which it sets on c.
	UpdateChatMeta(ctx context.Context, c *chat.Chat) error
	// TransitionChat changes a chat's status if it is t.From, and writes the
	// columns that go with the new status (see Transition). It refuses a change
	// chat.CanTransition forbids (IllegalTransitionError) and answers
	// StatusConflictError when the chat is in another status. Leaving running
	// clears the worker id and lease expiry (the generation stays, so a stale
	// worker's fence fails). Any change from running, running -> running (a
	// finished step) included, resets LeaseRecoveries; a change from
	// waiting or error to pending (a run a person asked for) resets
	// OutputRepairs. It returns the chat as it is after the change.
	TransitionChat(ctx context.Context, id string, t Transition) (chat.Chat, error)
	// SetInterruptRequested sets or clears the chat's interrupt flag.
	SetInterruptRequested(ctx context.Context, id string, v bool) error
	// StartTurn records that a user message starts a turn of the chat:
	// the format it asked for (chat.Chat.TurnFormat; nil: the chat's
	// own), with no output repair made yet. ErrNotFound if the chat does
	// not exist.
	StartTurn(ctx context.Context, id string, format *chat.ResponseFormat) error
	// AddOutputRepair counts one more output repair in the chat's turn in
	// progress (chat.Chat.OutputRepairs) and returns the new count;
	// ErrNotFound if the chat does not exist.
	AddOutputRepair(ctx context.Context, id string) (int, error)
	// DeleteChat removes a chat with its messages, queued messages and
	// app chat id, and then the owner's deleted files that no chat uses any
	// more, with the bytes no file names (see Files).
	DeleteChat(ctx context.Context, id string) error
	// BindAppChat binds an owner's app chat id (the id a client app, like
	// an AI SDK useChat, knows its conversation by) to one of the owner's
	// chats: one app id names one chat, whatever requests race to bind it.
	// ErrExists if the app id is bound already (the transaction may go on:
	// nothing was written); ErrNotFound if the chat does not exist.
	BindAppChat(ctx context.Context, owner, appID, chatID string) error

	// InsertMessage appends a message; it sets ID (greater than every earlier
	// message id of the chat) unless m.ID holds an id from ReserveMessageIDs,
	// and CreatedAt. Usage is stored with the message; adding it to the
	// chat's totals is AddUsage's (or Transition.AddUsage's), so a step's
	// final write changes the chat's row once. ErrNotFound if the chat does
	// not exist. With a reserved id a store may
	// send the insert together with the transaction's next statement, which
	// (or the commit) then reports its failure.
	InsertMessage(ctx context.Context, m *chat.Message) error
	// SupersedeAfter marks every message of the chat with an id greater
	// than after superseded, each with the message it followed in the
	// history (Message.ParentID), and returns how many it marked.
	SupersedeAfter(ctx context.Context, chatID string, after int64) (int, error)
	// AddUsage adds u to the chat's usage totals and bumps UpdatedAt;
	// ErrNotFound if the chat does not exist.
	AddUsage(ctx context.Context, chatID string, u chat.Usage) error
	// InsertQueued appends a queued message; it sets ID and CreatedAt.
	InsertQueued(ctx context.Context, q *chat.QueuedMessage) error
	// DeleteQueued removes one queued message (when it is promoted).
	DeleteQueued(ctx context.Context, id int64) error

	// LockOwner locks the owner's row until the transaction ends, so the
	// transactions that count what an owner has against a cap (max_chats,
	// webhook endpoints, max_file_bytes) and then write pass one at a
	// time, each counting what the ones before it wrote. It does not keep
	// others from reading the owner or from adding rows that refer to it.
	// ErrNotFound if there is no such owner.
	LockOwner(ctx context.Context, owner string) error
	// CreateOwner creates an owner; created is false if it existed already.
	CreateOwner(ctx context.Context, name string) (created bool, err error)
	// InsertToken stores a token (its hash, never its secret). ErrExists on a
	// duplicate id; ErrNotFound if the owner does not exist.
	InsertToken(ctx context.Context, t *Token) error
	// SetOwnerQuotas replaces the quotas an admin set for the owner;
	// ErrNotFound if the owner does not exist.
	SetOwnerQuotas(ctx context.Context, owner string, o quota.Overrides) error
	// RevokeToken marks a token revoked; ErrNotFound if there is no such token.
	// Revoking a revoked token is not an error.
	RevokeToken(ctx context.Context, id string) error
}

// OwnerStat is one owner's queue and usage (Reader.OwnerStats).
type OwnerStat struct {
	Owner            string
	Pending, Running int
	Usage            chat.Usage
}

// Acquire asks AcquireChats for work.
type Acquire struct {
	WorkerID string
	TTL      time.Duration // the leases' life
	Max      int           // at most this many chats: 1..MaxAcquire
	// MaxRunning caps each owner's running chats unless the owner's
	// quotas override it; 0: unlimited.
	MaxRunning int
}

// MaxAcquire bounds Acquire.Max: a worker with more free slots acquires
// in several calls.
const MaxAcquire = 1000

// Transition is a status change with the columns that change with it.
type Transition struct {
	From, To chat.Status
	// LastError is stored when To is Error; it is cleared on any other status.
	LastError *chat.ChatError
	// ActionTimeout, when To is RequiresAction, sets the chat's deadline
	// to the database's clock plus this (the clock leases use too, so every
	// replica agrees on when it passes); the deadline is cleared on any
	// other status.
	ActionTimeout time.Duration
	// AddUsage is added to the chat's usage totals with the change: the
	// usage of the messages the same write inserted.
	AddUsage chat.Usage
	// Compact, with To pending, asks the run that takes the chat to
	// compact its history and end (chat.Chat.CompactRequested); every
	// other transition clears the request. Acquiring the chat and
	// recovering its lease keep it.
	Compact bool
}

// Expired is a requires_action chat whose deadline passed: its id and that
// deadline (a chat that still has it is still the one that expired).
type Expired struct {
	ChatID   string
	Deadline time.Time
}

// ChatQuery selects a page of one owner's chats.
type ChatQuery struct {
	Owner    string
	Statuses []chat.Status     // any of these; all statuses when empty
	Labels   map[string]string // every one of these label pairs
	Archived *bool             // nil: archived or not
	Cursor   string            // from an earlier page's NextCursor; "" for the first page
	Limit    int               // 1..MaxPageSize
}

// MaxPageSize bounds ChatQuery.Limit and ListMessages' limit.
const MaxPageSize = 500

// ChatPage is one page of chats; NextCursor is "" on the last page.
type ChatPage struct {
	Chats      []chat.Chat
	NextCursor string
}

// Token is an API token as stored: its secret only as a hash.
type Token struct {
	ID        string     `json:"id"`
	Owner     string     `json:"owner"`
	Name      string     `json:"name,omitempty"`
	Hash      []byte     `json:"-"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// File is an uploaded file's metadata. Its bytes are stored once per owner
// and sha256; Deleted files stay readable through the messages that use them.
type File struct {
	ID        string    `json:"id"`
	Owner     string    `json:"-"`
	Name      string    `json:"name"`
	MediaType string    `json:"media_type"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"` // hex
	CreatedAt time.Time `json:"created_at"`
	Deleted   bool      `json:"-"`
}

// FileChunkSize is the most bytes of a file one row of the store holds: a
// file is written and read a chunk at a time, never whole.
const FileChunkSize = 1 << 20

// Files keeps the owners' uploaded files: their metadata, and their bytes
// once per owner and sha256. A file's bytes stay while a file row names
// them; a deleted file's row stays while a chat uses it (a message or
// queued message of the chat, superseded or not, has a file part naming
// it), and goes, with bytes nothing else names, when the last such chat is
// deleted. Each method is its own transaction; none may be called inside
// InTx's fn.
type Files interface {
	// PutFile stores the new file f: ID, Owner, Name, MediaType, Size and
	// SHA256 (lower-case hex) must be set; it sets CreatedAt. content gives
	// the file's Size bytes, whose sha256 must be SHA256; when the owner
	// has those bytes already, content is not read and only the file's
	// row is written. ErrExists on a duplicate id; ErrNotFound if the owner
	// does not exist; ErrCapReached, writing nothing, when the owner's
	// stored bytes (OwnerFileBytes) would pass maxBytes (0: no cap): bytes
	// the owner has already add nothing. Uploads of one owner pass that
	// check one at a time (under its lock, Tx.LockOwner), each counting
	// what the ones before it stored.
	PutFile(ctx context.Context, f *File, content io.Reader, maxBytes int64) error
	// GetFile returns the owner's file, Deleted set if it was deleted;
	// ErrNotFound for an unknown id or another owner's.
	GetFile(ctx context.Context, owner, id string) (File, error)
	// ListFiles returns one page of the owner's files that are not
	// deleted, newest first.
	ListFiles(ctx context.Context, q FileQuery) (FilePage, error)
	// DeleteFile marks the owner's file deleted: gone from GetFile's
	// callers that look at Deleted and from ListFiles. A chat that uses it
	// keeps it; when none does, its row goes, and its bytes with it unless
	// another file of the owner has the same. ErrNotFound for an unknown
	// id, another owner's, or one deleted already.
	DeleteFile(ctx context.Context, owner, id string) error
	// FileData returns the owner's file, deleted or not, with its whole
	// content (at most the configured files.max_bytes): what a model
	// request is built from. ErrNotFound for an unknown id or another
	// owner's.
	FileData(ctx context.Context, owner, id string) (File, []byte, error)
	// OpenFile is FileData with the content read a chunk at a time as the
	// returned reader is read; the caller closes it.
	OpenFile(ctx context.Context, owner, id string) (File, io.ReadCloser, error)
	// OwnerFileBytes returns the bytes the owner stores: the size of each
	// of its blobs, once however many files (deleted ones that chats use
	// included) name it. What the max_file_bytes quota counts.
	OwnerFileBytes(ctx context.Context, owner string) (int64, error)
	// ChatUsesFile reports whether a message of the chat (superseded ones
	// included) or a message queued in it has had a file part naming
	// fileID.
	ChatUsesFile(ctx context.Context, chatID, fileID string) (bool, error)
}

// FileQuery selects a page of one owner's files.
type FileQuery struct {
	Owner  string
	Cursor string // from an earlier page's NextCursor; "" for the first page
	Limit  int    // 1..MaxPageSize
}

// FilePage is one page of files; NextCursor is "" on the last page.
type FilePage struct {
	Files      []File
	NextCursor string
}

// ForEachMessage calls fn with every message of a chat after the id after,
// in id order, reading the history a page at a time; an error of fn stops it
// and is returned.
func ForEachMessage(ctx context.Context, r Reader, chatID string, after int64, fn func(chat.Message) error) error {
	for {
		page, err := r.ListMessages(ctx, chatID, after, MaxPageSize)
		if err != nil {
			return fmt.Errorf("read history of %s: %w", chatID, err)
		}
		for _, m := range page {
			if err := fn(m); err != nil {
				return err
			}
		}
		if len(page) < MaxPageSize {
			return nil
		}
		after = page[len(page)-1].ID
	}
}
