// Package dbutil holds what the SQLite and PostgreSQL stores share besides
// their SQL: the page cursor, limit clamping, the clock, the checks of lease
// arguments, and the JSON encoding of chat and message columns.
package dbutil
