-- An owner's app chat ids (the id an AI SDK useChat knows its
-- conversation by), each bound to one chat. The primary key makes one app
-- id name one chat, however many first requests race, on every replica;
-- deleting the chat frees the id. Chats the AI SDK route made before this
-- table existed are bound by their ai-sdk-chat label: of several (a fork
-- copied the label) the newest that is not a fork.

-- +goose Up
CREATE TABLE app_chats (
    owner   text COLLATE "C" NOT NULL,
    app_id  text COLLATE "C" NOT NULL,
    chat_id text COLLATE "C" NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    PRIMARY KEY (owner, app_id)
);

CREATE INDEX app_chats_chat ON app_chats (chat_id);

INSERT INTO app_chats (owner, app_id, chat_id)
SELECT DISTINCT ON (owner, labels ->> 'ai-sdk-chat') owner, labels ->> 'ai-sdk-chat', id
FROM chats
WHERE jsonb_typeof(labels -> 'ai-sdk-chat') = 'string'
ORDER BY owner, labels ->> 'ai-sdk-chat', labels ? 'forked_from', created_at DESC, id DESC;

-- +goose Down
DROP TABLE app_chats;
