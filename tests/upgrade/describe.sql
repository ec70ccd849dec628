-- Everything the pgplace extension defines, one line per fact, in a stable order: run on
-- a database updated from an older version and on a fresh one, the outputs must match.
\pset format unaligned
\pset tuples_only on
SELECT 'extension ' || extversion FROM pg_extension WHERE extname = 'pgplace';
-- Functions: signature, result, body reference, attributes, settings, ACL, comment.
SELECT format('function %s -> %s | %s %s | volatility=%s strict=%s secdef=%s parallel=%s | config=%s | acl=%s | %s',
              p.oid::regprocedure, pg_get_function_result(p.oid),
              l.lanname, CASE WHEN l.lanname = 'c' THEN p.prosrc ELSE md5(p.prosrc) END,
              p.provolatile, p.proisstrict, p.prosecdef, p.proparallel,
              p.proconfig, p.proacl, obj_description(p.oid, 'pg_proc'))
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = 'place'::regnamespace
ORDER BY p.oid::regprocedure::text;
-- Default values of function arguments.
SELECT format('defaults %s: %s', p.oid::regprocedure, pg_get_expr(p.proargdefaults, 0))
FROM pg_proc p WHERE p.pronamespace = 'place'::regnamespace AND p.proargdefaults IS NOT NULL
ORDER BY 1;
-- Tables, sequences, indexes: kind, options, ACL, comment.
SELECT format('relation %s kind=%s options=%s acl=%s | %s', c.relname, c.relkind, c.reloptions,
              c.relacl, obj_description(c.oid, 'pg_class'))
FROM pg_class c WHERE c.relnamespace = 'place'::regnamespace ORDER BY c.relname;
-- Columns, in order, with types, defaults, NOT NULL and storage.
SELECT format('column %s.%s #%s %s notnull=%s default=%s storage=%s compression=%s', c.relname, a.attname,
              row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum),
              format_type(a.atttypid, a.atttypmod), a.attnotnull,
              pg_get_expr(d.adbin, d.adrelid), a.attstorage, nullif(a.attcompression, ''))
FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
WHERE c.relnamespace = 'place'::regnamespace AND c.relkind IN ('r', 'v')
ORDER BY c.relname, a.attnum;
-- Constraints, by name and definition (errors name them).
SELECT format('constraint %s %s %s %s', c.conrelid::regclass, c.contype, c.conname, pg_get_constraintdef(c.oid))
FROM pg_constraint c WHERE c.connamespace = 'place'::regnamespace ORDER BY 1;
SELECT format('index %s', regexp_replace(pg_get_indexdef(i.indexrelid), 'INDEX \S+ ON', 'INDEX ON'))
FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
WHERE c.relnamespace = 'place'::regnamespace ORDER BY 1;
SELECT format('trigger %s', pg_get_triggerdef(t.oid))
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = 'place'::regnamespace AND NOT t.tgisinternal ORDER BY 1;
-- What pg_dump keeps of the extension's tables.
SELECT format('dumped %s', unnest(extconfig)::regclass) FROM pg_extension WHERE extname = 'pgplace' ORDER BY 1;
-- Every object that belongs to the extension.
SELECT format('member %s', pg_describe_object(d.classid, d.objid, d.objsubid))
FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
WHERE d.refclassid = 'pg_extension'::regclass AND e.extname = 'pgplace' AND d.deptype = 'e'
ORDER BY 1;
-- Views, by their definition.
SELECT format('view %s %s', c.relname, md5(pg_get_viewdef(c.oid)))
FROM pg_class c WHERE c.relnamespace = 'place'::regnamespace AND c.relkind = 'v' ORDER BY 1;
-- Event triggers (they belong to the database, not to schema place).
SELECT format('event trigger %s on %s tags=%s enabled=%s function=%s', e.evtname, e.evtevent, e.evttags,
              e.evtenabled, e.evtfoid::regprocedure)
FROM pg_event_trigger e
JOIN pg_depend d ON d.classid = 'pg_event_trigger'::regclass AND d.objid = e.oid AND d.deptype = 'e'
JOIN pg_extension x ON x.oid = d.refobjid AND x.extname = 'pgplace'
ORDER BY e.evtname;
