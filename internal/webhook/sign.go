package webhook

import (
	"fmt"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Sign returns the webhook-signature header of a request: a "v1,<base64 of
// HMAC-SHA256 of id.timestamp.body>" signature by each secret, separated
// by spaces (two during a rotation's overlap, so a receiver verifies with
// either secret).
func Sign(secrets []string, msgID string, ts time.Time, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for i, secret := range secrets {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			return "", fmt.Errorf("signing secret %d: %w", i, err)
		}
		sig, err := wh.Sign(msgID, ts, body)
		if err != nil {
			return "", fmt.Errorf("sign %s: %w", msgID, err)
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}
