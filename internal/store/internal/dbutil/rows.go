package dbutil

import (
	"encoding/json"
	"fmt"
	"time"
)

// Row is one result row of either store's driver: *sql.Row, *sql.Rows,
// pgx.Row and pgx.Rows all satisfy it.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result set of either store's driver, read row by row.
type Rows interface {
	Row
	Next() bool
	Err() error
}

// Collect reads every row of rows with scan, in order; never nil. The
// caller closes rows.
func Collect[T any](rows Rows, scan func(Row) (T, error)) ([]T, error) {
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Time returns the scan destination of a NOT NULL time column read into
// *t: Unix microseconds (SQLite) or a timestamptz (PostgreSQL), in UTC.
func Time(t *time.Time) any { return (*timeCol)(t) }

// NullTime is Time for a nullable column: NULL leaves *t nil.
func NullTime(t **time.Time) any { return nullTimeCol{t} }

type (
	timeCol     time.Time
	nullTimeCol struct{ t **time.Time }
)

// toTime converts a time column's driver value.
func toTime(src any) (time.Time, error) {
	switch v := src.(type) {
	case int64:
		return FromMicros(v), nil
	case time.Time:
		return v.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("scan a time from %T", src)
}

func (t *timeCol) Scan(src any) error {
	v, err := toTime(src)
	*t = timeCol(v)
	return err
}

func (c nullTimeCol) Scan(src any) error {
	if src == nil {
		*c.t = nil
		return nil
	}
	v, err := toTime(src)
	*c.t = &v
	return err
}

// JSONStrings returns the scan destination of a list of strings kept as a
// JSON array (SQLite's form of a PostgreSQL text[]), read into *dst.
func JSONStrings(dst *[]string) any { return (*jsonStrings)(dst) }

type jsonStrings []string

func (s *jsonStrings) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		return fmt.Errorf("scan a JSON list from %T", src)
	}
	return json.Unmarshal(b, (*[]string)(s))
}

// ScanInt64 reads a row of one integer column.
func ScanInt64(row Row) (int64, error) {
	var n int64
	err := row.Scan(&n)
	return n, err
}

// ScanString reads a row of one text column.
func ScanString(row Row) (string, error) {
	var s string
	err := row.Scan(&s)
	return s, err
}
