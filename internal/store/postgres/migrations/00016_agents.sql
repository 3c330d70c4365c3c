-- Agents: an owner's named chat configurations. agents holds each name's
-- current version (deleted marks one deleted: its versions stay for the
-- chats that use them, and a re-created agent continues their numbering);
-- agent_versions holds every version's definition, never changed.
-- chats.agent and chats.agent_version name the agent version a chat was
-- made from ('' and NULL: none); chats.max_steps caps the model calls of
-- each of the chat's runs, as its agent version says (0: the server's).

-- +goose Up
CREATE TABLE agents (
    owner      text COLLATE "C" NOT NULL REFERENCES owners (name) ON DELETE CASCADE,
    name       text COLLATE "C" NOT NULL,
    version    integer NOT NULL,
    deleted    boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (owner, name)
);

CREATE TABLE agent_versions (
    owner      text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    version    integer NOT NULL,
    definition json NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (owner, name, version),
    FOREIGN KEY (owner, name) REFERENCES agents (owner, name) ON DELETE CASCADE
);

ALTER TABLE chats ADD COLUMN agent text NOT NULL DEFAULT '';
ALTER TABLE chats ADD COLUMN agent_version integer;
ALTER TABLE chats ADD COLUMN max_steps integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE chats DROP COLUMN max_steps;
ALTER TABLE chats DROP COLUMN agent_version;
ALTER TABLE chats DROP COLUMN agent;
DROP TABLE agent_versions;
DROP TABLE agents;
