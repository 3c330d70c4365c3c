package chat

// Labels parley's APIs set on a chat.
const (
	// LabelForkedFrom names the chat a fork was made of.
	LabelForkedFrom = "forked_from"
	// LabelAISDKChat holds the id an AI SDK useChat app knows the chat by.
	LabelAISDKChat = "ai-sdk-chat"
	// LabelConversation holds the conversation key of a chat the OpenAI
	// Chat Completions facade made: what its client had sent.
	LabelConversation = "conversation"
)

// ConversationLabels tie a chat to one conversation of a client app, which
// finds the chat by them. A fork is another conversation: it does not copy
// them, or the app's next request could land in the fork.
var ConversationLabels = []string{LabelAISDKChat, LabelConversation}
