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
    -- The SELECT that reads the view, as it was made (place._prepare_view), for the DBA to
    -- read. Reads make it anew (place._view_query), naming the table by its OID.
    query      text NOT NULL,
    -- The filter reads a float column: a change announced through jsonb (whose numbers
    -- keep 15 digits of a float) cannot tell whether it matches, so every change of the
    -- table may touch the view (place.views_touched).
    touch_always boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- Who created the view: its rows are read with the extension owner's rights, so each
    -- read first checks that this role may still read the table (place._check_view).
    created_by regrole NOT NULL,
    -- Only sessions bound to a user (session.authorize) may subscribe; anonymous clients
    -- are refused.
    signed_in boolean NOT NULL DEFAULT false
);
COMMENT ON TABLE place.views IS 'Named list views the gateway serves (place.create_view)';
SELECT pg_catalog.pg_extension_config_dump('place.views', '');

-- The query that reads a view, in two parts around the table's name: place._read_as_owner
-- names the table by its OID at every read, so a name stored earlier can never be re-bound
-- (a table renamed, another relation given its name). $1 is the limit, as jsonb. Only the
-- watched columns and the key are in it.
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

-- Checks a view's parts against the table as watched now and returns its query (as it
-- reads the table now; place.views.query keeps it for the DBA to read). Errors name the
-- bad part: 42703 unknown or unwatched column, 22023 a filter that is not one boolean
-- expression over the row, uses a subquery, or calls a function that is not immutable (its
-- result could change without the row changing), 42883 an unknown function, 42501 a
-- function, operator or type that is not built into PostgreSQL. The filter is checked from
-- its analysed tree (place._check_filter) before anything runs it.
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

-- A C function that runs as its caller and calls place._create_view as the extension's owner,
-- naming the caller (extension/src/callers.rs, as place.watch).
CREATE FUNCTION place.create_view(name text, tbl regclass, order_by text, filter text DEFAULT NULL,
                                  descending boolean DEFAULT true, max_limit int DEFAULT 100,
                                  signed_in boolean DEFAULT false)
RETURNS void VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'create_view_wrapper';

-- place.create_view's body, for `caller`, who becomes the view's creator (its filter is
-- analysed as that role, and each read checks that role may still read the table).
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

-- A C function that runs as its caller and calls place._drop_view (as place.create_view).
CREATE FUNCTION place.drop_view(name text) RETURNS boolean VOLATILE PARALLEL UNSAFE
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

CREATE FUNCTION place.views()
RETURNS TABLE (name text, tbl regclass, order_by text[], filter text, descending boolean, max_limit int, created_at timestamptz,
               created_by regrole, signed_in boolean)
LANGUAGE sql STABLE AS $$
    SELECT v.name, v.tbl, v.order_by, v.filter, v.descending, v.max_limit, v.created_at, v.created_by, v.signed_in
    FROM place.views v ORDER BY v.name
$$;

-- The first `lim` rows of a view (NULL: max_limit), the change log position they reflect
-- (read in one snapshot: the position counts exactly the commits the rows include), the
-- view's table, and whether only signed-in sessions may subscribe.
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
    -- One snapshot for the position and the rows: this function is STABLE, and the read
    -- runs read-only in the snapshot of the statement that called it.
    RETURN QUERY
    SELECT place.change_pos(), v.max_limit, v.tbl::oid,
           place._read_as_owner(v.tbl, q.head, q.tail, to_jsonb(coalesce(lim, v.max_limit))), v.signed_in
    FROM place._view_query(v.tbl, v.order_by, v.filter, v.descending) q;
END
$$;

-- Before a view's rows are read (or its filter run) for a client: the table is still one
-- pgplace may read (place._check_watchable), and the view's creator may still read it - a
-- view never shows more than its creator may see. (The read itself runs as the table's
-- owner: place._read_as_owner.)
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
    PERFORM place._check_view(v.name) FROM place.views v WHERE v.name = ANY (view_names);
    -- The filters run over records of the table's row type, as the table's owner.
    SELECT array_agg(h) INTO hits
    FROM jsonb_array_elements_text(place._read_as_owner(
             t, format('SELECT to_jsonb(array_remove(ARRAY[%s], NULL)) FROM jsonb_populate_recordset(NULL::', tests),
             ', $1) AS t', changed)) h;
    RETURN coalesce(hits, '{}');
END
$$;
