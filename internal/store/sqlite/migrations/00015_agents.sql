-- Agents: an owner's named chat configurations. agents holds each name's
-- current version (deleted marks one deleted: its versions stay for the
-- chats that use them, and a re-created agent continues their numbering);
-- agent_versions holds every version's definition, never changed.
-- chats.agent and chats.agent_version name the agent version a chat was
-- made from ('' and NULL: none); chats.max_steps caps the model calls of
-- each of the chat's runs, as its agent version says (0: the server's).

-- +goose Up
CREATE TABLE agents (
    owner      TEXT NOT NULL REFERENCES owners (name) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    deleted    INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (owner, name)
) STRICT;

CREATE TABLE agent_versions (
    owner      TEXT NOT NULL,
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    definition TEXT NOT NULL CHECK (json_valid(definition)),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (owner, name, version),
    FOREIGN KEY (owner, name) REFERENCES agents (owner, name) ON DELETE CASCADE
) STRICT;

ALTER TABLE chats ADD COLUMN agent TEXT NOT NULL DEFAULT '';
ALTER TABLE chats ADD COLUMN agent_version INTEGER;
ALTER TABLE chats ADD COLUMN max_steps INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE chats DROP COLUMN max_steps;
ALTER TABLE chats DROP COLUMN agent_version;
ALTER TABLE chats DROP COLUMN agent;
DROP TABLE agent_versions;
DROP TABLE agents;
