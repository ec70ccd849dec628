-- pgplace 0.8.2 -> 0.8.3: place.placements without foreign keys.
--
-- Their checks, a query per placement, were a sixth of a place_many(100) call. What they
-- kept is kept without them: a placement holds its board's row (the seq lock) and, since
-- this library, its users' rows (KEY SHARE) until commit, so a DELETE of a board or a user
-- waits for it; then the triggers below delete a deleted board's history and refuse to
-- delete a user who has placements (23503, as the foreign key did). A DELETE of boards or
-- users under REPEATABLE READ or SERIALIZABLE is refused (0A000): its snapshot would miss
-- a placement committed while it waited. Every placement, board and user is kept.

DO $$
DECLARE
    fk name;
BEGIN
    FOR fk IN SELECT conname FROM pg_catalog.pg_constraint
              WHERE conrelid = 'place.placements'::regclass AND contype = 'f' ORDER BY conname
    LOOP
        EXECUTE format('ALTER TABLE place.placements DROP CONSTRAINT %I', fk);
    END LOOP;
END
$$;

-- Under REPEATABLE READ or SERIALIZABLE a statement sees the transaction's snapshot, which
-- misses a placement committed while the DELETE waited for it: refused, where a foreign
-- key's check would have used a second snapshot.
CREATE FUNCTION place._require_read_committed(what text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted') THEN
        RAISE EXCEPTION 'deleting % needs a READ COMMITTED transaction', what
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = format('Under %s a placement committed since the transaction began would be missed.',
                                  upper(current_setting('transaction_isolation'))),
                  HINT = 'Delete in a transaction of its own (READ COMMITTED is the default).';
    END IF;
END
$$;

-- A board's history goes with it (the DELETE may be by a role that cannot delete history).
CREATE FUNCTION place._drop_board_history() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE place.placements;
    ELSIF EXISTS (SELECT FROM gone) THEN
        PERFORM place._require_read_committed('boards');
        DELETE FROM place.placements p USING gone g WHERE p.board_id = g.id;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER drop_history AFTER DELETE ON place.board_settings
REFERENCING OLD TABLE AS gone
FOR EACH STATEMENT EXECUTE FUNCTION place._drop_board_history();
CREATE TRIGGER drop_history_truncated AFTER TRUNCATE ON place.board_settings
FOR EACH STATEMENT EXECUTE FUNCTION place._drop_board_history();

-- A user with placements stays (the history names who placed each tile): ban them instead.
-- As the owner, as a foreign key's check was: whoever may delete users need not read history.
CREATE FUNCTION place._keep_users_with_history() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    kept_user bigint;
    kept_board bigint;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        SELECT p.user_id, p.board_id INTO kept_user, kept_board FROM place.placements p LIMIT 1;
    ELSIF EXISTS (SELECT FROM gone) THEN
        PERFORM place._require_read_committed('users');
        SELECT g.id, p.board_id INTO kept_user, kept_board
        FROM gone g CROSS JOIN place.board_settings b
        CROSS JOIN LATERAL (SELECT p.board_id FROM place.placements p
                            WHERE p.board_id = b.id AND p.user_id = g.id LIMIT 1) p
        LIMIT 1;
    END IF;
    IF kept_user IS NOT NULL THEN
        RAISE EXCEPTION 'user % has placements on board % and cannot be deleted', kept_user, kept_board
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = 'The history keeps every placement with the user who made it.',
                  HINT = 'Ban the user instead (place.ban_user), or delete their boards first.';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER keep_history AFTER DELETE ON place.users
REFERENCING OLD TABLE AS gone
FOR EACH STATEMENT EXECUTE FUNCTION place._keep_users_with_history();
CREATE TRIGGER keep_history_truncated AFTER TRUNCATE ON place.users
FOR EACH STATEMENT EXECUTE FUNCTION place._keep_users_with_history();

-- As every SECURITY DEFINER function of the extension (functions.sql).
REVOKE EXECUTE ON FUNCTION place._drop_board_history() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place._keep_users_with_history() FROM PUBLIC;
