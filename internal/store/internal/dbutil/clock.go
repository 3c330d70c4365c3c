package dbutil

import "time"

// Now is the current time as both stores keep it: UTC, to the microsecond
// (the precision of a PostgreSQL timestamptz).
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Micros returns t as Unix microseconds, the SQLite representation of a time.
func Micros(t time.Time) int64 { return t.UnixMicro() }

// FromMicros returns the UTC time of Unix microseconds.
func FromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// UTCPtr returns a copy of *t in UTC to the microsecond, or nil.
func UTCPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC().Truncate(time.Microsecond)
	return &u
}
