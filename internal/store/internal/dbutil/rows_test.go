package dbutil

import (
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestTimeScansBothDrivers(t *testing.T) {
	want := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	for _, src := range []any{want.UnixMicro(), want.In(time.FixedZone("x", 3600))} {
		var got time.Time
		if err := Time(&got).(sql.Scanner).Scan(src); err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("Time from %T: %v, %v; want %v in UTC", src, got, err, want)
		}
		p := new(time.Time)
		if err := NullTime(&p).(sql.Scanner).Scan(src); err != nil || p == nil || !p.Equal(want) {
			t.Errorf("NullTime from %T: %v, %v", src, p, err)
		}
	}
	p := &want
	if err := NullTime(&p).(sql.Scanner).Scan(nil); err != nil || p != nil {
		t.Errorf("NullTime from NULL: %v, %v; want nil", p, err)
	}
	var got time.Time
	if err := Time(&got).(sql.Scanner).Scan(nil); err == nil {
		t.Error("Time from NULL: no error")
	}
}

func TestJSONStrings(t *testing.T) {
	var got []string
	for _, src := range []any{[]byte(`["a","b"]`), `["a","b"]`} {
		if err := JSONStrings(&got).(sql.Scanner).Scan(src); err != nil || !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("JSONStrings from %T: %v, %v", src, got, err)
		}
	}
	if err := JSONStrings(&got).(sql.Scanner).Scan(int64(1)); err == nil {
		t.Error("JSONStrings from an integer: no error")
	}
}

// fakeRows is a result of one int64 column.
type fakeRows struct {
	vals []int64
	at   int
	err  error
}

func (r *fakeRows) Next() bool { r.at++; return r.at <= len(r.vals) }
func (r *fakeRows) Err() error { return r.err }
func (r *fakeRows) Scan(dest ...any) error {
	*dest[0].(*int64) = r.vals[r.at-1]
	return nil
}

func TestCollect(t *testing.T) {
	got, err := Collect(&fakeRows{vals: []int64{3, 1, 2}}, ScanInt64)
	if err != nil || !slices.Equal(got, []int64{3, 1, 2}) {
		t.Fatalf("Collect = %v, %v", got, err)
	}
	if got, err := Collect(&fakeRows{}, ScanInt64); err != nil || got == nil || len(got) != 0 {
		t.Errorf("Collect of no rows = %#v, %v; want an empty slice", got, err)
	}
	boom := errors.New("boom")
	if got, err := Collect(&fakeRows{vals: []int64{1}, err: boom}, ScanInt64); !errors.Is(err, boom) || got != nil {
		t.Errorf("Collect of failed rows = %v, %v; want nil, boom", got, err)
	}
}
