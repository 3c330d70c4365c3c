package parleybin

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FakeKeyEnv names the variable the fake model's API key is read from: a
// started parley needs it set (to anything) in its environment.
const FakeKeyEnv = "FAKE_OPENAI_KEY"

// FakeModelConfig writes dir/parley.yaml, whose only model is the
// OpenAI-compatible fake at fakeURL (its key in FakeKeyEnv), followed by
// extra (more YAML), and returns its path.
func FakeModelConfig(t testing.TB, dir, fakeURL, extra string) string {
	t.Helper()
	cfg := fmt.Sprintf(`default_model: fake
models:
  - name: fake
    provider: openai
    model: gpt-test
    base_url: %s
    api_key_env: %s
`, fakeURL, FakeKeyEnv) + extra
	path := filepath.Join(dir, "parley.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
