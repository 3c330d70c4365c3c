package dbutil

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// cursorVersion prefixes every cursor, so a cursor of a future format is
// told apart instead of misread.
const cursorVersion = "c1"

// EncodeCursor returns the opaque cursor of the page that starts after the
// chat with this creation time and id (pages run newest first).
func EncodeCursor(createdAt time.Time, id string) string {
	raw := cursorVersion + ":" + strconv.FormatInt(createdAt.UnixMicro(), 10) + ":" + id
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// DecodeCursor reverses EncodeCursor; anything it did not make is
// store.ErrBadCursor.
func DecodeCursor(cursor string) (createdAt time.Time, id string, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("cursor %q: %w", cursor, store.ErrBadCursor)
	}
	version, rest, ok1 := strings.Cut(string(raw), ":")
	micros, id, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || version != cursorVersion || !issuableID(id) {
		return time.Time{}, "", fmt.Errorf("cursor %q: %w", cursor, store.ErrBadCursor)
	}
	us, err := strconv.ParseInt(micros, 10, 64)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("cursor %q: %w", cursor, store.ErrBadCursor)
	}
	return time.UnixMicro(us).UTC(), id, nil
}

// issuableID reports whether id could be in a cursor a store issued: not
// empty, UTF-8, without control characters. A forged id that is not would
// otherwise reach the query, where PostgreSQL refuses a NUL or invalid
// UTF-8 as text (an error, not an empty page).
func issuableID(id string) bool {
	return id != "" && utf8.ValidString(id) && !strings.ContainsFunc(id, unicode.IsControl)
}

// ChatPage is the page of the chats read for it: up to limit+1, newest
// first; the one past limit only tells that another page follows.
func ChatPage(chats []chat.Chat, limit int) store.ChatPage {
	page := store.ChatPage{Chats: chats}
	if len(chats) > limit {
		page.Chats = chats[:limit]
		last := chats[limit-1]
		page.NextCursor = EncodeCursor(last.CreatedAt, last.ID)
	}
	return page
}

// FilePage is ChatPage for files.
func FilePage(files []store.File, limit int) store.FilePage {
	page := store.FilePage{Files: files}
	if len(files) > limit {
		page.Files = files[:limit]
		last := files[limit-1]
		page.NextCursor = EncodeCursor(last.CreatedAt, last.ID)
	}
	return page
}
