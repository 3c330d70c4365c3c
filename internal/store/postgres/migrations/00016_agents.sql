-- Agents: an owner's named chat configurations. agents holds each name's
-- current version (deleted marks one deleted: its versions stay for the
-- chats that use them, and a re-created agent continues their numbering);
-- agent_versions holds every version's definition, never changed.
-- chats.agent and chats.agent_version name the agent version a chat was
-- made from ('' and NULL: none).

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

-- +goose Down
ALTER TABLE chats DROP COLUMN agent_version;
ALTER TABLE chats DROP COLUMN agent;
DROP TABLE agent_versions;
DROP TABLE agents;
