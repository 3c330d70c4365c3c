package dbutil

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/quota"
)

// Day returns the UTC calendar day that holds t, as YYYY-MM-DD: the key of
// the usage ledger.
func Day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// EncodeOverrides returns an owner's overrides as stored: a JSON object with
// only the fields that are set.
func EncodeOverrides(o quota.Overrides) ([]byte, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("encode quotas: %w", err)
	}
	return b, nil
}

// DecodeOverrides reads stored overrides; nil (no row) is the zero value.
func DecodeOverrides(b []byte) (quota.Overrides, error) {
	var o quota.Overrides
	if len(b) == 0 {
		return o, nil
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return o, fmt.Errorf("decode quotas: %w", err)
	}
	return o, nil
}
