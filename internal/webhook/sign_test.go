package webhook

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestSignSpecVector signs the Standard Webhooks specification's published
// test vector (the same as the reference libraries' tests).
func TestSignSpecVector(t *testing.T) {
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		want   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	got, err := Sign([]string{secret}, id, time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if err != nil || got != want {
		t.Fatalf("Sign = %q, %v; want %q", got, err, want)
	}
	two, err := Sign([]string{secret, NewSecret()}, id, time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if err != nil || !strings.HasPrefix(two, want+" v1,") || len(strings.Fields(two)) != 2 {
		t.Fatalf("Sign with two secrets = %q, %v", two, err)
	}
	if _, err := Sign([]string{"whsec_not base64!"}, id, time.Now(), nil); err == nil {
		t.Fatal("Sign with a malformed secret succeeded")
	}
}

func TestNewSecret(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "whsec_"))
	if !strings.HasPrefix(a, "whsec_") || err != nil || len(key) != 32 || a == b {
		t.Fatalf("NewSecret = %q, %q (%v)", a, b, err)
	}
	if id := NewEndpointID(); !strings.HasPrefix(id, "wh_") || len(id) != 3+32 {
		t.Fatalf("NewEndpointID = %q", id)
	}
}
