package aisdk

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/parleyhq/parley/internal/chat"
)

// Triggers of a useChat request.
const (
	TriggerSubmit     = "submit-message"
	TriggerRegenerate = "regenerate-message"
)

// Labels of a chat created for a useChat client: LabelAPI says where it
// came from, LabelClientID holds the client's chat id.
const (
	LabelAPI      = "api"
	LabelAPIValue = "ai-sdk"
	LabelClientID = chat.LabelAISDKChat
)

// Request is the body DefaultChatTransport sends, plus the optional
// "parley" object used when the chat is created.
type Request struct {
	ID        string      `json:"id"`
	Messages  []UIMessage `json:"messages"`
	Trigger   string      `json:"trigger"`
	MessageID string      `json:"messageId"`
	Parley    *Options    `json:"parley"`
}

// Options configure a chat created for a useChat client.
type Options struct {
	Model        string             `json:"model"`
	SystemPrompt string             `json:"system_prompt"`
	Title        string             `json:"title"`
	Labels       map[string]string  `json:"labels"`
	DynamicTools []chat.DynamicTool `json:"dynamic_tools"`
	Tools        chat.ToolGlobs     `json:"tools"`
	Approve      chat.ToolGlobs     `json:"approve"`
	// Agent names a stored agent the chat starts from; the other options
	// override its fields.
	Agent string `json:"agent"`
}

// UIMessage is the AI SDK's message shape.
type UIMessage struct {
	ID       string          `json:"id"`
	Role     string          `json:"role"`
	Parts    []UIPart        `json:"parts"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// UIPart is one part of a UIMessage; the fields of its type are set.
type UIPart struct {
	Type       string          `json:"type"`
	Text       string          `json:"text,omitempty"`
	State      string          `json:"state,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	ErrorText  string          `json:"errorText,omitempty"`
	Approval   *Approval       `json:"approval,omitempty"`
	// ProviderExecuted marks a server-side call: parley ran it (or runs it
	// once approved); only the others are the client's to answer.
	ProviderExecuted bool `json:"providerExecuted,omitempty"`
	// A file part's fields: in a request, URL names an uploaded file
	// (FileURL); in a chat's messages, its attachment route.
	MediaType string `json:"mediaType,omitempty"`
	Filename  string `json:"filename,omitempty"`
	URL       string `json:"url,omitempty"`
}

// fileURL matches the URL of an uploaded file's content, absolute or a
// path, and captures the file's id.
var fileURL = regexp.MustCompile(`(?:^|/)api/v1/(?:chats/[^/]+/)?files/(file_[0-9A-Za-z]+)/content$`)

// FileURL returns the URL a file part names an uploaded file by: the path
// of the attachment route of the chat's message that uses it.
func FileURL(chatID, fileID string) string {
	return "/api/v1/chats/" + chatID + "/files/" + fileID + "/content"
}

// Approval is a tool part's approval request and, once given, its answer.
type Approval struct {
	ID       string `json:"id"`
	Approved *bool  `json:"approved,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// isTool reports whether p is a tool part, dynamic or static.
func (p UIPart) isTool() bool {
	return p.Type == "dynamic-tool" || strings.HasPrefix(p.Type, "tool-")
}

// Action is what the last message of a request asks of the chat.
type Action struct {
	Kind ActionKind
	Text string // ActionMessage: the user's text
	// ActionMessage: the uploaded files the message attaches, by id.
	FileIDs []string
	// ActionAnswer: the outputs and approval answers the message carries,
	// by tool call id; the caller keeps those the chat waits for.
	Outputs   []Output
	Decisions []Decision
	// MessageID is the id of the assistant UIMessage an answer continues.
	MessageID string
}

// ActionKind names an Action.
type ActionKind int

// The actions of a request.
const (
	ActionMessage    ActionKind = iota + 1 // a new user message
	ActionAnswer                           // tool outputs and approval decisions
	ActionRegenerate                       // answer the last user message again
)

// Output is a client tool's output from a tool part.
type Output struct {
	ToolCallID string
	Output     json.RawMessage
	IsError    bool
}

// Decision is an approval answer from a tool part.
type Decision struct {
	ToolCallID string
	Approve    bool
	Reason     string
}

// RequestError is a request the protocol refuses: its Field and why.
type RequestError struct {
	Field   string
	Message string
}

func (e *RequestError) Error() string { return e.Field + ": " + e.Message }

// Parse checks the request and returns the action its last message asks for.
func (r Request) Parse() (Action, error) {
	if r.ID == "" {
		return Action{}, &RequestError{Field: "id", Message: "is required: the chat's id"}
	}
	switch r.Trigger {
	case TriggerRegenerate:
		return Action{Kind: ActionRegenerate}, nil
	case TriggerSubmit, "":
	default:
		return Action{}, &RequestError{Field: "trigger", Message: fmt.Sprintf("%q: want %q or %q", r.Trigger, TriggerSubmit, TriggerRegenerate)}
	}
	if len(r.Messages) == 0 {
		return Action{}, &RequestError{Field: "messages", Message: "must hold the message to send"}
	}
	last := r.Messages[len(r.Messages)-1]
	switch last.Role {
	case "user":
		var (
			b     strings.Builder
			files []string
		)
		for _, p := range last.Parts {
			switch p.Type {
			case "text":
				b.WriteString(p.Text)
			case "file":
				m := fileURL.FindStringSubmatch(strings.SplitN(p.URL, "?", 2)[0])
				if m == nil {
					return Action{}, &RequestError{Field: "messages", Message: fmt.Sprintf("a file part's url must name an uploaded file (/api/v1/files/{file_id}/content; POST /api/v1/files uploads one), got %.100q", p.URL)}
				}
				files = append(files, m[1])
			case "step-start":
			default:
				if !strings.HasPrefix(p.Type, "data-") {
					return Action{}, &RequestError{Field: "messages", Message: fmt.Sprintf("a user message's part of type %q is not supported; send text", p.Type)}
				}
			}
		}
		if strings.TrimSpace(b.String()) == "" && len(files) == 0 {
			return Action{}, &RequestError{Field: "messages", Message: "the last message, a user message, has no text and no file"}
		}
		return Action{Kind: ActionMessage, Text: b.String(), FileIDs: files}, nil
	case "assistant":
		a := Action{Kind: ActionAnswer, MessageID: last.ID}
		for _, p := range last.Parts {
			if !p.isTool() {
				continue
			}
			if p.ProviderExecuted && p.State != "approval-responded" {
				continue // a server-side call's output came from parley
			}
			switch p.State {
			case "output-available":
				a.Outputs = append(a.Outputs, Output{ToolCallID: p.ToolCallID, Output: rawOr(p.Output, "null")})
			case "output-error":
				out, _ := json.Marshal(p.ErrorText)
				a.Outputs = append(a.Outputs, Output{ToolCallID: p.ToolCallID, Output: out, IsError: true})
			case "approval-responded":
				if p.Approval == nil || p.Approval.Approved == nil {
					return Action{}, &RequestError{Field: "messages", Message: fmt.Sprintf("tool call %q is approval-responded without an answer", p.ToolCallID)}
				}
				a.Decisions = append(a.Decisions, Decision{ToolCallID: p.ToolCallID, Approve: *p.Approval.Approved, Reason: p.Approval.Reason})
			}
		}
		if len(a.Outputs) == 0 && len(a.Decisions) == 0 {
			return Action{}, &RequestError{Field: "messages", Message: "the last message, an assistant message, carries no tool output and no approval answer"}
		}
		return a, nil
	default:
		return Action{}, &RequestError{Field: "messages", Message: fmt.Sprintf("the last message's role is %q: want user, or assistant with tool outputs or approval answers", last.Role)}
	}
}
