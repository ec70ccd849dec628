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
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- The table has row-level security and the DBA said that every row of it may be shown
    -- to every client all the same (place.watch(..., all_rows => true)).
    all_rows    boolean NOT NULL DEFAULT false
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

CREATE FUNCTION place.watch(tbl regclass, columns text[] DEFAULT NULL, all_rows boolean DEFAULT false)
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
    PERFORM place._check_owns(tbl);
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

-- Watching adds triggers that every writer of the table runs (ENABLE ALWAYS, which only an
-- owner may set), and publishes the rows: it takes what PostgreSQL asks of ALTER TABLE,
-- the table's ownership (being a member of the role that owns it, or a superuser).
CREATE FUNCTION place._check_owns(tbl regclass) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    owner regrole := (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tbl);
BEGIN
    IF NOT pg_catalog.pg_has_role(session_user, owner, 'USAGE') THEN
        RAISE EXCEPTION 'permission denied: % does not own table % (its owner is %)', session_user, tbl, owner
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
    SELECT x.relkind, x.relispartition, x.relrowsecurity INTO c FROM pg_catalog.pg_class x WHERE x.oid = tbl;
    IF NOT FOUND OR c.relkind <> 'r' THEN
        RAISE EXCEPTION '% is not an ordinary table (only tables can be watched)', tbl
            USING ERRCODE = '42809';
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

-- Keeps _check_watchable true of every watched table that a DDL command changed (a column
-- added or retyped, row-level security turned on, a rule): the command fails instead.
CREATE FUNCTION place._guard_watched_tables() RETURNS event_trigger
LANGUAGE plpgsql AS $$
DECLARE
    w record;
BEGIN
    FOR w IN SELECT x.tbl, x.all_rows FROM place.watches x
             WHERE x.tbl::oid IN (SELECT d.objid FROM pg_catalog.pg_event_trigger_ddl_commands() d
                                  WHERE d.classid = 'pg_catalog.pg_class'::regclass
                                  UNION ALL
                                  SELECT r.ev_class FROM pg_catalog.pg_event_trigger_ddl_commands() d
                                  JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
                                  WHERE d.classid = 'pg_catalog.pg_rewrite'::regclass)
    LOOP
        PERFORM place._check_watchable(w.tbl, w.all_rows);
    END LOOP;
END
$$;
CREATE EVENT TRIGGER pgplace_guard_watched_tables ON ddl_command_end
WHEN TAG IN ('ALTER TABLE', 'CREATE RULE')
EXECUTE FUNCTION place._guard_watched_tables();
-- Also while changes are replicated in (session_replication_role = replica).
ALTER EVENT TRIGGER pgplace_guard_watched_tables ENABLE ALWAYS;

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
        PERFORM place._check_owns(tbl);
        PERFORM place._drop_watch_triggers(tbl);
    END IF;
    DELETE FROM place.watches w WHERE w.tbl = unwatch.tbl;
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
