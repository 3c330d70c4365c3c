-- parley_fence is a worker's fence (store.Tx.Fence) as one statement that
-- fails: it locks the chat's row if the lease (worker id, generation) still
-- holds it, and raises SQLSTATE 'LEASE' otherwise. A failed statement ends
-- the transaction and skips the statements sent after it, so the fence can
-- travel in one round trip with the writes it guards.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION parley_fence(chat text, worker text, generation bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM chats
    WHERE id = chat AND status = 'running' AND worker_id = worker AND lease_generation = generation
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'chat % is not held by worker % under generation %', chat, worker, generation
            USING ERRCODE = 'LEASE';
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION parley_fence(text, text, bigint);
