-- pgplace 0.7.0 -> 0.8.0 (ALTER EXTENSION pgplace UPDATE): the change feed trusts nobody
-- and costs writers one row (README, "The change feed").
-- - Writers of watched tables only stage their changes (place.changes, stamped with the
--   transaction id): no advisory lock, no sequence, no notification at commit.
-- - Positions are ticks (place.tick(), which the gateway calls): the transactions that
--   became visible between two snapshots, in place.change_ticks. place.change_commits is
--   now an empty view and place.change_pos_seq unused, kept so that dumps of 0.7.0 and
--   before restore (their commits become positions whose changes were not kept).
-- - A restore keeps the log's positions but not their changes (their transaction ids are
--   the old cluster's): place._restore_tick and place._restore_change.
-- - The capture trigger (place._capture_changes) is Rust, with the same arguments.
-- - Dropping or renaming a watched column is refused (it was logged without it).
-- - A board's whole-board maintenance takes turns on its row of place.board_maintenance,
--   no longer on an advisory lock.
-- - The board's seq lock is a row lock on its place.board_settings row (only pgplace's
--   functions can take it), no longer an advisory lock any login could hold.
-- The log of 0.7.0 is not carried over: positions go on after its newest one, and
-- changes_since refuses the older ones (read the tables afresh, as after a pruning).
-- Checked by tests/upgrade/run.sh: an updated database must be exactly a fresh 0.8.0.
\echo Use "ALTER EXTENSION pgplace UPDATE" to load this file. \quit

-- The old log's newest position is where the new positions go on from.
INSERT INTO place.change_settings AS s (one, kept_after)
SELECT true, coalesce((SELECT max(c.pos) FROM place.change_commits c), 0)
ON CONFLICT (one) DO UPDATE SET kept_after = greatest(s.kept_after, EXCLUDED.kept_after);

DROP TRIGGER commit_changes ON place.changes;
DROP FUNCTION place._commit_changes();
DROP FUNCTION place._change_payload_body(xid8, int, int);
DROP FUNCTION place._change_payload(bigint, timestamptz, text);
DROP FUNCTION place._next_change_n(int);
ALTER EXTENSION pgplace DROP TABLE place.change_commits;
DROP TABLE place.change_commits;
ALTER EXTENSION pgplace DROP TABLE place.changes;
DROP TABLE place.changes;

-- What the whole-board maintenance of a board (resize, compaction, keyframes, freeze_after)
-- takes turns on: the board's row here, made when first needed and locked FOR UPDATE,
-- which only pgplace's functions can do (an advisory lock on a guessable key, as before
-- 0.8.0, any login could hold). Placements never lock it. Not dumped: rows are remade.
CREATE TABLE place.board_maintenance (
    board_id bigint PRIMARY KEY REFERENCES place.board_settings (id) ON DELETE CASCADE
);
COMMENT ON TABLE place.board_maintenance IS 'A row per board whose maintenance ran: what maintenance takes turns on';

-- The order in which changes were staged (a sequence: writers share no row).
CREATE SEQUENCE place.change_n_seq;

-- The staged changes: one row per statement (or per 1,000 rows of one) on a watched table.
-- rows: [[action, key, obj, old], ...] with action insert/update/delete/truncate.
-- json, not jsonb: written as it is made, parsed only by the readers. lz4: a 1,000-row
-- statement's chunk is compressed ten times faster than with pglz.
CREATE TABLE place.changes (
    xid  xid8 NOT NULL,
    n    bigint NOT NULL DEFAULT pg_catalog.nextval('place.change_n_seq'),
    tbl  regclass NOT NULL,
    rows json COMPRESSION lz4 NOT NULL,
    PRIMARY KEY (xid, n)
);
COMMENT ON TABLE place.changes IS 'Changes of watched tables, per statement, stamped with their transaction; place.change_ticks says at which position each committed';

-- The positions: position pos holds the transactions visible in snap and not in prev (the
-- snapshot of the position before, or of none for the first one).
CREATE TABLE place.change_ticks (
    pos       bigint PRIMARY KEY CHECK (pos > 0),
    snap      pg_snapshot NOT NULL,
    prev      pg_snapshot NOT NULL,
    ticked_at timestamptz NOT NULL
);
CREATE INDEX change_ticks_ticked_at_idx ON place.change_ticks (ticked_at);
COMMENT ON TABLE place.change_ticks IS 'The change log''s positions: each the transactions that became visible between two snapshots';

-- What a restore brings: pg_dump keeps the log's rows, but their transaction ids and
-- snapshots belong to the cluster they were made in, and another cluster's ids may be
-- behind them (its new changes would then look older than the log's newest position, and
-- never be given one). So a restored position stays a position - new ones go on after it
-- - with the snapshot of none (place._no_snapshot()): its changes were not kept, and a
-- reader asking for it is told to read the tables afresh (55000, place._check_log_read).
-- Restored changes are dropped. Writers never fire these triggers (capture.rs writes
-- place.changes below SQL); place.tick() and place.kick() say that they are pgplace
-- writing its log (pgplace.log_writer, set on those functions: setting it elsewhere
-- changes nothing, as only the log's owner may insert at all).
CREATE FUNCTION place._restore_tick() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF pg_catalog.current_setting('pgplace.log_writer', true) IS DISTINCT FROM 'on' THEN
        NEW.snap := place._no_snapshot();
        NEW.prev := place._no_snapshot();
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER restore_tick BEFORE INSERT ON place.change_ticks
FOR EACH ROW EXECUTE FUNCTION place._restore_tick();
CREATE FUNCTION place._restore_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF pg_catalog.current_setting('pgplace.log_writer', true) IS DISTINCT FROM 'on' THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER restore_change BEFORE INSERT ON place.changes
FOR EACH ROW EXECUTE FUNCTION place._restore_change();

SELECT pg_catalog.pg_extension_config_dump('place.change_n_seq', '');
SELECT pg_catalog.pg_extension_config_dump('place.changes', '');
SELECT pg_catalog.pg_extension_config_dump('place.change_ticks', '');

-- Restoring a dump of 0.7.0 or before (pg_dump writes CREATE EXTENSION without a version,
-- then the old log's rows): the old log's changes come to place.changes (their columns
-- are these) and are dropped there, its commits become positions whose changes were not
-- kept (as every restored position: place._restore_tick), and its sequence is set and not
-- used again. New positions go on after the old ones.
COMMENT ON SEQUENCE place.change_pos_seq IS 'Only what a dump of pgplace 0.7.0 or before sets; unused';
CREATE VIEW place.change_commits AS
SELECT NULL::bigint AS pos, NULL::xid8 AS xid, NULL::int AS first_n, NULL::int AS last_n,
       NULL::timestamptz AS committed_at
WHERE false;
COMMENT ON VIEW place.change_commits IS 'Only for restoring a dump of pgplace 0.7.0 or before (its commits become positions whose changes were not kept); always empty';
CREATE FUNCTION place._restore_old_commit() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO place.change_ticks (pos, snap, prev, ticked_at)
    VALUES (NEW.pos, pg_catalog.pg_current_snapshot(), pg_catalog.pg_current_snapshot(), NEW.committed_at)
    ON CONFLICT (pos) DO NOTHING;
    RETURN NEW;
END
$$;
CREATE TRIGGER restore_old_commit INSTEAD OF INSERT ON place.change_commits
FOR EACH ROW EXECUTE FUNCTION place._restore_old_commit();

-- The capture trigger is Rust now (extension/src/capture.rs), with the same arguments:
-- the watched tables' triggers stay as they are.
CREATE OR REPLACE FUNCTION place."_capture_changes"()
	RETURNS TRIGGER
	LANGUAGE c
	AS 'MODULE_PATHNAME', '_capture_changes_wrapper';

-- The snapshot before the first position: no transaction is visible in it.
CREATE FUNCTION place._no_snapshot() RETURNS pg_snapshot
LANGUAGE sql IMMUTABLE AS $$ SELECT '3:3:'::pg_catalog.pg_snapshot $$;

-- Whether a transaction not visible in `prev` has staged changes that this statement's
-- snapshot sees committed (an index range of place.changes: the transactions of `prev`'s
-- xmin on). Reads only.
CREATE FUNCTION place._changed_since(prev pg_snapshot) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT FROM place.changes c
                   WHERE c.xid >= pg_catalog.pg_snapshot_xmin(prev)
                     AND NOT pg_catalog.pg_visible_in_snapshot(c.xid, prev)
                     -- The caller's own transaction's, not yet committed, wait for it.
                     AND pg_catalog.pg_visible_in_snapshot(c.xid, pg_catalog.pg_current_snapshot()))
$$;

-- The changes of the positions after `after_pos` (at most lim positions), in order.
CREATE FUNCTION place._ticked_changes(after_pos bigint, lim int)
RETURNS TABLE (pos bigint, ticked_at timestamptz, n bigint, tbl regclass, rows json)
LANGUAGE sql STABLE AS $$
    SELECT t.pos, t.ticked_at, c.n, c.tbl, c.rows
    FROM (SELECT * FROM place.change_ticks x WHERE x.pos > after_pos ORDER BY x.pos LIMIT lim) t
    JOIN place.changes c
      ON c.xid >= pg_catalog.pg_snapshot_xmin(t.prev) AND c.xid < pg_catalog.pg_snapshot_xmax(t.snap)
     AND pg_catalog.pg_visible_in_snapshot(c.xid, t.snap)
     AND NOT pg_catalog.pg_visible_in_snapshot(c.xid, t.prev)
$$;

-- Makes the next position if transactions that changed watched tables committed since the
-- last one; returns the newest position either way. Called by the gateway every few
-- milliseconds (--change-tick-ms), by anyone else at will: a tick with nothing new reads
-- two index entries and writes nothing.
CREATE FUNCTION place.tick() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    newest place.change_ticks;
    made bigint;
    retention interval;
BEGIN
    -- A tick's snapshot must be newer than every tick before it: a statement's own.
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'place.tick() must run at READ COMMITTED, not %', pg_catalog.current_setting('transaction_isolation')
            USING ERRCODE = '25001', HINT = 'Call it outside a REPEATABLE READ or SERIALIZABLE transaction.';
    END IF;
    SELECT * INTO newest FROM place.change_ticks t ORDER BY t.pos DESC LIMIT 1;
    IF NOT place._changed_since(coalesce(newest.snap, place._no_snapshot())) THEN
        RETURN coalesce(newest.pos, (SELECT s.kept_after FROM place.change_settings s), 0);
    END IF;
    IF NOT EXISTS (SELECT FROM place.change_settings) THEN
        INSERT INTO place.change_settings (one) VALUES (true) ON CONFLICT (one) DO NOTHING;
    END IF;
    -- One ticker at a time. One that finds the row taken leaves this tick to the other.
    PERFORM FROM place.change_settings s FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN coalesce(newest.pos, 0);
    END IF;
    -- A new statement, so a new snapshot: it sees any tick committed before the lock came.
    INSERT INTO place.change_ticks (pos, snap, prev, ticked_at)
    SELECT coalesce(t.pos, s.kept_after) + 1, pg_catalog.pg_current_snapshot(),
           coalesce(t.snap, place._no_snapshot()), pg_catalog.clock_timestamp()
    FROM place.change_settings s
    LEFT JOIN LATERAL (SELECT * FROM place.change_ticks x ORDER BY x.pos DESC LIMIT 1) t ON true
    WHERE place._changed_since(coalesce(t.snap, place._no_snapshot()))
    RETURNING pos INTO made;
    IF made IS NULL THEN
        RETURN (SELECT max(t.pos) FROM place.change_ticks t);
    END IF;
    -- Keep the log bounded: every 1,000th position removes what is past its retention.
    IF made % 1000 = 0 THEN
        SELECT s.retention INTO retention FROM place.change_settings s;
        PERFORM place._prune_changes(pg_catalog.clock_timestamp() - retention);
    END IF;
    RETURN made;
END
$$;

-- Removes the positions made before `before` (the newest one stays, for the next tick to
-- follow) and the changes no later position can hold; returns how many positions.
CREATE OR REPLACE FUNCTION place._prune_changes(before timestamptz) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    last place.change_ticks;
    removed bigint;
BEGIN
    SELECT * INTO last FROM place.change_ticks t
    WHERE t.ticked_at < before AND t.pos < (SELECT max(x.pos) FROM place.change_ticks x)
    ORDER BY t.pos DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    -- Every transaction older than the xmin of the last removed snapshot has ended: its
    -- changes are in a removed position, or it rolled back.
    DELETE FROM place.changes c WHERE c.xid < pg_catalog.pg_snapshot_xmin(last.snap);
    DELETE FROM place.change_ticks t WHERE t.pos <= last.pos;
    GET DIAGNOSTICS removed = ROW_COUNT;
    INSERT INTO place.change_settings AS s (one, kept_after) VALUES (true, last.pos)
    ON CONFLICT (one) DO UPDATE SET kept_after = greatest(s.kept_after, EXCLUDED.kept_after);
    RETURN removed;
END
$$;

-- What both readers of the log (changes_since, change_feed) ask of their arguments: set,
-- at most `most` positions, and positions the log still holds the changes of (older ones
-- were pruned; restored ones never came). Restored positions are the oldest ones, so the
-- first position after after_pos says whether any is.
CREATE FUNCTION place._check_log_read(after_pos bigint, lim int, most int) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    kept bigint := (SELECT s.kept_after FROM place.change_settings s);
    restored bigint;
BEGIN
    IF after_pos IS NULL OR lim IS NULL THEN
        RAISE EXCEPTION 'after_pos and lim must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF lim < 1 OR lim > most THEN
        RAISE EXCEPTION 'lim must be between 1 and %, not %', most, lim USING ERRCODE = '22003';
    END IF;
    IF after_pos < coalesce(kept, 0) THEN
        RAISE EXCEPTION 'the change log no longer holds the positions after % (it keeps those after %)', after_pos, kept
            USING ERRCODE = '55000', HINT = 'Read the tables afresh; place.set_change_retention sets how long changes are kept.';
    END IF;
    SELECT f.pos INTO restored
    FROM (SELECT t.pos, t.snap FROM place.change_ticks t WHERE t.pos > after_pos ORDER BY t.pos LIMIT 1) f
    WHERE pg_catalog.pg_snapshot_xmax(f.snap) = '3'::xid8; -- place._no_snapshot()'s
    IF restored IS NOT NULL THEN
        RAISE EXCEPTION 'the change log does not hold the changes of position % (it was restored from a dump, which keeps positions but not their changes)', restored
            USING ERRCODE = '55000', HINT = 'Read the tables afresh, then read the positions after place.change_pos().';
    END IF;
END
$$;

-- One notification-shaped summary per position after `after_pos` (at most lim), for the
-- gateway: {"type":"changes","v":1,"pos":…,"at":…} with the changes themselves when they
-- are small, else the tables' oids (the gateway then reads every view of those tables).
-- Read by the gateway from the log, never taken from a notification.
CREATE FUNCTION place.change_feed(after_pos bigint, lim int DEFAULT 100)
RETURNS TABLE (pos bigint, payload text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM place._check_log_read(after_pos, lim, 1000);
    RETURN QUERY
    WITH staged AS (
        SELECT * FROM place._ticked_changes(after_pos, lim)
    ), sized AS (
        -- Measured before anything is put together: a transaction that changed a million
        -- rows must not be built into one value to find out that it does not fit.
        SELECT s.pos, sum(octet_length(s.rows::text)) < 60000 AS fits FROM staged s GROUP BY s.pos
    ), bodies AS (
        SELECT z.pos,
               CASE WHEN z.fits THEN
                   ',"changes":' || (SELECT jsonb_agg(jsonb_build_object(
                           'table', s.tbl::text, 'relid', s.tbl::oid::bigint, 'action', e.change ->> 0,
                           'key', e.change -> 1, 'obj', e.change -> 2, 'old', e.change -> 3)
                           ORDER BY s.n, e.ord)
                       FROM staged s, jsonb_array_elements(s.rows::jsonb) WITH ORDINALITY AS e(change, ord)
                       WHERE s.pos = z.pos)::text
               ELSE ',"relids":' || (SELECT jsonb_agg(DISTINCT s.tbl::oid::bigint) FROM staged s WHERE s.pos = z.pos)::text
               END AS body
        FROM sized z
    )
    -- A position whose changes were all pruned, or whose tables' rows all rolled back in
    -- savepoints, still has a summary (an empty one).
    SELECT t.pos, '{"type":"changes","v":1,"pos":' || t.pos || ',"at":'
                  || (extract(epoch FROM t.ticked_at) * 1000000)::bigint
                  || coalesce(b.body, ',"relids":[]') || '}'
    FROM (SELECT x.pos, x.ticked_at FROM place.change_ticks x WHERE x.pos > after_pos ORDER BY x.pos LIMIT lim) t
    LEFT JOIN bodies b ON b.pos = t.pos
    ORDER BY t.pos;
END
$$;

CREATE OR REPLACE FUNCTION place.kick(tbl regclass, pk jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    w place.watches;
    cond text;
    row_json jsonb;
    key jsonb;
    absent text;
BEGIN
    IF tbl IS NULL OR pk IS NULL THEN
        RAISE EXCEPTION 'tbl and pk must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO w FROM place.watches x WHERE x.tbl = kick.tbl;
    IF FOUND THEN
        PERFORM place._check_watchable(tbl, w.all_rows);
        PERFORM place._check_may_read(tbl);
    ELSE
        RAISE EXCEPTION 'table % is not watched', tbl
            USING ERRCODE = '55000', HINT = 'SELECT place.watch(''...''::regclass) first.';
    END IF;
    IF jsonb_typeof(pk) <> 'object' THEN
        RAISE EXCEPTION 'pk must be a JSON object of the key columns %, not %', w.key_columns, pk
            USING ERRCODE = '22023';
    END IF;
    SELECT string_agg(c, ', ') INTO absent FROM unnest(w.key_columns) c WHERE NOT pk ? c OR pk -> c = 'null';
    IF absent IS NOT NULL THEN
        RAISE EXCEPTION 'pk % lacks the key column(s) % of table %', pk, absent, tbl USING ERRCODE = '22023';
    END IF;
    SELECT string_agg(format('t.%I = ($1 ->> %L)::%s', c, c,
                             format_type(a.atttypid, a.atttypmod)), ' AND ')
    INTO cond
    FROM unnest(w.key_columns) c
    JOIN pg_catalog.pg_attribute a ON a.attrelid = tbl AND a.attname = c;
    EXECUTE format('SELECT to_jsonb(t) FROM ONLY %s t WHERE %s', tbl, cond) INTO row_json USING pk;
    IF row_json IS NULL THEN
        RAISE EXCEPTION 'table % has no row with key %', tbl, pk USING ERRCODE = 'P0002';
    END IF;
    key := place._pick(row_json, w.key_columns);
    INSERT INTO place.changes (xid, tbl, rows)
    VALUES (pg_catalog.pg_current_xact_id(), tbl,
            jsonb_build_array(jsonb_build_array('update', key, place._pick(row_json, w.columns),
                                                place._pick(row_json, w.columns)))::json);
END
$$;

CREATE OR REPLACE FUNCTION place.changes_since(after_pos bigint, lim int DEFAULT 1000)
RETURNS TABLE (pos bigint, committed_at timestamptz, tbl regclass, action text, key jsonb, obj jsonb, old jsonb)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM place._check_log_read(after_pos, lim, 100000);
    RETURN QUERY
    SELECT c.pos, c.ticked_at, c.tbl, e.change ->> 0, e.change -> 1, e.change -> 2, e.change -> 3
    FROM place._ticked_changes(after_pos, lim) c
    CROSS JOIN LATERAL jsonb_array_elements(c.rows::jsonb) WITH ORDINALITY AS e(change, ord)
    ORDER BY c.pos, c.n, e.ord;
END
$$;

-- Keeps _check_watchable true of every watched table that a DDL command changed (a column
-- added or retyped, row-level security turned on, a rule): the command fails instead.
CREATE OR REPLACE FUNCTION place._guard_watched_tables() RETURNS event_trigger
LANGUAGE plpgsql AS $$
DECLARE
    w record;
    gone text;
BEGIN
    FOR w IN SELECT x.tbl, x.all_rows, x.key_columns, x.columns FROM place.watches x
             WHERE x.tbl::oid IN (SELECT d.objid FROM pg_catalog.pg_event_trigger_ddl_commands() d
                                  WHERE d.classid = 'pg_catalog.pg_class'::regclass
                                  UNION ALL
                                  SELECT r.ev_class FROM pg_catalog.pg_event_trigger_ddl_commands() d
                                  JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
                                  WHERE d.classid = 'pg_catalog.pg_rewrite'::regclass)
    LOOP
        PERFORM place._check_watchable(w.tbl, w.all_rows);
        -- A watched column dropped or renamed would leave the capture trigger without it:
        -- refused, rather than silently logged without it.
        SELECT string_agg(quote_ident(c), ', ') INTO gone
        FROM unnest(w.key_columns || coalesce(w.columns, '{}')) AS c
        WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
                          WHERE a.attrelid = w.tbl AND a.attname = c AND a.attnum > 0 AND NOT a.attisdropped);
        IF gone IS NOT NULL THEN
            RAISE EXCEPTION 'table % is watched with column(s) % that this command drops or renames', w.tbl, gone
                USING ERRCODE = '2BP01',
                      HINT = 'Watch the table without them first (SELECT place.watch(tbl, columns)), or unwatch it.';
        END IF;
    END LOOP;
END
$$;

-- The newest position this snapshot sees: every transaction of the positions up to it is
-- visible to it (they were visible to the tick that made it), maybe more that no position
-- holds yet.
CREATE OR REPLACE FUNCTION place.change_pos() RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT max(t.pos) FROM place.change_ticks t),
                    (SELECT s.kept_after FROM place.change_settings s), 0)
$$;

COMMENT ON FUNCTION place.watch(regclass, text[], boolean) IS
    'Logs every committed INSERT, UPDATE and DELETE of a table you own (its primary key, and the given columns of the new and old row; all when NULL) in place.changes, at positions in commit order (place.tick). A table with row-level security only with all_rows => true.';
COMMENT ON FUNCTION place.changes_since(bigint, int) IS
    'The logged changes after a change log position (at most lim positions): whole transactions, positions in commit order, the changes of one row in the order they were made.';
COMMENT ON FUNCTION place.change_pos() IS
    'The newest change log position this snapshot sees (0 before any): it sees every transaction of the positions up to it.';
COMMENT ON FUNCTION place.tick() IS
    'Gives the transactions that changed watched tables and committed since the last position the next one, if there are any; returns the newest position. The gateway calls it every few milliseconds.';
COMMENT ON FUNCTION place.change_feed(bigint, int) IS
    'For the gateway: each position after after_pos (at most lim) with its changes as JSON, or the oids of its tables when they are large.';

-- CREATE OR REPLACE reset what these run as.
ALTER FUNCTION place.kick(regclass, jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET pgplace.log_writer = on;
ALTER FUNCTION place._guard_watched_tables()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place._capture_changes() SECURITY DEFINER;
ALTER FUNCTION place.tick()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off SET jit = off
    SET pgplace.log_writer = on;
ALTER FUNCTION place.change_feed(bigint, int) SET enable_seqscan = off SET jit = off;
ALTER FUNCTION place.changes_since(bigint, int) SET enable_seqscan = off SET jit = off;
REVOKE EXECUTE ON FUNCTION place.tick() FROM PUBLIC;
