-- pgplace 0.6.0 -> 0.7.0 (ALTER EXTENSION pgplace UPDATE): watching a table no longer lets
-- anyone run code with the extension owner's rights (README, "Security").
-- - A watched table may have only columns of types built into PostgreSQL (a user's enum,
--   domain or composite type carries casts and checks that the capture trigger and the view
--   readers, SECURITY DEFINER, would have run as the owner); an event trigger keeps it so.
-- - Watching and unwatching need the table's ownership; a table with row-level security
--   only with place.watch(..., all_rows => true).
-- - A list view remembers who created it and is read only while that role may read its table;
--   it may be for signed-in sessions only (create_view(..., signed_in => true)).
-- - Every SECURITY DEFINER function is taken from PUBLIC by the extension itself.
-- The update refuses to run while a watched table breaks the first two rules: unwatch it
-- (or change it), then update.
-- Checked by tests/upgrade/run.sh: an updated database must be exactly a fresh 0.7.0.
\echo Use "ALTER EXTENSION pgplace UPDATE" to load this file. \quit

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

-- The tables watched before this release must meet the rules now.
DO $$
DECLARE
    w record;
BEGIN
    FOR w IN SELECT x.tbl FROM place.watches x
             WHERE EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = x.tbl) ORDER BY x.tbl
    LOOP
        BEGIN
            PERFORM place._check_watchable(w.tbl, false);
        EXCEPTION WHEN OTHERS THEN
            RAISE EXCEPTION 'pgplace 0.7.0 would not watch table % any more: %', w.tbl, SQLERRM
                USING ERRCODE = SQLSTATE,
                      HINT = 'SELECT place.unwatch(''' || w.tbl || ''') (after dropping its views), or change the table; then ALTER EXTENSION pgplace UPDATE again.';
        END;
    END LOOP;
END
$$;

ALTER TABLE place.watches ADD COLUMN all_rows boolean NOT NULL DEFAULT false;
-- The views made before were made by a role that could read the table; its owner is the
-- one role known to read it still.
ALTER TABLE place.views ADD COLUMN created_by regrole;
UPDATE place.views v SET created_by = c.relowner::regrole FROM pg_catalog.pg_class c WHERE c.oid = v.tbl;
ALTER TABLE place.views ALTER COLUMN created_by SET NOT NULL;
ALTER TABLE place.views ADD COLUMN signed_in boolean NOT NULL DEFAULT false;
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

DROP FUNCTION place.watch(regclass, text[]);
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

DROP FUNCTION place.watched();
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

CREATE OR REPLACE FUNCTION place._prepare_view(name text, tbl regclass, order_by text[], filter text, descending boolean,
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
        -- A value cast to a user's type runs its domain CHECKs or its cast function.
        SELECT concat_ws(', ', bad, string_agg(DISTINCT d.refobjid::regtype::text, ', '))
        INTO bad
        FROM pg_catalog.pg_depend d
        WHERE d.classid = 'pg_catalog.pg_class'::regclass
          AND d.objid = 'pg_temp.pgplace_view_check_idx'::regclass
          AND d.refclassid = 'pg_catalog.pg_type'::regclass
          AND d.refobjid >= 16384;
        bad := nullif(bad, '');
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
                USING ERRCODE = '42501', HINT = 'A filter may use only the functions, operators and types of pg_catalog.';
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

DROP FUNCTION place.create_view(text, regclass, text, text, boolean, int);
CREATE FUNCTION place.create_view(name text, tbl regclass, order_by text, filter text DEFAULT NULL,
                                  descending boolean DEFAULT true, max_limit int DEFAULT 100,
                                  signed_in boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    columns text[];
BEGIN
    IF name IS NULL OR tbl IS NULL OR order_by IS NULL OR descending IS NULL OR max_limit IS NULL
       OR signed_in IS NULL THEN
        RAISE EXCEPTION 'name, tbl, order_by, descending, max_limit and signed_in must not be NULL' USING ERRCODE = '22004';
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
    INSERT INTO place.views (name, tbl, order_by, filter, descending, max_limit, query, touch_always, created_by,
                             signed_in)
    SELECT name, tbl, columns, filter, descending, max_limit, p.select_sql, p.touch_always,
           (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = session_user)::regrole, signed_in
    FROM place._prepare_view(name, tbl, columns, filter, descending) p;
END
$$;

DROP FUNCTION place.views();
CREATE FUNCTION place.views()
RETURNS TABLE (name text, tbl regclass, order_by text[], filter text, descending boolean, max_limit int, created_at timestamptz,
               created_by regrole, signed_in boolean)
LANGUAGE sql STABLE AS $$
    SELECT v.name, v.tbl, v.order_by, v.filter, v.descending, v.max_limit, v.created_at, v.created_by, v.signed_in
    FROM place.views v ORDER BY v.name
$$;

DROP FUNCTION place.view_rows(text, int);
CREATE FUNCTION place.view_rows(view_name text, lim int DEFAULT NULL)
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
    RETURN QUERY EXECUTE format(
        'SELECT place.change_pos(), $2, $3, coalesce(jsonb_agg(q.r), ''[]''::jsonb), $4 FROM (%s) q(r)',
        v.query) USING coalesce(lim, v.max_limit), v.max_limit, v.tbl::oid, v.signed_in;
END
$$;

-- Before a view's rows are read (or its filter run) with the extension owner's rights: the
-- table is still one pgplace may read that way (place._check_watchable), and the view's
-- creator may still read it - a view never shows more than its creator may see.
CREATE FUNCTION place._check_view(view_name text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v place.views;
BEGIN
    SELECT * INTO v FROM place.views x WHERE x.name = view_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no view named %', quote_literal(view_name) USING ERRCODE = '42704';
    END IF;
    PERFORM place._check_watchable(v.tbl, (SELECT w.all_rows FROM place.watches w WHERE w.tbl = v.tbl));
    IF NOT coalesce(pg_catalog.has_table_privilege(v.created_by, v.tbl, 'SELECT'), false) THEN
        RAISE EXCEPTION 'view % shows table %, which its creator % may no longer read', quote_literal(v.name), v.tbl, v.created_by
            USING ERRCODE = '42501', DETAIL = 'pgplace:view_unavailable',
                  HINT = 'Grant the creator SELECT on the table again, or drop the view and create it as a role that may read the table.';
    END IF;
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
    EXECUTE format('SELECT array_remove(ARRAY[%s], NULL) FROM jsonb_populate_recordset(NULL::%s, $1) AS r',
                   tests, t)
    INTO hits USING changed;
    RETURN coalesce(hits, '{}');
END
$$;

COMMENT ON FUNCTION place.watch(regclass, text[], boolean) IS
    'Announces every committed INSERT, UPDATE and DELETE of a table you own (its primary key, and the given columns of the new and old row; all when NULL) on channel pgplace and in place.changes. A table with row-level security only with all_rows => true.';
COMMENT ON FUNCTION place.watched() IS
    'The watched tables, their key and watched columns, and the views over them.';
COMMENT ON FUNCTION place.create_view(text, regclass, text, text, boolean, int, boolean) IS
    'A named list view for the gateway: rows of a watched table matching filter, ordered by order_by (watched columns, comma-separated), at most max_limit; signed_in: only sessions bound to a user may subscribe.';
COMMENT ON FUNCTION place.views() IS
    'The list views.';
COMMENT ON FUNCTION place.view_rows(text, int) IS
    'The first lim rows (NULL: max_limit) of a list view as a JSON array, the change log position they reflect, the view''s table, and whether only signed-in sessions may subscribe.';
-- CREATE OR REPLACE FUNCTION resets how a function runs: all of them again.
-- Watching: the admin's functions, the gateway's reader of views (it reads the watched
-- tables, which the gateway's role need not read), and the triggers that write the change
-- log for whichever role wrote the watched table. Filters are always read with standard
-- strings (as they were checked), and a row's intervals are written the same way whatever
-- the writer's session says (the gateway tests filters on them).
ALTER FUNCTION place.watch(regclass, text[], boolean)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
ALTER FUNCTION place.unwatch(regclass)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.kick(regclass, jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.set_change_retention(interval)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.create_view(text, regclass, text, text, boolean, int, boolean)
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
-- The guard of watched tables runs for whoever altered one, and reads place.watches.
ALTER FUNCTION place._guard_watched_tables()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Every SECURITY DEFINER function of the extension (these above, the session functions,
-- the triggers that keep versions) is taken from PUBLIC here, by the extension itself: one
-- that every role may call would hand every role the owner's rights, and a trigger function
-- that every role may EXECUTE could be attached to a role's own table (CREATE TRIGGER asks
-- for EXECUTE; firing does not) to run as the owner over rows that role chose. A database
-- where sql/roles.sql never ran is safe too; the owner and superusers still call them, and
-- sql/roles.sql grants them to its roles.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = 'place'::regnamespace AND p.prosecdef
             ORDER BY p.oid
    LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$$;
