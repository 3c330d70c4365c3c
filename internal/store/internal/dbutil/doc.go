// Package dbutil holds the Go the SQLite and PostgreSQL stores share, so
// their files hold only SQL and driver calls: the scanners of every row
// kind and the column lists they read (times and JSON decoded once,
// whatever the driver gives), collecting rows, the pages and cursors built
// from them, what is applied after a statement (outcomes, patches,
// batches, defaults), the checks of arguments, and the clock.
package dbutil
