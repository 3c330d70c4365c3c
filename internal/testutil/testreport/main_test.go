package main

import (
	"strings"
	"testing"
)

// A run with a passing package, a failing test and a package that panicked
// outside its tests: the failing test's output is printed, the passing
// one's is not, and the run fails with the right counts.
func TestReportPrintsFailuresAndCounts(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p/ok","Test":"TestGood"}`,
		`{"Action":"output","Package":"p/ok","Test":"TestGood","Output":"=== RUN   TestGood\n"}`,
		`{"Action":"output","Package":"p/ok","Test":"TestGood","Output":"quiet detail\n"}`,
		`{"Action":"pass","Package":"p/ok","Test":"TestGood","Elapsed":2.5}`,
		`{"Action":"output","Package":"p/ok","Output":"PASS\n"}`,
		`{"Action":"output","Package":"p/ok","Output":"ok  \tp/ok\t2.6s\n"}`,
		`{"Action":"pass","Package":"p/ok","Elapsed":2.6}`,
		`{"Action":"run","Package":"p/bad","Test":"TestBad"}`,
		`{"Action":"output","Package":"p/bad","Test":"TestBad/sub","Output":"    bad_test.go:9: want 1, got 2\n"}`,
		`{"Action":"fail","Package":"p/bad","Test":"TestBad/sub","Elapsed":0.1}`,
		`{"Action":"skip","Package":"p/bad","Test":"TestSkipped","Elapsed":0}`,
		`{"Action":"output","Package":"p/bad","Test":"TestHung","Output":"hung test's last words\n"}`,
		`{"Action":"output","Package":"p/bad","Output":"FAIL\tp/bad\t9.0s\n"}`,
		`{"Action":"fail","Package":"p/bad","Elapsed":9}`,
	}, "\n")
	var out strings.Builder
	ok, err := run(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Error("run reported success for a failed package")
	}
	got := out.String()
	for _, want := range []string{
		"ok  \tp/ok\t2.6s\n", "want 1, got 2", "hung test's last words", "FAIL\tp/bad\t9.0s",
		"9.0s  p/bad\n", "skipped:\n  p/bad.TestSkipped\n", "2.5s  p/ok.TestGood\n", "go test: 1 passed, 1 failed, 1 skipped\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"quiet detail", "=== RUN", "\nPASS\n"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("report prints %q, which a plain go test hides:\n%s", unwanted, got)
		}
	}
	if strings.Index(got, "9.0s  p/bad") > strings.Index(got, "2.6s  p/ok") {
		t.Errorf("slowest packages not slowest first:\n%s", got)
	}
}

// Text that is not JSON (a build failure go test prints as is) fails the run.
func TestReportFailsOnPlainErrors(t *testing.T) {
	var out strings.Builder
	ok, err := run(strings.NewReader("# p/broken\nbroken.go:3:1: syntax error\n"), &out)
	if err != nil {
		t.Fatal(err)
	}
	if ok || !strings.Contains(out.String(), "syntax error") {
		t.Errorf("ok = %v, output:\n%s", ok, out.String())
	}
}
