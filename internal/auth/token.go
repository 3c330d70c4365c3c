// Package auth makes and checks parley's API tokens.
//
// A token reads "prl_<id>_<secret>". The id finds the stored row; only the
// SHA-256 of the secret is stored, and it is compared in constant time. The
// secret is shown once, when the token is made.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"strings"
)

const prefix = "prl_"

var enc = base32.StdEncoding.WithPadding(base32.NoPadding)

// ErrMalformed is a bearer token that is not of parley's shape.
var ErrMalformed = errors.New("malformed token")

// New makes a token: the plaintext to hand to the user once, its id, and the
// hash to store.
func New() (plaintext, id string, hash []byte) {
	id = strings.ToLower(enc.EncodeToString(randomBytes(10)))
	secret := strings.ToLower(enc.EncodeToString(randomBytes(32)))
	h := sha256.Sum256([]byte(secret))
	return prefix + id + "_" + secret, id, h[:]
}

// Parse splits a plaintext token into its id and secret.
func Parse(plaintext string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(plaintext, prefix)
	if !ok {
		return "", "", ErrMalformed
	}
	id, secret, ok = strings.Cut(rest, "_")
	if !ok || id == "" || secret == "" || len(plaintext) > 200 {
		return "", "", ErrMalformed
	}
	return id, secret, nil
}

// Matches reports, in constant time, whether secret hashes to hash.
func Matches(secret string, hash []byte) bool {
	h := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(h[:], hash) == 1
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("auth: crypto/rand failed: " + err.Error()) // never happens on supported platforms
	}
	return b
}
