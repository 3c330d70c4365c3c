package tool

import (
	"context"
	"errors"
	"math"
	"testing"
)

func TestResultHelpers(t *testing.T) {
	cases := []struct {
		name    string
		got     Result
		output  string
		isError bool
	}{
		{"JSON", JSON(map[string]int{"n": 1}), `{"n":1}`, false},
		{"JSON unencodable", JSON(math.Inf(1)), `"encode tool output: json: unsupported value: +Inf"`, true},
		{"Text", Text(`say "hi"`), `"say \"hi\""`, false},
		{"Errorf", Errorf("no city %q", "X"), `"no city \"X\""`, true},
	}
	for _, tc := range cases {
		if string(tc.got.Output) != tc.output || tc.got.IsError != tc.isError {
			t.Errorf("%s: got %s (error %v), want %s (error %v)", tc.name, tc.got.Output, tc.got.IsError, tc.output, tc.isError)
		}
	}
}

func TestFunc(t *testing.T) {
	boom := errors.New("boom")
	tl := Func(Decl{Name: "t"}, func(ctx context.Context, c Call) (Result, error) {
		return Text(c.ID), boom
	})
	if tl.Decl().Name != "t" {
		t.Fatalf("decl %+v", tl.Decl())
	}
	r, err := tl.Invoke(context.Background(), Call{ID: "c1"})
	if string(r.Output) != `"c1"` || err != boom {
		t.Fatalf("Invoke = %s, %v", r.Output, err)
	}
}
