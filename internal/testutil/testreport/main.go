// Command testreport reads `go test -json` on its standard input and prints
// what a plain `go test` prints (each package's ok or FAIL line, the output
// of the tests that failed, build errors), then where the time went: the
// tests skipped and the slowest packages and tests. It ends with a count of tests passed, failed
// and skipped, and exits 1 when any test or package failed.
//
//	go test -json ./... | go run ./internal/testutil/testreport
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

// timing is how long one package or test ran.
type timing struct {
	name    string
	elapsed time.Duration
}

// report accumulates a run's events.
type report struct {
	out      io.Writer
	buffered map[string][]string // package + "\x00" + test → output not yet printed
	packages []timing
	tests    []timing
	skips    []string // the tests skipped, by name
	passed   int
	failed   int
	skipped  int
	failure  bool // a package failed (a build error, a panic outside any test)
}

func newReport(out io.Writer) *report {
	return &report{out: out, buffered: map[string][]string{}}
}

// framing reports whether a package-level output line is test2json's own
// verbose framing, which a plain `go test` does not print.
func framing(line string) bool {
	t := strings.TrimSpace(line)
	return t == "PASS" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- PASS") || strings.HasPrefix(t, "--- SKIP")
}

func (r *report) add(e event) {
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.out, e.Output)
	case "output":
		if e.Test == "" {
			if !framing(e.Output) {
				fmt.Fprint(r.out, e.Output)
			}
			return
		}
		r.buffered[key] = append(r.buffered[key], e.Output)
	case "pass", "fail", "skip":
		d := time.Duration(e.Elapsed * float64(time.Second))
		if e.Test == "" {
			r.packages = append(r.packages, timing{e.Package, d})
			if e.Action == "fail" {
				r.failure = true
				r.flush(e.Package) // tests cut short by a panic or a timeout
			}
			return
		}
		switch e.Action {
		case "pass":
			r.passed++
		case "fail":
			r.failed++
			fmt.Fprint(r.out, strings.Join(r.buffered[key], ""))
		case "skip":
			r.skipped++
			r.skips = append(r.skips, e.Package+"."+e.Test)
		}
		delete(r.buffered, key)
		if !strings.Contains(e.Test, "/") {
			r.tests = append(r.tests, timing{e.Package + "." + e.Test, d})
		}
	}
}

// flush prints whatever a package's unfinished tests wrote.
func (r *report) flush(pkg string) {
	keys := make([]string, 0)
	for k := range r.buffered {
		if strings.HasPrefix(k, pkg+"\x00") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprint(r.out, strings.Join(r.buffered[k], ""))
		delete(r.buffered, k)
	}
}

// summary prints the slowest packages and tests and the closing count.
func (r *report) summary(packages, tests int) {
	slowest := func(title string, ts []timing, n int) {
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].elapsed > ts[j].elapsed })
		if len(ts) > n {
			ts = ts[:n]
		}
		fmt.Fprintf(r.out, "\n%s:\n", title)
		for _, t := range ts {
			fmt.Fprintf(r.out, "  %7.1fs  %s\n", t.elapsed.Seconds(), t.name)
		}
	}
	if len(r.skips) > 0 {
		fmt.Fprintf(r.out, "\nskipped:\n")
		for _, s := range r.skips {
			fmt.Fprintf(r.out, "  %s\n", s)
		}
	}
	slowest("slowest packages", r.packages, packages)
	slowest("slowest tests", r.tests, tests)
	fmt.Fprintf(r.out, "\ngo test: %d passed, %d failed, %d skipped\n", r.passed, r.failed, r.skipped)
}

func (r *report) ok() bool { return !r.failure && r.failed == 0 }

func run(in io.Reader, out io.Writer) (bool, error) {
	r := newReport(out)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			// go test writes some errors (a package that does not
			// build, a bad flag) as plain text.
			fmt.Fprintln(out, sc.Text())
			if !strings.HasPrefix(sc.Text(), "go: downloading") {
				r.failure = true
			}
			continue
		}
		r.add(e)
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("read go test -json: %w", err)
	}
	r.summary(10, 15)
	return r.ok(), nil
}

func main() {
	ok, err := run(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}
