package api_test

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// versionTexts lists a message's versions as "text" or "text (superseded)",
// oldest first.
func (s *server) versionTexts(tok, chatID string, msgID int64) []string {
	s.t.Helper()
	var body struct{ Versions []chat.Message }
	s.do("GET", fmt.Sprintf("/api/v1/chats/%s/messages/%d/versions", chatID, msgID), tok, nil).expect(s.t, http.StatusOK, &body)
	var out []string
	for _, m := range body.Versions {
		t := m.Parts[0].Text
		if m.Superseded {
			t += " (superseded)"
		}
		out = append(out, t)
	}
	return out
}

// TestEditAndRegenerateKeepVersions, on both stores with a run answering:
// a regeneration keeps the earlier answer and an edit the earlier text of
// the message, each a superseded version beside the new one; the versions
// route lists them oldest first, for the new version and the old alike;
// the model never sees a superseded message; other owners' chats and
// unknown messages are 404.
func TestEditAndRegenerateKeepVersions(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			fake := llmtest.NewOpenAIChat(t)
			fake.Push(llmtest.Turn{Text: "a1"}, llmtest.Turn{Text: "a2"}, llmtest.Turn{Text: "a2, again"}, llmtest.Turn{Text: "a2 to the edit"})
			var s *server
			if backend == "postgres" {
				s = newLivePostgres(t, pgtest.Migrated(t), "parley_test_"+strings.ToLower(rand.Text()[:10]), fake)
				runEngine(t, s)
			} else {
				s = newLive(t, fake)
			}
			tok := s.token("alice")
			c := s.createChat(tok, map[string]any{"title": "versions", "message": "q1"})
			s.waitFor(tok, c.ID, chat.Waiting)
			base := "/api/v1/chats/" + c.ID
			s.do("POST", base+"/messages", tok, map[string]any{"message": "q2"}).expect(t, http.StatusAccepted, nil)
			s.waitFor(tok, c.ID, chat.Waiting)
			first := s.messages(tok, c.ID)
			if want := []string{"a2"}; fmt.Sprint(s.versionTexts(tok, c.ID, first[3].ID)) != fmt.Sprint(want) {
				t.Fatalf("versions of an answer never replaced: %q", s.versionTexts(tok, c.ID, first[3].ID))
			}

			s.do("POST", base+"/regenerate", tok, nil).expect(t, http.StatusOK, nil)
			s.waitFor(tok, c.ID, chat.Waiting)
			regen := s.messages(tok, c.ID)
			want := []string{"a2 (superseded)", "a2, again"}
			for _, id := range []int64{regen[3].ID, first[3].ID} {
				if got := s.versionTexts(tok, c.ID, id); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("versions of answer %d after a regeneration: %q, want %q", id, got, want)
				}
			}

			s.do("PATCH", fmt.Sprintf("%s/messages/%d", base, first[2].ID), tok, map[string]any{"content": "q2, edited"}).expect(t, http.StatusOK, nil)
			s.waitFor(tok, c.ID, chat.Waiting)
			edited := s.messages(tok, c.ID)
			if len(edited) != 4 || edited[2].Parts[0].Text != "q2, edited" || edited[2].ID <= regen[3].ID || edited[3].Parts[0].Text != "a2 to the edit" {
				t.Fatalf("after the edit: %+v", edited)
			}
			want = []string{"q2 (superseded)", "q2, edited"}
			for _, id := range []int64{edited[2].ID, first[2].ID} {
				if got := s.versionTexts(tok, c.ID, id); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("versions of question %d after an edit: %q, want %q", id, got, want)
				}
			}
			// The answers to the earlier text stay versions of one another.
			want = []string{"a2 (superseded)", "a2, again (superseded)"}
			if got := s.versionTexts(tok, c.ID, first[3].ID); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("versions of the answers to the earlier text: %q, want %q", got, want)
			}
			var every struct{ Messages []chat.Message }
			s.do("GET", base+"/messages?superseded=true", tok, nil).expect(t, http.StatusOK, &every)
			if n := len(every.Messages); n != 7 || every.Messages[2].ParentID == nil || *every.Messages[2].ParentID != first[1].ID || every.Messages[0].ParentID != nil {
				t.Errorf("every message: %+v, want 7, the earlier q2 following a1", every.Messages)
			}

			// The model saw none of what was superseded.
			reqs := fake.Requests()
			if len(reqs) != 4 {
				t.Fatalf("the model got %d requests, want 4", len(reqs))
			}
			if b := string(reqs[2].Body); strings.Contains(b, `"a2"`) || !strings.Contains(b, `"q2"`) {
				t.Errorf("the regeneration's request: %s", b)
			}
			if b := string(reqs[3].Body); strings.Contains(b, `"q2"`) || strings.Contains(b, "a2") || !strings.Contains(b, "q2, edited") {
				t.Errorf("the edit's request: %s", b)
			}

			s.do("GET", fmt.Sprintf("%s/messages/%d/versions", base, edited[3].ID+1000), tok, nil).expectError(t, http.StatusNotFound, "message_not_found")
			s.do("GET", fmt.Sprintf("%s/messages/%d/versions", base, edited[2].ID), s.token("bob"), nil).expectError(t, http.StatusNotFound, "not_found")
			s.do("GET", base+"/messages/0/versions", tok, nil).expectError(t, http.StatusBadRequest, "invalid_path")
		})
	}
}
