-- An owner's app chat ids (the id an AI SDK useChat knows its
-- conversation by), each bound to one chat. The primary key makes one app
-- id name one chat, however many first requests race; deleting the chat
-- frees the id. Chats the AI SDK route made before this table existed are
-- bound by their ai-sdk-chat label: of several (a fork copied the label)
-- the newest that is not a fork.

-- +goose Up
CREATE TABLE app_chats (
    owner   TEXT NOT NULL,
    app_id  TEXT NOT NULL,
    chat_id TEXT NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    PRIMARY KEY (owner, app_id)
) STRICT;

CREATE INDEX app_chats_chat ON app_chats (chat_id);

INSERT INTO app_chats (owner, app_id, chat_id)
SELECT owner, app_id, id FROM (
    SELECT owner, json_extract(labels, '$."ai-sdk-chat"') AS app_id, id,
        row_number() OVER (PARTITION BY owner, json_extract(labels, '$."ai-sdk-chat"')
            ORDER BY json_extract(labels, '$.forked_from') IS NOT NULL, created_at DESC, id DESC) AS n
    FROM chats
    WHERE json_type(labels, '$."ai-sdk-chat"') = 'text'
) WHERE n = 1;

-- +goose Down
DROP TABLE app_chats;
