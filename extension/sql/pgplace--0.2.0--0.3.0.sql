-- pgplace 0.2.0 -> 0.3.0 (ALTER EXTENSION pgplace UPDATE): watching any table (the change
-- log, watch/unwatch/kick) and named list views for the gateway.
-- Checked by tests/upgrade/run.sh: an updated database must be exactly a fresh 0.3.0.
\echo Use "ALTER EXTENSION pgplace UPDATE" to load this file. \quit

CREATE FUNCTION place._is_one_expression("text" text) RETURNS bool
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', '_is_one_expression_wrapper';

-- watch.sql
-- Watching any table: every committed INSERT, UPDATE and DELETE of a watched table is
-- written to a change log and announced on channel 'pgplace' (README, "Watching tables").
--
-- Why two steps. A statement-level trigger on the watched table stages the statement's
-- changes (place.changes, one row per statement, keyed by transaction and statement
-- number). At commit, a deferred constraint trigger gives the transaction its position
-- (place.change_commits.pos, from place.change_pos_seq) under an advisory lock held until
-- the commit ends, and sends the notification. Positions therefore grow in commit order
-- (a transaction sees the commits with smaller positions as soon as it sees its own), yet
-- writers of watched tables wait for each other only from their commit's start to its
-- end - the window in which NOTIFY serializes them anyway - not from their first change
-- on. An advisory lock and a sequence, not a counter row: updating one row from every
-- commit would fail concurrent REPEATABLE READ and SERIALIZABLE writers with 40001. A
-- position is skipped only when a transaction fails after taking it (a serialization
-- failure at commit): readers treat a skipped position as "read everything again".

-- Which tables are watched: their key columns and the columns that are announced.
CREATE TABLE place.watches (
    tbl         regclass PRIMARY KEY,
    key_columns text[] NOT NULL,
    -- NULL: every column.
    columns     text[],
    created_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE place.watches IS 'Tables whose committed changes pgplace announces (place.watch)';

-- The positions handed out (taken only under the commit lock, see above).
CREATE SEQUENCE place.change_pos_seq;

-- The log's settings: one row, made when first needed (not by this script: pg_dump keeps
-- the row, and a restore must not find one there already).
CREATE TABLE place.change_settings (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    -- Changes committed longer ago than this are removed from the log.
    retention interval NOT NULL DEFAULT '1 day' CHECK (retention > interval '0'),
    -- The log holds the positions after this one (older ones were removed).
    kept_after bigint NOT NULL DEFAULT 0 CHECK (kept_after >= 0)
);
COMMENT ON TABLE place.change_settings IS 'The change log''s retention, and the positions it still holds';

-- The staged changes: one row per statement (or per 1,000 rows of one) on a watched table.
-- rows: [[action, key, obj, old], ...] with action insert/update/delete/truncate.
CREATE TABLE place.changes (
    xid  xid8 NOT NULL,
    n    int NOT NULL,
    tbl  regclass NOT NULL,
    rows jsonb NOT NULL,
    PRIMARY KEY (xid, n)
);
COMMENT ON TABLE place.changes IS 'Changes of watched tables, per statement; place.change_commits says when each committed';

-- One row per commit (or per flush, with SET CONSTRAINTS ALL IMMEDIATE) that changed a
-- watched table: its position and the statements it covers.
CREATE TABLE place.change_commits (
    pos          bigint PRIMARY KEY,
    xid          xid8 NOT NULL,
    first_n      int NOT NULL,
    last_n       int NOT NULL,
    committed_at timestamptz NOT NULL
);
CREATE INDEX change_commits_committed_at_idx ON place.change_commits (committed_at);
COMMENT ON TABLE place.change_commits IS 'The change log''s positions, in commit order';

SELECT pg_catalog.pg_extension_config_dump('place.watches', '');
SELECT pg_catalog.pg_extension_config_dump('place.change_settings', '');
SELECT pg_catalog.pg_extension_config_dump('place.change_pos_seq', '');
SELECT pg_catalog.pg_extension_config_dump('place.changes', '');
SELECT pg_catalog.pg_extension_config_dump('place.change_commits', '');

-- A row's columns as an object: all of them (cols NULL) or the named ones.
CREATE FUNCTION place._pick(r jsonb, cols text[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN cols IS NULL THEN r
                ELSE (SELECT pg_catalog.jsonb_object_agg(c, r -> c) FROM pg_catalog.unnest(cols) AS c)
           END
$$;

-- The next statement number of this transaction (set_config with is_local: forgotten at
-- the transaction's end, and taken back with a rolled-back savepoint like the rows).
CREATE FUNCTION place._next_change_n(count int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int := coalesce(nullif(pg_catalog.current_setting('pgplace.change_n', true), '')::int, 0);
BEGIN
    PERFORM pg_catalog.set_config('pgplace.change_n', (n + count)::text, true);
    RETURN n + 1;
END
$$;

-- Stages one statement's changes. TG_ARGV: key columns, watched columns ('' = all).
-- The statement's rows go in chunks of 1,000 so that no staged row grows without bound.
CREATE FUNCTION place._capture_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    keys text[] := TG_ARGV[0]::text[];
    cols text[] := nullif(TG_ARGV[1], '')::text[];
    staged jsonb[];
    first int;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(chunk) INTO staged FROM (
            SELECT jsonb_agg(jsonb_build_array('insert', place._pick(r, keys), place._pick(r, cols), NULL)) AS chunk
            FROM (SELECT to_jsonb(t) AS r, row_number() OVER () - 1 AS i FROM pgplace_new t) s
            GROUP BY i / 1000) c;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(chunk) INTO staged FROM (
            SELECT jsonb_agg(jsonb_build_array('delete', place._pick(r, keys), NULL, place._pick(r, cols))) AS chunk
            FROM (SELECT to_jsonb(t) AS r, row_number() OVER () - 1 AS i FROM pgplace_old t) s
            GROUP BY i / 1000) c;
    ELSIF TG_OP = 'UPDATE' THEN
        -- Old and new rows meet by key; a row whose key changed left under its old key and
        -- came under its new one. Nothing watched changed: nothing to announce.
        SELECT array_agg(chunk) INTO staged FROM (
            SELECT jsonb_agg(jsonb_build_array(
                       CASE WHEN o.k IS NULL THEN 'insert' WHEN nw.k IS NULL THEN 'delete' ELSE 'update' END,
                       coalesce(nw.k, o.k), nw.obj, o.obj)) AS chunk
            FROM (SELECT place._pick(r, keys) AS k, place._pick(r, cols) AS obj,
                         row_number() OVER () - 1 AS i
                  FROM (SELECT to_jsonb(t) AS r FROM pgplace_old t) s) o
            FULL JOIN (SELECT place._pick(r, keys) AS k, place._pick(r, cols) AS obj,
                              row_number() OVER () - 1 AS i
                       FROM (SELECT to_jsonb(t) AS r FROM pgplace_new t) s) nw ON o.k = nw.k
            -- As text: jsonb equality would call 1.0 and 1.000 the same number.
            WHERE o.obj::text IS DISTINCT FROM nw.obj::text
            GROUP BY coalesce(nw.i, o.i) / 1000) c;
    ELSE
        staged := ARRAY['[["truncate", null, null, null]]'::jsonb];
    END IF;
    IF staged IS NULL THEN
        RETURN NULL;
    END IF;
    first := place._next_change_n(pg_catalog.array_length(staged, 1));
    INSERT INTO place.changes (xid, n, tbl, rows)
    SELECT pg_catalog.pg_current_xact_id(), first + i - 1, TG_RELID, staged[i]
    FROM pg_catalog.generate_subscripts(staged, 1) AS i;
    RETURN NULL;
END
$$;

-- The body of one commit's notification (what follows its position): the changes
-- themselves when they fit in one payload, else the tables' oids (a reference: the
-- listener reads the changes with place.changes_since). Made before the commit takes its
-- position, so that the part of the commit that writers of watched tables go through one
-- at a time stays short.
CREATE FUNCTION place._change_payload_body(x xid8, first_n int, last_n int)
RETURNS text
LANGUAGE sql STABLE AS $$
    WITH staged AS (
        SELECT c.n, c.tbl, c.rows FROM place.changes c
        WHERE c.xid = x AND c.n BETWEEN first_n AND last_n
    ), small AS (
        -- Measured before anything is put together: a transaction that changed a million
        -- rows must not build them into one value to find out that they do not fit.
        SELECT sum(octet_length(s.rows::text)) < 7000 AS fits FROM staged s
    ), c AS (
        SELECT s.n, s.tbl, e.ord, e.change
        FROM staged s, small, jsonb_array_elements(s.rows) WITH ORDINALITY AS e(change, ord)
        WHERE small.fits
    ), inline AS (
        SELECT ',"changes":' || jsonb_agg(jsonb_build_object(
                   'table', c.tbl::text, 'relid', c.tbl::oid::bigint, 'action', c.change ->> 0,
                   'key', c.change -> 1, 'obj', c.change -> 2, 'old', c.change -> 3)
                   ORDER BY c.n, c.ord)::text AS body
        FROM c
    )
    SELECT CASE WHEN octet_length(i.body) < 7800 THEN i.body
           ELSE ',"relids":' || (SELECT jsonb_agg(DISTINCT s.tbl::oid::bigint) FROM staged s)::text
           END
    FROM inline i
$$;

-- A commit's notification: {"type":"changes","v":1,"pos":…,"at":…} and its body.
CREATE FUNCTION place._change_payload(p bigint, at timestamptz, body text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT '{"type":"changes","v":1,"pos":' || p || ',"at":'
           || (extract(epoch FROM at) * 1000000)::bigint || body || '}'
$$;

-- Fires at commit, once per staged row; the first one of a transaction does the work.
CREATE FUNCTION place._commit_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    done int := coalesce(nullif(pg_catalog.current_setting('pgplace.change_flushed', true), '')::int, 0);
    last int;
    body text;
    at timestamptz := pg_catalog.clock_timestamp();
    x xid8 := pg_catalog.pg_current_xact_id();
    pos bigint;
    retention interval;
BEGIN
    -- Rows written by another transaction's capture (pg_restore loading the log) are
    -- history, not news.
    IF NEW.n <= done OR NEW.xid <> x THEN
        RETURN NULL;
    END IF;
    last := coalesce(nullif(pg_catalog.current_setting('pgplace.change_n', true), '')::int, NEW.n);
    PERFORM pg_catalog.set_config('pgplace.change_flushed', last::text, true);
    body := place._change_payload_body(x, done + 1, last);
    -- From here to the end of the commit, writers of watched tables go one at a time (the
    -- key is pgplace's own, beside the one storage.rs takes per board).
    PERFORM pg_catalog.pg_advisory_xact_lock(1885826147, -1);
    pos := pg_catalog.nextval('place.change_pos_seq');
    INSERT INTO place.change_commits (pos, xid, first_n, last_n, committed_at)
    VALUES (pos, x, done + 1, last, at);
    PERFORM pg_catalog.pg_notify('pgplace', place._change_payload(pos, at, body));
    -- Keep the log bounded: every 1,000th commit removes what is past its retention.
    IF pos % 1000 = 0 THEN
        SELECT s.retention INTO retention FROM place.change_settings s;
        PERFORM place._prune_changes(at - coalesce(retention, interval '1 day'));
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER commit_changes
AFTER INSERT ON place.changes
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION place._commit_changes();

-- Removes the commits made before `before` (and their changes); returns how many.
CREATE FUNCTION place._prune_changes(before timestamptz) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    newest bigint;
    removed bigint;
BEGIN
    SELECT max(pos), count(*) INTO newest, removed FROM place.change_commits WHERE committed_at < before;
    IF newest IS NULL THEN
        RETURN 0;
    END IF;
    DELETE FROM place.changes c USING place.change_commits cc
    WHERE cc.pos <= newest AND c.xid = cc.xid AND c.n BETWEEN cc.first_n AND cc.last_n;
    DELETE FROM place.change_commits WHERE pos <= newest;
    INSERT INTO place.change_settings AS s (one, kept_after) VALUES (true, newest)
    ON CONFLICT (one) DO UPDATE SET kept_after = greatest(s.kept_after, EXCLUDED.kept_after);
    RETURN removed;
END
$$;

-- The public API ------------------------------------------------------------------------

CREATE FUNCTION place.watch(tbl regclass, columns text[] DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    keys text[];
    missing text;
    wanted text[];
    kind "char";
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'tbl must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT c.relkind INTO kind FROM pg_catalog.pg_class c WHERE c.oid = tbl;
    IF kind IS DISTINCT FROM 'r' THEN
        RAISE EXCEPTION '% is not an ordinary table (only tables can be watched)', tbl
            USING ERRCODE = '42809';
    END IF;
    IF (SELECT c.relispartition FROM pg_catalog.pg_class c WHERE c.oid = tbl)
       OR EXISTS (SELECT FROM pg_catalog.pg_inherits i WHERE i.inhrelid = tbl) THEN
        RAISE EXCEPTION '% is a partition or an inheritance child: changes made through its parent would not be announced', tbl
            USING ERRCODE = '0A000', HINT = 'Watch ordinary tables that are written directly.';
    END IF;
    PERFORM place._check_may_read(tbl);
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
    INSERT INTO place.watches (tbl, key_columns, columns) VALUES (tbl, keys, wanted)
    ON CONFLICT ON CONSTRAINT watches_pkey
    DO UPDATE SET key_columns = EXCLUDED.key_columns, columns = EXCLUDED.columns;
    -- The views over the table must still hold with the new columns.
    UPDATE place.views v SET (query, touch_always) =
        (SELECT p.select_sql, p.touch_always
         FROM place._prepare_view(v.name, v.tbl, v.order_by, v.filter, v.descending) p)
    WHERE v.tbl = watch.tbl;
END
$$;

-- The functions that watch a table or show its rows run as the extension's owner: the
-- one who calls them (the login, session_user, whatever role it SET) must be able to read
-- the table itself, or a view would hand them rows they may not see.
CREATE FUNCTION place._check_may_read(tbl regclass) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT pg_catalog.has_table_privilege(session_user, tbl, 'SELECT') THEN
        RAISE EXCEPTION 'permission denied: % may not read table %', session_user, tbl
            USING ERRCODE = '42501', HINT = 'Only a role that may SELECT from a table can watch it or show it in a view.';
    END IF;
END
$$;

CREATE FUNCTION place._drop_watch_triggers(tbl regclass) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t name;
BEGIN
    FOR t IN SELECT tgname FROM pg_catalog.pg_trigger
             WHERE tgrelid = tbl AND tgname IN ('pgplace_watch_insert', 'pgplace_watch_update',
                                                'pgplace_watch_delete', 'pgplace_watch_truncate')
    LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', t, tbl);
    END LOOP;
END
$$;

CREATE FUNCTION place.unwatch(tbl regclass) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    dependent text;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'tbl must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT string_agg(quote_literal(v.name), ', ' ORDER BY v.name) INTO dependent
    FROM place.views v WHERE v.tbl = unwatch.tbl;
    IF dependent IS NOT NULL THEN
        RAISE EXCEPTION 'views % show table %: drop them first', dependent, tbl
            USING ERRCODE = '2BP01', HINT = 'SELECT place.drop_view(name) for each of them.';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_class WHERE oid = tbl) THEN
        PERFORM place._drop_watch_triggers(tbl);
    END IF;
    DELETE FROM place.watches w WHERE w.tbl = unwatch.tbl;
    RETURN FOUND;
END
$$;

CREATE FUNCTION place.watched()
RETURNS TABLE (tbl regclass, key_columns text[], columns text[], views text[], created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT w.tbl, w.key_columns, w.columns,
           coalesce((SELECT array_agg(v.name ORDER BY v.name) FROM place.views v WHERE v.tbl = w.tbl), '{}'),
           w.created_at
    FROM place.watches w
    ORDER BY w.tbl::text
$$;

CREATE FUNCTION place.kick(tbl regclass, pk jsonb) RETURNS void
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
    INSERT INTO place.changes (xid, n, tbl, rows)
    VALUES (pg_catalog.pg_current_xact_id(), place._next_change_n(1), tbl,
            jsonb_build_array(jsonb_build_array('update', key, place._pick(row_json, w.columns),
                                                place._pick(row_json, w.columns))));
END
$$;

CREATE FUNCTION place.changes_since(after_pos bigint, lim int DEFAULT 1000)
RETURNS TABLE (pos bigint, committed_at timestamptz, tbl regclass, action text, key jsonb, obj jsonb, old jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    kept bigint;
BEGIN
    IF after_pos IS NULL OR lim IS NULL THEN
        RAISE EXCEPTION 'after_pos and lim must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF lim < 1 OR lim > 100000 THEN
        RAISE EXCEPTION 'lim must be between 1 and 100000, not %', lim USING ERRCODE = '22003';
    END IF;
    SELECT s.kept_after INTO kept FROM place.change_settings s;
    IF after_pos < coalesce(kept, 0) THEN
        RAISE EXCEPTION 'the change log no longer holds the positions after % (it keeps those after %)', after_pos, kept
            USING ERRCODE = '55000', HINT = 'Read the tables afresh; place.set_change_retention sets how long changes are kept.';
    END IF;
    RETURN QUERY
    SELECT cc.pos, cc.committed_at, c.tbl, e.change ->> 0, e.change -> 1, e.change -> 2, e.change -> 3
    FROM (SELECT * FROM place.change_commits x WHERE x.pos > after_pos ORDER BY x.pos LIMIT lim) cc
    JOIN place.changes c ON c.xid = cc.xid AND c.n BETWEEN cc.first_n AND cc.last_n
    CROSS JOIN LATERAL jsonb_array_elements(c.rows) WITH ORDINALITY AS e(change, ord)
    ORDER BY cc.pos, c.n, e.ord;
END
$$;

-- The newest position this snapshot sees committed: every commit up to it is visible,
-- none after it (positions are taken and committed one at a time).
CREATE FUNCTION place.change_pos() RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT max(c.pos) FROM place.change_commits c),
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

-- views.sql
-- Named list views over watched tables (README, "List views"): the rows of a table that
-- match a filter, in an order, at most a limit of them. The gateway serves them; this file
-- keeps their definitions and runs their queries.

CREATE TABLE place.views (
    name       text PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 64),
    tbl        regclass NOT NULL REFERENCES place.watches (tbl),
    order_by   text[] NOT NULL,
    filter     text,
    descending boolean NOT NULL,
    max_limit  int NOT NULL CHECK (max_limit BETWEEN 1 AND 1000),
    -- The SELECT that reads the view (made by place._prepare_view from the above; $1 is
    -- the limit). Only the watched columns and the key are in it.
    query      text NOT NULL,
    -- The filter reads a float column: a change announced through jsonb (whose numbers
    -- keep 15 digits of a float) cannot tell whether it matches, so every change of the
    -- table may touch the view (place.views_touched).
    touch_always boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE place.views IS 'Named list views the gateway serves (place.create_view)';
SELECT pg_catalog.pg_extension_config_dump('place.views', '');

-- Checks a view's parts against the table as watched now and returns its query. Errors
-- name the bad part: 42703 unknown or unwatched column, 22023 a filter that is not one
-- boolean expression over the row, uses a subquery, or calls a function that is not
-- immutable (its result could change without the row changing), 42883 an unknown function.
CREATE FUNCTION place._prepare_view(name text, tbl regclass, order_by text[], filter text, descending boolean,
                                    OUT select_sql text, OUT touch_always boolean)
LANGUAGE plpgsql AS $$
DECLARE
    w place.watches;
    visible text[];
    bad text;
    obj text;
    key text;
    ordering text;
    dir text := CASE WHEN descending THEN ' DESC' ELSE '' END;
BEGIN
    SELECT * INTO w FROM place.watches x WHERE x.tbl = _prepare_view.tbl;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table % is not watched', tbl
            USING ERRCODE = '55000', HINT = 'SELECT place.watch(''...''::regclass) first: a view shows only watched columns.';
    END IF;
    -- What a view may show and use: the key and the watched columns.
    IF w.columns IS NULL THEN
        SELECT array_agg(a.attname::text ORDER BY a.attnum) INTO visible
        FROM pg_catalog.pg_attribute a WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped;
    ELSE
        SELECT array_agg(DISTINCT c) INTO visible FROM unnest(w.key_columns || w.columns) c;
    END IF;
    SELECT string_agg(quote_literal(c), ', ') INTO bad FROM unnest(order_by) c WHERE NOT c = ANY (visible);
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'order_by names %, which is not a watched column of % (watched: %)', bad, tbl, visible
            USING ERRCODE = '42703';
    END IF;
    IF filter IS NOT NULL THEN
        IF NOT place._is_one_expression(filter) THEN
            RAISE EXCEPTION 'filter % is not one SQL expression', filter
                USING ERRCODE = '22023', HINT = 'Write a boolean expression over the row''s columns, such as: status = ''live'' AND viewers > 10';
        END IF;
        -- A partial index's predicate must be an immutable boolean expression over the
        -- row without subqueries: exactly what a view can keep incrementally. The check
        -- runs on an empty copy of the visible columns, so others are unknown there.
        EXECUTE format('CREATE TEMP TABLE pgplace_view_check ON COMMIT DROP AS SELECT %s FROM ONLY %s LIMIT 0',
                       (SELECT string_agg(quote_ident(c), ', ') FROM unnest(visible) c), tbl);
        BEGIN
            EXECUTE format(E'CREATE INDEX pgplace_view_check_idx ON pg_temp.pgplace_view_check ((1)) WHERE (\n%s\n)', filter);
        EXCEPTION
            WHEN undefined_column OR undefined_function OR syntax_error THEN
                DROP TABLE pg_temp.pgplace_view_check;
                RAISE EXCEPTION 'filter % of view %: %', filter, name, SQLERRM
                    USING ERRCODE = SQLSTATE, HINT = format('A filter may use these columns of %s: %s', tbl, array_to_string(visible, ', '));
            WHEN OTHERS THEN
                DROP TABLE pg_temp.pgplace_view_check;
                RAISE EXCEPTION 'filter % of view % is not an immutable boolean expression over the row: %', filter, name, SQLERRM
                    USING ERRCODE = '22023', HINT = 'No subqueries, no volatile or stable functions (now(), random()): a view must change only when its rows change.';
        END;
        -- Views run as the extension's owner: a function that merely says it is immutable
        -- could do anything with those rights. Only the built-in functions and operators.
        SELECT string_agg(DISTINCT coalesce(p.oid::regprocedure::text, o.oid::regoperator::text), ', ')
        INTO bad
        FROM pg_catalog.pg_depend d
        LEFT JOIN pg_catalog.pg_proc p ON d.refclassid = 'pg_catalog.pg_proc'::regclass AND p.oid = d.refobjid
        LEFT JOIN pg_catalog.pg_operator o ON d.refclassid = 'pg_catalog.pg_operator'::regclass AND o.oid = d.refobjid
        WHERE d.classid = 'pg_catalog.pg_class'::regclass
          AND d.objid = 'pg_temp.pgplace_view_check_idx'::regclass
          AND (p.pronamespace <> 'pg_catalog'::regnamespace OR o.oprnamespace <> 'pg_catalog'::regnamespace);
        SELECT EXISTS (
            SELECT FROM pg_catalog.pg_depend d
            JOIN pg_catalog.pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
            JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
            WHERE d.classid = 'pg_catalog.pg_class'::regclass
              AND d.objid = 'pg_temp.pgplace_view_check_idx'::regclass
              AND d.refclassid = 'pg_catalog.pg_class'::regclass
              AND (t.oid IN ('float4'::regtype, 'float8'::regtype)
                   OR t.typbasetype IN ('float4'::regtype, 'float8'::regtype)))
        INTO touch_always;
        DROP TABLE pg_temp.pgplace_view_check;
        IF bad IS NOT NULL THEN
            RAISE EXCEPTION 'filter % of view % uses %, which is not built into PostgreSQL', filter, name, bad
                USING ERRCODE = '42501', HINT = 'A filter may call only functions and operators of pg_catalog.';
        END IF;
    END IF;
    IF w.columns IS NULL THEN
        obj := 'to_jsonb(t)';
    ELSE
        SELECT format('jsonb_build_object(%s)', string_agg(format('%L, t.%I', c, c), ', ')) INTO obj
        FROM unnest(w.columns) c;
    END IF;
    IF cardinality(w.key_columns) = 1 THEN
        key := format('to_jsonb(t.%I)', w.key_columns[1]);
    ELSE
        SELECT format('jsonb_build_object(%s)', string_agg(format('%L, t.%I', c, c), ', ')) INTO key
        FROM unnest(w.key_columns) c;
    END IF;
    -- The key breaks ties, so that the window is the same on every read.
    SELECT string_agg(format('t.%I%s', c, dir), ', ') INTO ordering
    FROM unnest(order_by || w.key_columns) c;
    select_sql := format(E'SELECT %s || jsonb_build_object(''id'', %s) FROM ONLY %s t WHERE (\n%s\n) ORDER BY %s LIMIT $1',
                    obj, key, tbl, coalesce(filter, 'true'), ordering);
    -- Types without an ordering (json, point ...) fail here, not at the first subscribe.
    EXECUTE select_sql USING 0;
    touch_always := coalesce(touch_always, false);
END
$$;

CREATE FUNCTION place.create_view(name text, tbl regclass, order_by text, filter text DEFAULT NULL,
                                  descending boolean DEFAULT true, max_limit int DEFAULT 100)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    columns text[];
BEGIN
    IF name IS NULL OR tbl IS NULL OR order_by IS NULL OR descending IS NULL OR max_limit IS NULL THEN
        RAISE EXCEPTION 'name, tbl, order_by, descending and max_limit must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF length(name) NOT BETWEEN 1 AND 64 OR name ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'a view name has 1 to 64 characters and no control characters, not %', quote_literal(name)
            USING ERRCODE = '22023';
    END IF;
    IF name IN ('board', 'board_region', 'recent_placements', 'presence') THEN
        RAISE EXCEPTION 'view name % is taken by the gateway''s own views', quote_literal(name)
            USING ERRCODE = '22023';
    END IF;
    IF max_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'max_limit must be between 1 and 1000, not %', max_limit USING ERRCODE = '22003';
    END IF;
    SELECT array_agg(btrim(c) ORDER BY i) INTO columns
    FROM unnest(string_to_array(order_by, ',')) WITH ORDINALITY AS o(c, i);
    IF coalesce(array_position(columns, ''), 0) > 0 OR columns IS NULL THEN
        RAISE EXCEPTION 'order_by must name columns separated by commas, not %', quote_literal(order_by)
            USING ERRCODE = '22023';
    END IF;
    PERFORM place._check_may_read(tbl);
    IF EXISTS (SELECT FROM place.views v WHERE v.name = create_view.name) THEN
        RAISE EXCEPTION 'a view named % exists already', quote_literal(name)
            USING ERRCODE = '23505', HINT = 'Drop it first with place.drop_view.';
    END IF;
    INSERT INTO place.views (name, tbl, order_by, filter, descending, max_limit, query, touch_always)
    SELECT name, tbl, columns, filter, descending, max_limit, p.select_sql, p.touch_always
    FROM place._prepare_view(name, tbl, columns, filter, descending) p;
END
$$;

CREATE FUNCTION place.drop_view(name text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'name must not be NULL' USING ERRCODE = '22004';
    END IF;
    DELETE FROM place.views v WHERE v.name = drop_view.name;
    RETURN FOUND;
END
$$;

CREATE FUNCTION place.views()
RETURNS TABLE (name text, tbl regclass, order_by text[], filter text, descending boolean, max_limit int, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT v.name, v.tbl, v.order_by, v.filter, v.descending, v.max_limit, v.created_at
    FROM place.views v ORDER BY v.name
$$;

-- The first `lim` rows of a view (NULL: max_limit), the change log position they reflect
-- (read in one snapshot: the position counts exactly the commits the rows include), and
-- the view's table.
CREATE FUNCTION place.view_rows(view_name text, lim int DEFAULT NULL)
RETURNS TABLE (pos bigint, max_limit int, relid oid, rows jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v place.views;
BEGIN
    IF view_name IS NULL THEN
        RAISE EXCEPTION 'view_name must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO v FROM place.views x WHERE x.name = view_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no view named %', quote_literal(view_name) USING ERRCODE = '42704';
    END IF;
    IF coalesce(lim, v.max_limit) NOT BETWEEN 1 AND v.max_limit THEN
        RAISE EXCEPTION 'limit must be between 1 and % for view %, not %', v.max_limit, quote_literal(view_name), lim
            USING ERRCODE = '22003';
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT place.change_pos(), $2, $3, coalesce(jsonb_agg(q.r), ''[]''::jsonb) FROM (%s) q(r)',
        v.query) USING coalesce(lim, v.max_limit), v.max_limit, v.tbl::oid;
END
$$;

-- The gateway ends the subscriptions of a view that was dropped or defined anew.
CREATE FUNCTION place._notify_view_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.pg_notify('pgplace', jsonb_build_object(
        'type', 'view', 'v', 1, 'name', coalesce(OLD.name, NEW.name),
        'change', lower(TG_OP))::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER notify_view_change
AFTER INSERT OR UPDATE OR DELETE ON place.views
FOR EACH ROW EXECUTE FUNCTION place._notify_view_change();

-- Which of the views `view_names` (all over one table) a change of rows `changed` (a JSON
-- array of rows: key and watched columns, new and old versions) may touch: those whose
-- filter at least one of the rows matches (a view without a filter always). A row that
-- matches a view's filter neither before nor after its change was never in the view and
-- is not now: the gateway need not read that view again. One statement for all the views.
CREATE FUNCTION place.views_touched(view_names text[], changed jsonb) RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    t regclass;
    tables int;
    tests text;
    hits text[];
BEGIN
    IF view_names IS NULL OR changed IS NULL THEN
        RAISE EXCEPTION 'view_names and changed must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(changed) <> 'array' THEN
        RAISE EXCEPTION 'changed must be a JSON array of rows, not %', jsonb_typeof(changed) USING ERRCODE = '22023';
    END IF;
    SELECT min(v.tbl::oid)::regclass, count(DISTINCT v.tbl),
           string_agg(format('CASE WHEN bool_or(%s) THEN %L END',
                             CASE WHEN v.filter IS NULL OR v.touch_always THEN 'true'
                                  ELSE E'(\n' || v.filter || E'\n)' END, v.name), ', ')
    INTO t, tables, tests
    FROM place.views v WHERE v.name = ANY (view_names);
    IF tables = 0 THEN
        RETURN '{}';
    END IF;
    IF tables > 1 THEN
        RAISE EXCEPTION 'views_touched takes views of one table' USING ERRCODE = '22023';
    END IF;
    EXECUTE format('SELECT array_remove(ARRAY[%s], NULL) FROM jsonb_populate_recordset(NULL::%s, $1) AS r',
                   tests, t)
    INTO hits USING changed;
    RETURN coalesce(hits, '{}');
END
$$;

-- functions.sql
COMMENT ON FUNCTION place.watch(regclass, text[]) IS
    'Announces every committed INSERT, UPDATE and DELETE of a table (its primary key, and the given columns of the new and old row; all when NULL) on channel pgplace and in place.changes.';
COMMENT ON FUNCTION place.unwatch(regclass) IS
    'Stops announcing a table''s changes (its views must be dropped first). False when it was not watched.';
COMMENT ON FUNCTION place.watched() IS
    'The watched tables, their key and watched columns, and the views over them.';
COMMENT ON FUNCTION place.kick(regclass, jsonb) IS
    'Announces one row of a watched table again, as an update of itself (pk: its key columns as a JSON object).';
COMMENT ON FUNCTION place.changes_since(bigint, int) IS
    'The announced changes after a change log position, whole commits in commit order (at most lim commits).';
COMMENT ON FUNCTION place.change_pos() IS
    'The newest change log position committed as this snapshot sees it (0 before any).';
COMMENT ON FUNCTION place.set_change_retention(interval) IS
    'How long the change log keeps changes (default 1 day).';
COMMENT ON FUNCTION place.create_view(text, regclass, text, text, boolean, int) IS
    'A named list view for the gateway: rows of a watched table matching filter, ordered by order_by (watched columns, comma-separated), at most max_limit.';
COMMENT ON FUNCTION place.drop_view(text) IS
    'Drops a list view; its subscribers get a deleted event. False when there was none.';
COMMENT ON FUNCTION place.views() IS
    'The list views.';
COMMENT ON FUNCTION place.views_touched(text[], jsonb) IS
    'Which of the views (of one table) a change of the given rows may touch: those whose filter one of them matches.';
COMMENT ON FUNCTION place.view_rows(text, int) IS
    'The first lim rows (NULL: max_limit) of a list view as a JSON array, the change log position they reflect, and the view''s table.';

-- Watching: the admin's functions, the gateway's reader of views (it reads the watched
-- tables, which the gateway's role need not read), and the triggers that write the change
-- log for whichever role wrote the watched table. Filters are always read with standard
-- strings (as they were checked), and a row's intervals are written the same way whatever
-- the writer's session says (the gateway tests filters on them).
ALTER FUNCTION place.watch(regclass, text[])
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
ALTER FUNCTION place.unwatch(regclass)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.kick(regclass, jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.set_change_retention(interval)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.create_view(text, regclass, text, text, boolean, int)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
ALTER FUNCTION place.drop_view(text)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.view_rows(text, int)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
ALTER FUNCTION place.views_touched(text[], jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
ALTER FUNCTION place._capture_changes()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    SET IntervalStyle = postgres;
ALTER FUNCTION place._commit_changes()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION
    place.watch(regclass, text[]),
    place.unwatch(regclass),
    place.kick(regclass, jsonb),
    place.set_change_retention(interval),
    place.create_view(text, regclass, text, text, boolean, int),
    place.drop_view(text)
FROM PUBLIC;
