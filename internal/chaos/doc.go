// Package chaos holds parley's chaos test (in its _test files): three
// "parley serve" replicas on a PostgreSQL instance of the test's own, killed
// and restarted at random (SIGKILL and SIGTERM) and the database restarted
// once, while many chats call every kind of tool. It checks that every chat
// settles, that every history keeps the invariant, that no message is
// duplicated, and that no server-side tool ran twice.
//
// The short run is part of `go test ./...`; the long one runs with
// PARLEY_CHAOS_LONG=1 or -chaos.chats=N. See docs/operations.md.
package chaos
