-- Watching any table: every committed INSERT, UPDATE and DELETE of a watched table is
-- written to a change log, and positions in it are given in commit order (README, "The
-- change feed").
--
-- The design is PgQ's (Skytools), made cheaper and trusting nobody:
-- - Writers only stage. A statement-level trigger on the watched table (place._capture_changes,
--   extension/src/capture.rs) inserts the statement's rows into place.changes (one row per
--   statement, or per 1,000 rows of one), stamped with the writer's transaction id and a
--   number from place.change_n_seq. Nothing
--   is locked, counted, announced or done at commit: a watched write costs one more row,
--   and writers never wait for each other because of the feed.
-- - Positions are ticks. place.tick() (the gateway calls it every few milliseconds; a SQL
--   user may too) records the snapshot of its statement as the next position when a
--   transaction that staged changes committed since the last tick. Position p holds the
--   transactions visible in tick p's snapshot and not in tick p-1's: whole transactions,
--   and every one of them committed after every transaction of the positions before p
--   became visible. Within a position, changes are in the order they were staged (their
--   numbers), so two changes of one row are in the order of their commits (the second writer
--   waited for the first one's row lock, and staged after it).
-- - Ticks take turns on a row of place.change_settings (a row lock only pgplace's
--   functions can take; a ticker that finds it taken leaves the tick to the other one),
--   and a tick that finds nothing new writes nothing.
-- Rolled-back work is never in a snapshot; a prepared transaction joins the position of
-- the tick after its COMMIT PREPARED; deferred constraints and every isolation level work
-- as on any table, as nothing of the feed runs at commit.

-- Which tables are watched: their key columns and the columns that are announced.
CREATE TABLE place.watches (
    tbl         regclass PRIMARY KEY,
    key_columns text[] NOT NULL,
    -- NULL: every column.
    columns     text[],
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- The table has row-level security and the DBA said that every row of it may be shown
    -- to every client all the same (place.watch(..., all_rows => true)).
    all_rows    boolean NOT NULL DEFAULT false
);
COMMENT ON TABLE place.watches IS 'Tables whose committed changes pgplace announces (place.watch)';

-- The order in which changes were staged (a sequence: writers share no row).
CREATE SEQUENCE place.change_n_seq;

-- The log's settings: one row, made when first needed (not by this script: pg_dump keeps
-- the row, and a restore must not find one there already). Tickers take turns on it.
CREATE TABLE place.change_settings (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    -- Positions made longer ago than this are removed from the log.
    retention interval NOT NULL DEFAULT '1 day' CHECK (retention > interval '0'),
    -- The log holds the positions after this one (older ones were removed).
    kept_after bigint NOT NULL DEFAULT 0 CHECK (kept_after >= 0)
);
COMMENT ON TABLE place.change_settings IS 'The change log''s retention, and the positions it still holds';

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

SELECT pg_catalog.pg_extension_config_dump('place.watches', '');
SELECT pg_catalog.pg_extension_config_dump('place.change_settings', '');
SELECT pg_catalog.pg_extension_config_dump('place.change_n_seq', '');
SELECT pg_catalog.pg_extension_config_dump('place.changes', '');
SELECT pg_catalog.pg_extension_config_dump('place.change_ticks', '');

-- Restoring a dump of 0.7.0 or before (pg_dump writes CREATE EXTENSION without a version,
-- then the old log's rows): the old log's changes come to place.changes (their columns
-- are these) and are dropped there, its commits become positions whose changes were not
-- kept (as every restored position: place._restore_tick), and its sequence is set and not
-- used again. New positions go on after the old ones.
CREATE SEQUENCE place.change_pos_seq;
COMMENT ON SEQUENCE place.change_pos_seq IS 'Only what a dump of pgplace 0.7.0 or before sets; unused';
SELECT pg_catalog.pg_extension_config_dump('place.change_pos_seq', '');
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

-- A row's columns as an object: all of them (cols NULL) or the named ones.
CREATE FUNCTION place._pick(r jsonb, cols text[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN cols IS NULL THEN r
                ELSE (SELECT pg_catalog.jsonb_object_agg(c, r -> c) FROM pg_catalog.unnest(cols) AS c)
           END
$$;

-- The snapshot before the first position: no transaction is visible in it.
CREATE FUNCTION place._no_snapshot() RETURNS pg_snapshot
LANGUAGE sql IMMUTABLE AS $$ SELECT '3:3:'::pg_catalog.pg_snapshot $$;

-- Whether a transaction not visible in `prev` has staged changes that this statement's
-- snapshot sees committed. The transactions not visible in `prev` are those from its xmax
-- on and those in progress when it was taken (its xip): an index range and index lookups,
-- whatever `prev`'s xmin is. (Its xmin can be far behind: any login that holds a
-- transaction id holds every snapshot's xmin back, and a range from xmin would read every
-- change staged since.) The in-progress list is an array the index looks up (`= ANY`): as
-- a joined set, the planner hashed it against the whole log. Reads only. What it still
-- reads in vain: the changes of a transaction that began after `prev` and is still open,
-- until the next position (index entries of uncommitted rows are visited one by one).
-- PL/pgSQL, so that a session plans it once: a SQL function is planned on every call,
-- which was most of an idle tick's time (0.8.12).
CREATE FUNCTION place._changed_since(prev pg_snapshot) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT FROM place.changes c
                   WHERE c.xid >= pg_catalog.pg_snapshot_xmax(prev)
                     -- The caller's own transaction's, not yet committed, wait for it.
                     AND pg_catalog.pg_visible_in_snapshot(c.xid, pg_catalog.pg_current_snapshot()))
        -- Of the in-progress list, only the transactions that have committed since are
        -- looked up: one still open may have staged any number of changes, which would be
        -- read (and found invisible) on every tick.
        OR EXISTS (SELECT FROM place.changes c
                   WHERE c.xid = ANY (ARRAY(SELECT x FROM pg_catalog.pg_snapshot_xip(prev) x
                                            WHERE pg_catalog.pg_visible_in_snapshot(x, pg_catalog.pg_current_snapshot()))));
END
$$;

-- The changes of the positions after `after_pos` (at most lim positions), in order. A
-- position's transactions are those visible in its snapshot and not in the one before:
-- from the one before's xmax on, or in its xip (as place._changed_since).
CREATE FUNCTION place._ticked_changes(after_pos bigint, lim int)
RETURNS TABLE (pos bigint, ticked_at timestamptz, n bigint, tbl regclass, rows json)
LANGUAGE sql STABLE AS $$
    SELECT t.pos, t.ticked_at, c.n, c.tbl, c.rows
    FROM (SELECT * FROM place.change_ticks x WHERE x.pos > after_pos ORDER BY x.pos LIMIT lim) t
    CROSS JOIN LATERAL (
        SELECT c.n, c.tbl, c.rows FROM place.changes c
        WHERE c.xid >= pg_catalog.pg_snapshot_xmax(t.prev) AND c.xid < pg_catalog.pg_snapshot_xmax(t.snap)
          AND pg_catalog.pg_visible_in_snapshot(c.xid, t.snap)
        UNION ALL
        SELECT c.n, c.tbl, c.rows FROM place.changes c
        WHERE c.xid = ANY (ARRAY(SELECT pg_catalog.pg_snapshot_xip(t.prev)))
          AND pg_catalog.pg_visible_in_snapshot(c.xid, t.snap)
    ) c
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
CREATE FUNCTION place._prune_changes(before timestamptz) RETURNS bigint
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
    -- Every transaction visible in the last removed snapshot has ended: its changes are in
    -- a removed position, or it rolled back. (Not only those below its xmin: a transaction
    -- that any login holds open would keep every change staged after it.)
    DELETE FROM place.changes c
    WHERE c.xid < pg_catalog.pg_snapshot_xmax(last.snap) AND pg_catalog.pg_visible_in_snapshot(c.xid, last.snap);
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

-- One summary per position after `after_pos` (at most lim), for the gateway:
-- {"type":"changes","v":1,"pos":…,"at":…} with the changes themselves when they are small,
-- "staged":[{"relid":…,"table":…,"rows":[[action, key, obj, old], …]}, …] in the order
-- they were made, else the tables' oids, "relids":[…] (the gateway then reads every view
-- of those tables). Read by the gateway from the log, never taken from a notification.
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
        -- The staged rows as pgplace wrote them (capture.rs makes their JSON), set side by
        -- side as text: taking them apart and building objects again cost this reader
        -- 7 µs a changed row, on the cores the writers need.
        SELECT z.pos,
               CASE WHEN z.fits THEN
                   ',"staged":[' || (SELECT string_agg('{"relid":' || s.tbl::oid || ',"table":'
                           || pg_catalog.to_json(s.tbl::text) || ',"rows":' || s.rows::text || '}', ',' ORDER BY s.n)
                       FROM staged s WHERE s.pos = z.pos) || ']'
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

-- The public API ------------------------------------------------------------------------

-- The entry points that authorize their caller are C functions that run as the caller and
-- call the bodies below as the extension's owner, naming the caller (extension/src/callers.rs):
-- a SECURITY DEFINER function cannot tell who called it, and the login (session_user) may
-- not be who did.
CREATE FUNCTION place.watch(tbl regclass, columns text[] DEFAULT NULL, all_rows boolean DEFAULT false)
RETURNS void VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'watch_wrapper';
CREATE FUNCTION place.unwatch(tbl regclass) RETURNS boolean VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'unwatch_wrapper';
CREATE FUNCTION place.kick(tbl regclass, pk jsonb) RETURNS void VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'kick_wrapper';

-- place.watch's body, for `caller`.
CREATE FUNCTION place._watch(caller regrole, tbl regclass, columns text[], all_rows boolean)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    keys text[];
    missing text;
    wanted text[];
BEGIN
    IF tbl IS NULL OR all_rows IS NULL THEN
        RAISE EXCEPTION 'tbl and all_rows must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM place._check_watchable(tbl, all_rows);
    -- Locked by its OID before anything below names it: a rename now waits, so the name
    -- each statement below is given is this table's.
    PERFORM place._lock_table(tbl);
    -- Again, now that no DDL can change the table until this transaction ends.
    PERFORM place._check_watchable(tbl, all_rows);
    PERFORM place._check_owns(tbl, caller);
    IF (SELECT relnamespace FROM pg_catalog.pg_class WHERE oid = tbl) = 'place'::regnamespace THEN
        RAISE EXCEPTION 'pgplace''s own table % cannot be watched (boards announce their placements already)', tbl
            USING ERRCODE = '22023';
    END IF;
    SELECT array_agg(a.attname::text ORDER BY k.ord) INTO keys
    FROM pg_catalog.pg_index i
    CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
    JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
    WHERE i.indrelid = tbl AND i.indisprimary;
    IF keys IS NULL THEN
        RAISE EXCEPTION 'table % has no primary key, so its rows cannot be named in announcements', tbl
            USING ERRCODE = '55000', HINT = 'Add a primary key (ALTER TABLE ... ADD PRIMARY KEY), then watch it.';
    END IF;
    IF columns IS NOT NULL THEN
        IF array_position(columns, NULL) IS NOT NULL THEN
            RAISE EXCEPTION 'columns must not contain NULL' USING ERRCODE = '22004';
        END IF;
        IF cardinality(columns) = 0 THEN
            RAISE EXCEPTION 'columns must name at least one column (NULL watches them all)'
                USING ERRCODE = '22023';
        END IF;
        SELECT string_agg(quote_literal(c), ', ') INTO missing
        FROM unnest(columns) AS c
        WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
                          WHERE a.attrelid = tbl AND a.attname = c AND a.attnum > 0 AND NOT a.attisdropped);
        IF missing IS NOT NULL THEN
            RAISE EXCEPTION 'table % has no column %', tbl, missing USING ERRCODE = '42703';
        END IF;
        SELECT array_agg(DISTINCT c ORDER BY c) INTO wanted FROM unnest(columns) AS c;
    END IF;
    PERFORM place._drop_watch_triggers(tbl);
    EXECUTE format('CREATE TRIGGER pgplace_watch_insert AFTER INSERT ON %s REFERENCING NEW TABLE AS pgplace_new '
                   'FOR EACH STATEMENT EXECUTE FUNCTION place._capture_changes(%L, %L)',
                   tbl, keys, coalesce(wanted::text, ''));
    EXECUTE format('CREATE TRIGGER pgplace_watch_update AFTER UPDATE ON %s REFERENCING OLD TABLE AS pgplace_old NEW TABLE AS pgplace_new '
                   'FOR EACH STATEMENT EXECUTE FUNCTION place._capture_changes(%L, %L)',
                   tbl, keys, coalesce(wanted::text, ''));
    EXECUTE format('CREATE TRIGGER pgplace_watch_delete AFTER DELETE ON %s REFERENCING OLD TABLE AS pgplace_old '
                   'FOR EACH STATEMENT EXECUTE FUNCTION place._capture_changes(%L, %L)',
                   tbl, keys, coalesce(wanted::text, ''));
    EXECUTE format('CREATE TRIGGER pgplace_watch_truncate AFTER TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION place._capture_changes(%L, %L)',
                   tbl, keys, coalesce(wanted::text, ''));
    -- Changes applied by logical replication (session_replication_role = replica) too.
    EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER pgplace_watch_insert, '
                   'ENABLE ALWAYS TRIGGER pgplace_watch_update, ENABLE ALWAYS TRIGGER pgplace_watch_delete, '
                   'ENABLE ALWAYS TRIGGER pgplace_watch_truncate', tbl);
    INSERT INTO place.watches (tbl, key_columns, columns, all_rows) VALUES (tbl, keys, wanted, all_rows)
    ON CONFLICT ON CONSTRAINT watches_pkey
    DO UPDATE SET key_columns = EXCLUDED.key_columns, columns = EXCLUDED.columns, all_rows = EXCLUDED.all_rows;
    -- The views over the table must still hold with the new columns.
    UPDATE place.views v SET (query, touch_always) =
        (SELECT p.select_sql, p.touch_always
         FROM place._prepare_view(v.name, v.tbl, v.order_by, v.filter, v.descending, v.created_by) p)
    WHERE v.tbl = _watch.tbl;
END
$$;

-- The functions that watch a table or show its rows run as the extension's owner: the
-- role that called them (the role its code runs as: callers.rs) must be able to read the
-- table itself, or a view would hand them rows they may not see.
CREATE FUNCTION place._check_may_read(tbl regclass, caller regrole) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT pg_catalog.has_table_privilege(caller, tbl, 'SELECT') THEN
        RAISE EXCEPTION 'permission denied: % may not read table %', caller, tbl
            USING ERRCODE = '42501', HINT = 'Only a role that may SELECT from a table can watch it or show it in a view.';
    END IF;
END
$$;

-- Watching adds triggers that every writer of the table runs (ENABLE ALWAYS, which only an
-- owner may set), and publishes the rows: it takes what PostgreSQL asks of ALTER TABLE,
-- the table's ownership (being a member of the role that owns it, or a superuser).
CREATE FUNCTION place._check_owns(tbl regclass, caller regrole) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    owner regrole := (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tbl);
BEGIN
    IF NOT pg_catalog.pg_has_role(caller, owner, 'USAGE') THEN
        RAISE EXCEPTION 'permission denied: % does not own table % (its owner is %)', caller, tbl, owner
            USING ERRCODE = '42501', HINT = 'Only the owner of a table (or a member of the role that owns it) can watch or unwatch it.';
    END IF;
END
$$;

-- What pgplace asks of a table before it reads its rows with its owner's rights (the
-- capture trigger, kick, view_rows, views_touched, all SECURITY DEFINER). Those turn rows
-- into JSON and back, compare and filter them: with a column of a type that a user made
-- (an enum, a domain, a composite or range type) that would run the user's casts to json,
-- domain CHECKs or I/O as the extension's owner - a superuser. Only the types built into
-- PostgreSQL (made by initdb: oids below 16384, FirstNormalObjectId) run no code a user
-- wrote. The event trigger below keeps this true after ALTER TABLE; the readers check it
-- again before they read. A table with row-level security would have every row shown to
-- every client: refused unless the DBA said so (all_rows).
CREATE FUNCTION place._check_watchable(tbl regclass, all_rows boolean) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    c record;
    bad text;
BEGIN
    SELECT x.relkind, x.relispartition, x.relrowsecurity, x.relpersistence INTO c
    FROM pg_catalog.pg_class x WHERE x.oid = tbl;
    IF NOT FOUND OR c.relkind <> 'r' THEN
        RAISE EXCEPTION '% is not an ordinary table (only tables can be watched)', tbl
            USING ERRCODE = '42809';
    END IF;
    -- A temporary table is its session's alone (and in pg_temp, which is on every search
    -- path pgplace pins): nothing another session could serve.
    IF c.relpersistence = 't' THEN
        RAISE EXCEPTION '% is a temporary table, which cannot be watched', tbl
            USING ERRCODE = '0A000', HINT = 'Watch a permanent table (an unlogged one will do).';
    END IF;
    IF c.relispartition OR EXISTS (SELECT FROM pg_catalog.pg_inherits i WHERE i.inhrelid = tbl) THEN
        RAISE EXCEPTION '% is a partition or an inheritance child: changes made through its parent would not be announced', tbl
            USING ERRCODE = '0A000', HINT = 'Watch ordinary tables that are written directly.';
    END IF;
    SELECT string_agg(format('%I %s', a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
    INTO bad
    FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid >= 16384;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'table % has columns whose types are not built into PostgreSQL: %', tbl, bad
            USING ERRCODE = '0A000',
                  HINT = 'pgplace reads watched rows with its owner''s rights, so it never runs code a user wrote for a type (casts, domain checks). Use built-in types: text with a CHECK constraint instead of an enum or a domain.';
    END IF;
    IF c.relrowsecurity AND NOT all_rows THEN
        RAISE EXCEPTION 'table % has row-level security, but pgplace would show every row of it to every client', tbl
            USING ERRCODE = '42501',
                  HINT = 'If every row may be shown to anyone: SELECT place.watch(tbl, columns, all_rows => true).';
    END IF;
END
$$;

-- Keeps _check_watchable true of every watched table after a DDL command (a column added
-- or retyped, row-level security turned on, a rule, a typed table's type altered, a table
-- attached as a partition): the command fails instead. The capture trigger checks the
-- column types again on every statement all the same (extension/src/capture.rs).
CREATE FUNCTION place._guard_watched_tables() RETURNS event_trigger
LANGUAGE plpgsql AS $$
DECLARE
    w record;
    gone text;
BEGIN
    -- The watched tables the command reached, which are more than it names: the partitions
    -- and children of a table it names (a column added to a partitioned table, a table
    -- attached as a partition), the typed tables of a type it names (ALTER TYPE ... CASCADE),
    -- the table of a rule.
    FOR w IN WITH RECURSIVE
                 named AS (SELECT d.classid, d.objid FROM pg_catalog.pg_event_trigger_ddl_commands() d),
                 reached(relid) AS (
                     SELECT n.objid FROM named n WHERE n.classid = 'pg_catalog.pg_class'::regclass
                     UNION ALL
                     SELECT r.ev_class FROM named n JOIN pg_catalog.pg_rewrite r ON r.oid = n.objid
                     WHERE n.classid = 'pg_catalog.pg_rewrite'::regclass
                     UNION ALL
                     SELECT c.oid FROM named n JOIN pg_catalog.pg_class c ON c.reloftype = n.objid
                     WHERE n.classid = 'pg_catalog.pg_type'::regclass
                     UNION
                     SELECT i.inhrelid FROM reached r JOIN pg_catalog.pg_inherits i ON i.inhparent = r.relid)
             SELECT x.tbl, x.all_rows, x.key_columns, x.columns FROM place.watches x
             WHERE x.tbl::oid IN (SELECT relid FROM reached)
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
CREATE EVENT TRIGGER pgplace_guard_watched_tables ON ddl_command_end
WHEN TAG IN ('ALTER TABLE', 'ALTER TYPE', 'CREATE RULE')
EXECUTE FUNCTION place._guard_watched_tables();
-- Also while changes are replicated in (session_replication_role = replica).
ALTER EVENT TRIGGER pgplace_guard_watched_tables ENABLE ALWAYS;

-- A dropped table leaves no watch and no view behind (their rows name it by OID, which a
-- new relation could be given some day). The views' trigger tells the gateways.
CREATE FUNCTION place._forget_dropped_tables() RETURNS event_trigger
LANGUAGE plpgsql AS $$
DECLARE
    dropped oid[];
BEGIN
    SELECT array_agg(d.objid) INTO dropped
    FROM pg_catalog.pg_event_trigger_dropped_objects() d
    WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.objsubid = 0;
    IF dropped IS NOT NULL THEN
        DELETE FROM place.views v WHERE v.tbl::oid = ANY (dropped);
        DELETE FROM place.watches w WHERE w.tbl::oid = ANY (dropped);
    END IF;
END
$$;
CREATE EVENT TRIGGER pgplace_forget_dropped_tables ON sql_drop
WHEN TAG IN ('DROP TABLE', 'DROP SCHEMA', 'DROP OWNED', 'DROP TYPE')
EXECUTE FUNCTION place._forget_dropped_tables();
ALTER EVENT TRIGGER pgplace_forget_dropped_tables ENABLE ALWAYS;

-- Every capture trigger of the table, found by its function: a table's owner may have
-- renamed one, and a renamed one left behind would go on logging the table's changes.
CREATE FUNCTION place._drop_watch_triggers(tbl regclass) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t name;
BEGIN
    FOR t IN SELECT tgname FROM pg_catalog.pg_trigger
             WHERE tgrelid = tbl AND tgfoid = 'place._capture_changes()'::pg_catalog.regprocedure
    LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', t, tbl);
    END LOOP;
END
$$;

-- place.unwatch's body, for `caller`.
CREATE FUNCTION place._unwatch(caller regrole, tbl regclass) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    dependent text;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'tbl must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT string_agg(quote_literal(v.name), ', ' ORDER BY v.name) INTO dependent
    FROM place.views v WHERE v.tbl = _unwatch.tbl;
    IF dependent IS NOT NULL THEN
        RAISE EXCEPTION 'views % show table %: drop them first', dependent, tbl
            USING ERRCODE = '2BP01', HINT = 'SELECT place.drop_view(name) for each of them.';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_class WHERE oid = tbl) THEN
        PERFORM place._check_owns(tbl, caller);
        IF EXISTS (SELECT FROM place.watches w WHERE w.tbl = _unwatch.tbl) THEN
            PERFORM place._lock_table(tbl);
        END IF;
        PERFORM place._drop_watch_triggers(tbl);
    END IF;
    DELETE FROM place.watches w WHERE w.tbl = _unwatch.tbl;
    RETURN FOUND;
END
$$;

CREATE FUNCTION place.watched()
RETURNS TABLE (tbl regclass, key_columns text[], columns text[], views text[], created_at timestamptz,
               all_rows boolean)
LANGUAGE sql STABLE AS $$
    SELECT w.tbl, w.key_columns, w.columns,
           coalesce((SELECT array_agg(v.name ORDER BY v.name) FROM place.views v WHERE v.tbl = w.tbl), '{}'),
           w.created_at, w.all_rows
    FROM place.watches w
    ORDER BY w.tbl::text
$$;

-- place.kick's body, for `caller`.
CREATE FUNCTION place._kick(caller regrole, tbl regclass, pk jsonb) RETURNS void
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
    SELECT * INTO w FROM place.watches x WHERE x.tbl = _kick.tbl;
    IF FOUND THEN
        PERFORM place._check_watchable(tbl, w.all_rows);
        PERFORM place._check_may_read(tbl, caller);
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
    row_json := place._read_as_owner(tbl, 'SELECT to_jsonb(t) FROM ONLY ', format(' t WHERE %s', cond), pk);
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

CREATE FUNCTION place.changes_since(after_pos bigint, lim int DEFAULT 1000)
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

-- The newest position this snapshot sees: every transaction of the positions up to it is
-- visible to it (they were visible to the tick that made it), maybe more that no position
-- holds yet.
CREATE FUNCTION place.change_pos() RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT max(t.pos) FROM place.change_ticks t),
                    (SELECT s.kept_after FROM place.change_settings s), 0)
$$;

CREATE FUNCTION place.set_change_retention(retention interval) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF retention IS NULL THEN
        RAISE EXCEPTION 'retention must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF retention <= interval '0' OR retention > interval '3660 days' THEN
        RAISE EXCEPTION 'retention must be more than 0 and at most 3660 days, not %', retention
            USING ERRCODE = '22003';
    END IF;
    INSERT INTO place.change_settings AS c (one, retention) VALUES (true, set_change_retention.retention)
    ON CONFLICT (one) DO UPDATE SET retention = EXCLUDED.retention;
END
$$;
