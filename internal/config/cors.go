package config

import (
	"fmt"
	"net/url"
	"strings"
)

// check refuses an allowed origin that is not an exact origin
// scheme://host[:port]: no "*", no path, query or credentials.
func (c CORS) check() error {
	for i, o := range c.AllowedOrigins {
		if err := checkOrigin(o); err != nil {
			return fmt.Errorf("cors.allowed_origins[%d] %q: %w", i, o, err)
		}
	}
	return nil
}

func checkOrigin(o string) error {
	if strings.Contains(o, "*") {
		return fmt.Errorf(`"*" is not allowed: list each origin`)
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" ||
		u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
		return fmt.Errorf("want an exact origin scheme://host[:port], like https://app.example.com")
	}
	return nil
}
