package tool

import (
	"context"
	"encoding/json"
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

func TestAnnotationsJSON(t *testing.T) {
	yes := true
	cases := []struct {
		decl Decl
		want string
	}{
		{Decl{Name: "a"}, `{"name":"a","description":"","input_schema":null}`},
		{Decl{Name: "b", Annotations: ReadOnly()}, `{"name":"b","description":"","input_schema":null,"annotations":{"readOnlyHint":true,"destructiveHint":false}}`},
		{Decl{Name: "c", Annotations: &Annotations{IdempotentHint: &yes, OpenWorldHint: &yes}}, `{"name":"c","description":"","input_schema":null,"annotations":{"idempotentHint":true,"openWorldHint":true}}`},
	}
	for _, tc := range cases {
		b, err := json.Marshal(tc.decl)
		if err != nil || string(b) != tc.want {
			t.Errorf("%s: %s, %v; want %s", tc.decl.Name, b, err, tc.want)
		}
	}
}

func TestAnnotationsEqualAndClone(t *testing.T) {
	yes, no := true, false
	ro := ReadOnly()
	cases := []struct {
		a, b *Annotations
		want bool
	}{
		{nil, nil, true},
		{nil, &Annotations{}, false}, // an empty object is still a declared one
		{ro, ReadOnly(), true},
		{ro, &Annotations{ReadOnlyHint: &yes}, false},
		{&Annotations{DestructiveHint: &yes}, &Annotations{DestructiveHint: &no}, false},
		{&Annotations{OpenWorldHint: &no}, &Annotations{OpenWorldHint: &no}, true},
		{&Annotations{IdempotentHint: &no}, &Annotations{}, false},
	}
	for i, tc := range cases {
		if got := tc.a.Equal(tc.b); got != tc.want {
			t.Errorf("case %d: Equal = %v, want %v", i, got, tc.want)
		}
		if got := tc.b.Equal(tc.a); got != tc.want {
			t.Errorf("case %d reversed: Equal = %v, want %v", i, got, tc.want)
		}
	}
	c := ro.Clone()
	if !c.Equal(ro) || c.ReadOnlyHint == ro.ReadOnlyHint {
		t.Errorf("Clone shares pointers or differs: %+v", c)
	}
	if (*Annotations)(nil).Clone() != nil {
		t.Error("Clone of nil is not nil")
	}
}
