package main

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// row is one line of the result table: a measured figure beside its floor
// or target. target, ratio and pass are empty for figures with no target.
type row struct {
	metric, value, target, ratio, pass string
}

// Pass column values.
const (
	pass = "PASS"
	miss = "MISS"
)

func verdict(ok bool) string {
	if ok {
		return pass
	}
	return miss
}

// table collects rows and notes and prints them as one Markdown table.
type table struct {
	rows  []row
	notes []string
}

func (t *table) add(r row) { t.rows = append(t.rows, r) }
func (t *table) note(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

// failed records a measurement that could not be made.
func (t *table) failed(metric string, err error) {
	t.add(row{metric: metric, value: "error", pass: "ERROR"})
	t.note("%s: %v", metric, err)
}

// hasErrors reports whether any measurement failed.
func (t *table) hasErrors() bool {
	for _, r := range t.rows {
		if r.pass == "ERROR" {
			return true
		}
	}
	return false
}

// print writes the table, its columns padded, then the notes.
func (t *table) print(w io.Writer) {
	head := row{"metric", "value", "floor / target", "ratio", "pass"}
	all := append([]row{head}, t.rows...)
	var width [5]int
	for _, r := range all {
		for i, c := range r.cells() {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells [5]string) {
		var b strings.Builder
		for i, c := range cells {
			b.WriteString("| ")
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)+1))
		}
		b.WriteString("|\n")
		io.WriteString(w, b.String())
	}
	line(head.cells())
	var sep [5]string
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range t.rows {
		line(r.cells())
	}
	if len(t.notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range t.notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
}

func (r row) cells() [5]string { return [5]string{r.metric, r.value, r.target, r.ratio, r.pass} }

// perSec formats a rate.
func perSec(v float64) string { return thousands(int64(v+0.5)) + "/s" }

// thousands formats n with thin separators: 12,345.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// bytesIEC formats a byte count.
func bytesIEC(v float64) string {
	switch a := max(v, -v); {
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

// limitRow is a row whose figure got must stay under limit; value is how
// got is shown, target how limit is.
func limitRow(metric, value string, got, limit time.Duration, target string) row {
	ratio := float64(got) / float64(limit)
	return row{metric: metric, value: value, target: target,
		ratio: fmt.Sprintf("%.2f of limit", ratio), pass: verdict(ratio < 1)}
}

// µs formats a duration in microseconds.
func µs(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}
