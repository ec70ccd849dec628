-- pgplace 0.8.7 -> 0.8.8: pgplace acts for the role that called it, and its capture
-- trigger turns no user-made type into JSON (issue 42's audit of 0.8.7).
-- - watch, unwatch, kick, create_view and drop_view become C functions that run as their caller and
--   call their bodies (_watch, _unwatch, _kick, _create_view, _drop_view: SECURITY DEFINER, for the
--   owner alone) naming that role, instead of SECURITY DEFINER functions that authorized
--   the session's login (extension/src/callers.rs). CREATE OR REPLACE keeps their grants
--   and comments. A filter is analysed as the view's creator. A view may be dropped by its
--   creator or its table's owner, no longer by any admin.
-- - The capture trigger refuses a statement on a table with a column of a type that is not
--   built in (library only); the DDL guard follows ALTER TYPE to typed tables and a table
--   to its partitions; a table dropped by DROP TYPE ... CASCADE leaves no watch.
-- - unwatch and watch find the capture triggers by their function, not their names.
-- - An idle tick looks up only the committed transactions of the last position's
--   in-progress list, not the changes of those still open.

-- The filter's check takes the role it analyses as.
DROP FUNCTION place._check_filter(text, oid, text[], text);
-- pgplace::filters::_check_filter
CREATE  FUNCTION place."_check_filter"(
	"view_name" TEXT, /* & str */
	"tbl" oid, /* pg_sys :: Oid */
	"visible" TEXT[], /* Vec < Option < String > > */
	"filter" TEXT, /* & str */
	"analyser" oid /* pg_sys :: Oid */
) RETURNS bool /* bool */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'check_filter_as_wrapper';

DROP FUNCTION place._check_may_read(regclass);
DROP FUNCTION place._check_owns(regclass);
DROP FUNCTION place._prepare_view(text, regclass, text[], text, boolean);
CREATE FUNCTION place._check_may_read(tbl regclass, caller regrole) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT pg_catalog.has_table_privilege(caller, tbl, 'SELECT') THEN
        RAISE EXCEPTION 'permission denied: % may not read table %', caller, tbl
            USING ERRCODE = '42501', HINT = 'Only a role that may SELECT from a table can watch it or show it in a view.';
    END IF;
END
$$;
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
CREATE FUNCTION place._prepare_view(name text, tbl regclass, order_by text[], filter text, descending boolean,
                                    analyser regrole, OUT select_sql text, OUT touch_always boolean)
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
            touch_always := place._check_filter(name, tbl, visible, filter, analyser);
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
CREATE FUNCTION place._create_view(caller regrole, name text, tbl regclass, order_by text, filter text,
                                   descending boolean, max_limit int, signed_in boolean)
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
    PERFORM place._check_may_read(tbl, caller);
    IF EXISTS (SELECT FROM place.views v WHERE v.name = _create_view.name) THEN
        RAISE EXCEPTION 'a view named % exists already', quote_literal(name)
            USING ERRCODE = '23505', HINT = 'Drop it first with place.drop_view.';
    END IF;
    INSERT INTO place.views (name, tbl, order_by, filter, descending, max_limit, query, touch_always, created_by,
                             signed_in)
    SELECT name, tbl, columns, filter, descending, max_limit, p.select_sql, p.touch_always, caller, signed_in
    FROM place._prepare_view(name, tbl, columns, filter, descending, caller) p;
END
$$;
CREATE OR REPLACE FUNCTION place.watch(tbl regclass, columns text[] DEFAULT NULL, all_rows boolean DEFAULT false)
RETURNS void VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'watch_wrapper';
CREATE OR REPLACE FUNCTION place.unwatch(tbl regclass) RETURNS boolean VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'unwatch_wrapper';
CREATE OR REPLACE FUNCTION place.kick(tbl regclass, pk jsonb) RETURNS void VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'kick_wrapper';
CREATE OR REPLACE FUNCTION place.create_view(name text, tbl regclass, order_by text, filter text DEFAULT NULL,
                                  descending boolean DEFAULT true, max_limit int DEFAULT 100,
                                  signed_in boolean DEFAULT false)
RETURNS void VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'create_view_wrapper';

ALTER FUNCTION place.watch(regclass, text[], boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.unwatch(regclass) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.kick(regclass, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.create_view(text, regclass, text, text, boolean, int, boolean)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place._watch(regrole, regclass, text[], boolean)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
ALTER FUNCTION place._unwatch(regrole, regclass)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place._kick(regrole, regclass, jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET pgplace.log_writer = on;
ALTER FUNCTION place._create_view(regrole, text, regclass, text, text, boolean, int, boolean)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
-- A C function that runs as its caller and calls place._drop_view (as place.create_view).
CREATE OR REPLACE FUNCTION place.drop_view(name text) RETURNS boolean VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'drop_view_wrapper';

-- place.drop_view's body, for `caller`: the view's creator (a member of its role) or the
-- owner of its table may drop it, not any other admin.
CREATE FUNCTION place._drop_view(caller regrole, name text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v record;
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'name must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT x.created_by, c.relowner INTO v
    FROM place.views x LEFT JOIN pg_catalog.pg_class c ON c.oid = x.tbl
    WHERE x.name = _drop_view.name
    FOR UPDATE OF x;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF NOT (coalesce(pg_catalog.pg_has_role(caller, v.created_by, 'USAGE'), false)
            OR coalesce(pg_catalog.pg_has_role(caller, v.relowner, 'USAGE'), false)) THEN
        RAISE EXCEPTION 'permission denied: % neither created view % nor owns its table', caller, quote_literal(name)
            USING ERRCODE = '42501', HINT = 'The view''s creator (a member of its role) or its table''s owner may drop it.';
    END IF;
    DELETE FROM place.views x WHERE x.name = _drop_view.name;
    RETURN true;
END
$$;
ALTER FUNCTION place.drop_view(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place._drop_view(regrole, text)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION place.drop_view(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place._drop_view(regrole, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place._check_filter(text, oid, text[], text, oid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.watch(regclass, text[], boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.unwatch(regclass) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.kick(regclass, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.create_view(text, regclass, text, text, boolean, int, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place._watch(regrole, regclass, text[], boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place._unwatch(regrole, regclass) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place._kick(regrole, regclass, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place._create_view(regrole, text, regclass, text, text, boolean, int, boolean) FROM PUBLIC;

-- The DDL guard reaches typed tables and partitions.
CREATE OR REPLACE FUNCTION place._guard_watched_tables() RETURNS event_trigger
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
-- (CREATE OR REPLACE resets what functions.sql set.)
ALTER FUNCTION place._guard_watched_tables()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
DROP EVENT TRIGGER pgplace_guard_watched_tables;
CREATE EVENT TRIGGER pgplace_guard_watched_tables ON ddl_command_end
WHEN TAG IN ('ALTER TABLE', 'ALTER TYPE', 'CREATE RULE')
EXECUTE FUNCTION place._guard_watched_tables();
-- Also while changes are replicated in (session_replication_role = replica).
ALTER EVENT TRIGGER pgplace_guard_watched_tables ENABLE ALWAYS;

-- DROP TYPE ... CASCADE drops typed tables too.
DROP EVENT TRIGGER pgplace_forget_dropped_tables;
CREATE EVENT TRIGGER pgplace_forget_dropped_tables ON sql_drop
WHEN TAG IN ('DROP TABLE', 'DROP SCHEMA', 'DROP OWNED', 'DROP TYPE')
EXECUTE FUNCTION place._forget_dropped_tables();
ALTER EVENT TRIGGER pgplace_forget_dropped_tables ENABLE ALWAYS;

-- An idle tick reads nothing of a transaction still open.
CREATE OR REPLACE FUNCTION place._changed_since(prev pg_snapshot) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT FROM place.changes c
                   WHERE c.xid >= pg_catalog.pg_snapshot_xmax(prev)
                     -- The caller's own transaction's, not yet committed, wait for it.
                     AND pg_catalog.pg_visible_in_snapshot(c.xid, pg_catalog.pg_current_snapshot()))
        -- Of the in-progress list, only the transactions that have committed since are
        -- looked up: one still open may have staged any number of changes, which would be
        -- read (and found invisible) on every tick.
        OR EXISTS (SELECT FROM place.changes c
                   WHERE c.xid = ANY (ARRAY(SELECT x FROM pg_catalog.pg_snapshot_xip(prev) x
                                            WHERE pg_catalog.pg_visible_in_snapshot(x, pg_catalog.pg_current_snapshot()))))
$$;

-- Every capture trigger of the table, found by its function: a table's owner may have
-- renamed one, and a renamed one left behind would go on logging the table's changes.
CREATE OR REPLACE FUNCTION place._drop_watch_triggers(tbl regclass) RETURNS void
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