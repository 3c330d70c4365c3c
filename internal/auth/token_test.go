package auth

import "testing"

func TestNewParseMatches(t *testing.T) {
	plain, id, hash := New()
	gotID, secret, err := Parse(plain)
	if err != nil || gotID != id {
		t.Fatalf("Parse(%q) = %q, %v; want id %q", plain, gotID, err, id)
	}
	if !Matches(secret, hash) {
		t.Fatal("the token's own secret must match its hash")
	}
	if Matches(secret+"x", hash) {
		t.Fatal("another secret must not match")
	}
	other, _, _ := New()
	if other == plain {
		t.Fatal("two tokens must differ")
	}
	for _, bad := range []string{"", "prl_", "prl_abc", "prl__x", "xyz_a_b", "prl_a_"} {
		if _, _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q): want an error", bad)
		}
	}
}
