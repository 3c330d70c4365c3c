package dbutil

// The column lists of the shared scanners, which both stores select.

// ChatColumns are the columns ScanChat reads, in its order.
const ChatColumns = `id, owner, title, model, system_prompt, status, dynamic_tools, labels,
	archived, last_error, usage_input_tokens, usage_output_tokens, usage_cost_micros,
	tool_result_timeout_ms, action_deadline, worker_id, lease_generation, lease_expires_at,
	interrupt_requested, created_at, updated_at, version, lease_recoveries, tools, approve,
	compact_requested, agent, agent_version, max_steps,
	response_format, turn_format, output_repairs`

// MessageColumns are the columns ScanMessage reads, in its order.
const MessageColumns = `id, chat_id, role, parts, usage, created_at, superseded, parent_id`

// QueuedColumns are the columns ScanQueued reads, in its order.
const QueuedColumns = `id, chat_id, parts, response_format, created_at`

// FileColumns are the columns ScanFile reads, in its order.
const FileColumns = `id, owner, name, media_type, size, sha256, created_at, deleted_at`

// TokenColumns are the columns ScanToken reads, in its order.
const TokenColumns = `id, owner, name, hash, created_at, revoked_at`

// AgentColumns are the columns ScanAgent reads: the agent's row (a)
// joined with one of its versions (v).
const AgentColumns = `a.owner, a.name, v.version, a.deleted, a.created_at, v.created_at, v.definition`

// EventColumns are the columns ScanEvent reads (e: the event).
const EventColumns = `e.id, e.owner, e.chat_id, e.type, e.title, e.status, e.labels, e.last_error,
	e.usage_input_tokens, e.usage_output_tokens, e.usage_cost_micros, e.action_deadline,
	e.through_message_id, e.body, e.created_at`

// DeliveryColumns are the columns ScanDelivery reads (d: the delivery,
// e: its event).
const DeliveryColumns = `d.id, d.event_id, d.endpoint_id, e.type, e.chat_id, d.status, d.attempts,
	d.next_attempt_at, d.last_status_code, d.last_error, d.created_at, d.delivered_at`
