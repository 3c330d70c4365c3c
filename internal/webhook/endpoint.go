// Package webhook delivers webhook events to their endpoints, following the
// Standard Webhooks specification (https://www.standardwebhooks.com): the
// events are the stores' outbox (store.Webhooks), a Deliverer on every
// replica claims the due deliveries, signs each request with the
// endpoint's secrets and records what became of it, retrying on a
// schedule.
package webhook

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parleyhq/parley/internal/netguard"
	"github.com/parleyhq/parley/internal/store"
)

// Limits of an endpoint's fields.
const (
	MaxURLBytes         = 2048
	MaxDescriptionBytes = 1024
	MaxEndpoints        = 50 // per owner
)

// NewSecret returns a new signing secret: "whsec_" and the base64 of 32
// random bytes.
func NewSecret() string {
	return "whsec_" + base64.StdEncoding.EncodeToString(random(32))
}

// NewEndpointID returns a new endpoint id, "wh_" and 32 hex digits.
func NewEndpointID() string { return "wh_" + hex.EncodeToString(random(16)) }

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
}

// URLError is an endpoint URL refused. Code is "invalid_url" (not an
// absolute http or https URL) or "url_not_allowed" (its host is an address
// the server may not connect to).
type URLError struct {
	Code, Message string
}

func (e *URLError) Error() string { return e.Message }

// CheckURL checks an endpoint's URL: an absolute http or https URL of at
// most MaxURLBytes, without a fragment, spaces or control characters, whose host passes p (resolved with
// r: every address of a name must pass; a name that does not resolve
// passes, as each connection is checked again when it is made).
func CheckURL(ctx context.Context, p netguard.Policy, r netguard.Resolver, raw string) error {
	invalid := func(why string) error {
		return &URLError{Code: "invalid_url", Message: fmt.Sprintf("url %q: %s", raw, why)}
	}
	if len(raw) > MaxURLBytes {
		return &URLError{Code: "invalid_url", Message: fmt.Sprintf("url is %d bytes long; at most %d", len(raw), MaxURLBytes)}
	}
	u, err := url.Parse(raw)
	switch {
	case strings.ContainsFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return invalid("holds spaces or control characters; percent-encode them (a space is %20)")
	case !utf8.ValidString(raw):
		return invalid("not UTF-8")
	case err != nil:
		return invalid("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return invalid("want an http:// or https:// URL")
	case u.Hostname() == "":
		return invalid("no host")
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		return invalid("a fragment is never sent; leave it out")
	}
	if err := p.CheckHost(ctx, r, u.Hostname()); err != nil {
		var refused *netguard.RefusedError
		if errors.As(err, &refused) {
			return &URLError{Code: "url_not_allowed", Message: fmt.Sprintf(
				"url %q: its host is %s %s address, which webhooks may not reach (webhooks.allow_private is off)",
				raw, article(refused.Reason), refused.Reason)}
		}
		return invalid(err.Error())
	}
	return nil
}

// article is the indefinite article read before a reason.
func article(reason string) string {
	if reason != "" && strings.ContainsRune("aeiouAEIOU", rune(reason[0])) {
		return "an"
	}
	return "a"
}

// DescriptionError is a description refused.
type DescriptionError struct{ Message string }

func (e *DescriptionError) Error() string { return e.Message }

// CheckDescription checks an endpoint's description: UTF-8 of at most
// MaxDescriptionBytes, without a NUL (which no database stores as text).
func CheckDescription(d string) error {
	switch {
	case len(d) > MaxDescriptionBytes:
		return &DescriptionError{Message: fmt.Sprintf("description is %d bytes long; at most %d", len(d), MaxDescriptionBytes)}
	case !utf8.ValidString(d) || strings.ContainsRune(d, 0):
		return &DescriptionError{Message: "description must be UTF-8 text without NUL (\\u0000)"}
	}
	return nil
}

// EventsError is a list of event types refused.
type EventsError struct{ Message string }

func (e *EventsError) Error() string { return e.Message }

// CheckEvents checks an endpoint's event types: at least one, each known
// (store.EventTypes) or "*", none twice. It returns them as given.
func CheckEvents(events []string) error {
	if len(events) == 0 {
		return &EventsError{Message: fmt.Sprintf(`events: want at least one of %v, or ["*"] for every type`, store.EventTypes)}
	}
	for i, ev := range events {
		if !store.KnownEventType(ev) {
			return &EventsError{Message: fmt.Sprintf(`events[%d] %q: unknown event type; want one of %v, or "*"`, i, ev, store.EventTypes)}
		}
		if slices.Contains(events[:i], ev) {
			return &EventsError{Message: fmt.Sprintf("events[%d] %q: listed twice", i, ev)}
		}
	}
	return nil
}

// SecretOverlap is how long the secret a rotation replaced keeps signing,
// so receivers can switch to the new one without missing an event.
const SecretOverlap = 24 * time.Hour
