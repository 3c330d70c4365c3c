package config

import "testing"

func TestCORSOrigins(t *testing.T) {
	for _, o := range []string{"https://app.example.com", "http://localhost:3000", "https://[::1]:8443"} {
		if err := (CORS{AllowedOrigins: []string{o}}).check(); err != nil {
			t.Errorf("%q: %v", o, err)
		}
	}
	for _, o := range []string{"*", "https://*.example.com", "https://app.example.com/", "https://app.example.com/x",
		"app.example.com", "ftp://app.example.com", "https://u@app.example.com", "https://app.example.com?x=1", ""} {
		if err := (CORS{AllowedOrigins: []string{o}}).check(); err == nil {
			t.Errorf("%q: accepted", o)
		}
	}
}
