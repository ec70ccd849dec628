-- pgplace 0.8.5 -> 0.8.6: no pgplace function plans or runs a query over a user's table as
-- the extension's owner (README, Security).
--
-- - Every read of a watched table (view_rows, views_touched, kick, a new view's first plan)
--   goes through place._read_as_owner: the table locked and named by its OID at the read,
--   the query run as the table's owner under SECURITY_RESTRICTED_OPERATION. A view's stored
--   query is no longer run; reads make it anew (place._view_query).
-- - A filter is checked from its analysed tree, as the session user (place._check_filter),
--   before anything is built with it: no temporary index runs it any more.
-- - Temporary tables cannot be watched; a dropped table's watch and views go with it
--   (event trigger pgplace_forget_dropped_tables); watch and unwatch lock the table by OID.
-- - The ticker finds new transactions by the previous snapshot's xmax and xip, not from its
--   xmin on (which any login can hold back), and pruning removes what the removed
--   positions' snapshot saw.
-- CREATE OR REPLACE resets a function's settings: those of functions.sql are set again.

CREATE FUNCTION place."_read_as_owner"(
	"tbl" oid,
	"head" TEXT,
	"tail" TEXT,
	"arg" jsonb
) RETURNS jsonb
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', '_read_as_owner_wrapper';

CREATE FUNCTION place."_check_filter"(
	"view_name" TEXT,
	"tbl" oid,
	"visible" TEXT[],
	"filter" TEXT
) RETURNS bool
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', '_check_filter_wrapper';

CREATE FUNCTION place."_lock_table"(
	"tbl" oid
) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', '_lock_table_wrapper';

-- Whether a transaction not visible in `prev` has staged changes that this statement's
-- snapshot sees committed. The transactions not visible in `prev` are those from its xmax
-- on and those in progress when it was taken (its xip): an index range and index lookups,
-- whatever `prev`'s xmin is. (Its xmin can be far behind: any login that holds a
-- transaction id holds every snapshot's xmin back, and a range from xmin would read every
-- change staged since.) The in-progress list is an array the index looks up (`= ANY`): as
-- a joined set, the planner hashed it against the whole log. Reads only.
CREATE OR REPLACE FUNCTION place._changed_since(prev pg_snapshot) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT FROM place.changes c
                   WHERE c.xid >= pg_catalog.pg_snapshot_xmax(prev)
                     -- The caller's own transaction's, not yet committed, wait for it.
                     AND pg_catalog.pg_visible_in_snapshot(c.xid, pg_catalog.pg_current_snapshot()))
        OR EXISTS (SELECT FROM place.changes c
                   WHERE c.xid = ANY (ARRAY(SELECT pg_catalog.pg_snapshot_xip(prev)))
                     AND pg_catalog.pg_visible_in_snapshot(c.xid, pg_catalog.pg_current_snapshot()))
$$;

-- The changes of the positions after `after_pos` (at most lim positions), in order. A
-- position's transactions are those visible in its snapshot and not in the one before:
-- from the one before's xmax on, or in its xip (as place._changed_since).
CREATE OR REPLACE FUNCTION place._ticked_changes(after_pos bigint, lim int)
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

CREATE OR REPLACE FUNCTION place._check_watchable(tbl regclass, all_rows boolean) RETURNS void
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

CREATE OR REPLACE FUNCTION place.watch(tbl regclass, columns text[] DEFAULT NULL, all_rows boolean DEFAULT false)
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

CREATE OR REPLACE FUNCTION place.unwatch(tbl regclass) RETURNS boolean
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
        IF EXISTS (SELECT FROM place.watches w WHERE w.tbl = unwatch.tbl) THEN
            PERFORM place._lock_table(tbl);
        END IF;
        PERFORM place._drop_watch_triggers(tbl);
    END IF;
    DELETE FROM place.watches w WHERE w.tbl = unwatch.tbl;
    RETURN FOUND;
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
WHEN TAG IN ('DROP TABLE', 'DROP SCHEMA', 'DROP OWNED')
EXECUTE FUNCTION place._forget_dropped_tables();
ALTER EVENT TRIGGER pgplace_forget_dropped_tables ENABLE ALWAYS;

CREATE FUNCTION place._view_query(tbl regclass, order_by text[], filter text, descending boolean,
                                  OUT head text, OUT tail text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    w place.watches;
    obj text;
    key text;
    ordering text;
    dir text := CASE WHEN descending THEN ' DESC' ELSE '' END;
BEGIN
    SELECT * INTO w FROM place.watches x WHERE x.tbl = _view_query.tbl;
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
    head := format('SELECT coalesce(jsonb_agg(q.r), ''[]''::jsonb) FROM (SELECT %s || jsonb_build_object(''id'', %s) FROM ONLY ',
                   obj, key);
    tail := format(E' t WHERE (\n%s\n) ORDER BY %s LIMIT ($1)::int) q(r)', coalesce(filter, 'true'), ordering);
END
$$;

CREATE OR REPLACE FUNCTION place._prepare_view(name text, tbl regclass, order_by text[], filter text, descending boolean,
                                    OUT select_sql text, OUT touch_always boolean)
LANGUAGE plpgsql AS $$
DECLARE
    w place.watches;
    visible text[];
    bad text;
    q record;
BEGIN
    SELECT * INTO w FROM place.watches x WHERE x.tbl = _prepare_view.tbl;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table % is not watched', tbl
            USING ERRCODE = '55000', HINT = 'SELECT place.watch(''...''::regclass) first: a view shows only watched columns.';
    END IF;
    PERFORM place._check_watchable(tbl, w.all_rows);
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
    touch_always := false;
    IF filter IS NOT NULL THEN
        IF NOT place._is_one_expression(filter) THEN
            RAISE EXCEPTION 'filter % is not one SQL expression', filter
                USING ERRCODE = '22023', HINT = 'Write a boolean expression over the row''s columns, such as: status = ''live'' AND viewers > 10';
        END IF;
        BEGIN
            touch_always := place._check_filter(name, tbl, visible, filter);
        EXCEPTION
            WHEN undefined_column OR undefined_function OR syntax_error OR undefined_object THEN
                RAISE EXCEPTION 'filter % of view %: %', filter, name, SQLERRM
                    USING ERRCODE = SQLSTATE, HINT = format('A filter may use these columns of %s: %s', tbl, array_to_string(visible, ', '));
            WHEN datatype_mismatch OR cannot_coerce OR grouping_error OR windowing_error OR feature_not_supported THEN
                RAISE EXCEPTION 'filter % of view % is not an immutable boolean expression over the row: %', filter, name, SQLERRM
                    USING ERRCODE = '22023', HINT = 'No subqueries, no volatile or stable functions (now(), random()): a view must change only when its rows change.';
        END;
    END IF;
    SELECT * INTO q FROM place._view_query(tbl, order_by, filter, descending);
    select_sql := q.head || tbl::text || q.tail;
    -- Types without an ordering (json, point ...) fail here, not at the first subscribe.
    PERFORM place._read_as_owner(tbl, q.head, q.tail, '0');
END
$$;

CREATE OR REPLACE FUNCTION place.view_rows(view_name text, lim int DEFAULT NULL)
RETURNS TABLE (pos bigint, max_limit int, relid oid, rows jsonb, signed_in boolean)
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
    PERFORM place._check_view(view_name);
    IF coalesce(lim, v.max_limit) NOT BETWEEN 1 AND v.max_limit THEN
        RAISE EXCEPTION 'limit must be between 1 and % for view %, not %', v.max_limit, quote_literal(view_name), lim
            USING ERRCODE = '22003';
    END IF;
    -- One snapshot for the position and the rows: this function is STABLE, and the read
    -- runs read-only in the snapshot of the statement that called it.
    RETURN QUERY
    SELECT place.change_pos(), v.max_limit, v.tbl::oid,
           place._read_as_owner(v.tbl, q.head, q.tail, to_jsonb(coalesce(lim, v.max_limit))), v.signed_in
    FROM place._view_query(v.tbl, v.order_by, v.filter, v.descending) q;
END
$$;

CREATE OR REPLACE FUNCTION place.views_touched(view_names text[], changed jsonb) RETURNS text[]
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
    PERFORM place._check_view(v.name) FROM place.views v WHERE v.name = ANY (view_names);
    -- The filters run over records of the table's row type, as the table's owner.
    SELECT array_agg(h) INTO hits
    FROM jsonb_array_elements_text(place._read_as_owner(
             t, format('SELECT to_jsonb(array_remove(ARRAY[%s], NULL)) FROM jsonb_populate_recordset(NULL::', tests),
             ', $1) AS t', changed)) h;
    RETURN coalesce(hits, '{}');
END
$$;

-- As functions.sql sets them.
ALTER FUNCTION place.watch(regclass, text[], boolean)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
ALTER FUNCTION place.unwatch(regclass)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.kick(regclass, jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET pgplace.log_writer = on;
ALTER FUNCTION place.view_rows(text, int)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
ALTER FUNCTION place.views_touched(text[], jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
ALTER FUNCTION place._forget_dropped_tables()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION place._forget_dropped_tables() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place._read_as_owner(oid, text, text, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place._check_filter(text, oid, text[], text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place._lock_table(oid) FROM PUBLIC;

-- Watches of tables dropped before this version (their views too), and of temporary
-- tables, which can no longer be watched.
DELETE FROM place.views v
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = v.tbl AND c.relpersistence <> 't');
SELECT place._drop_watch_triggers(w.tbl) FROM place.watches w
WHERE EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = w.tbl AND c.relpersistence = 't');
DELETE FROM place.watches w
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = w.tbl AND c.relpersistence <> 't');
