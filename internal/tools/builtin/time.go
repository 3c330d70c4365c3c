package builtin

import (
	"context"
	"encoding/json"
	"time"
	_ "time/tzdata" // time zones work on hosts without a zoneinfo database

	"github.com/parleyhq/parley/tool"
)

var currentTimeDecl = tool.Decl{
	Name:        "current_time",
	Description: "Returns the current date and time, in UTC or in the given IANA time zone.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"timezone":{"type":"string","description":"IANA time zone name, for example Europe/Paris; UTC when omitted"}},` +
		`"additionalProperties":false}`),
	Annotations: tool.ReadOnly(),
}

// CurrentTime returns the current_time tool: {"timezone"?: IANA name} answers
// {"time": RFC 3339, "unix": seconds, "timezone": name}.
func CurrentTime() tool.Tool { return currentTime{now: time.Now} }

type currentTime struct{ now func() time.Time }

func (t currentTime) Decl() tool.Decl { return currentTimeDecl }

func (t currentTime) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var args struct {
		Timezone string `json:"timezone"`
	}
	if err := json.Unmarshal(c.Args, &args); err != nil {
		return tool.Errorf("invalid arguments: %v", err), nil
	}
	name := args.Timezone
	if name == "" {
		name = "UTC"
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" { // the server's zone means nothing to the user
		return tool.Errorf("unknown time zone %q: use an IANA name such as Europe/Paris", args.Timezone), nil
	}
	now := t.now().In(loc)
	return tool.JSON(map[string]any{
		"time":     now.Format(time.RFC3339),
		"unix":     now.Unix(),
		"timezone": loc.String(),
	}), nil
}
