-- pgplace 0.8.0 -> 0.8.1: the change feed's reader sets the staged JSON side by side.
--
-- place.change_feed no longer takes each staged row's JSON apart and builds an object per
-- change: a position's changes come as pgplace staged them, "staged":[{"relid":…,
-- "table":…,"rows":[[action, key, obj, old], …]}, …] (the gateway of 0.8.1 reads both this
-- and 0.8.0's "changes":[{…}]). Nothing else changes; no data is touched.

-- One summary per position after `after_pos` (at most lim), for the gateway:
-- {"type":"changes","v":1,"pos":…,"at":…} with the changes themselves when they are small,
-- "staged":[{"relid":…,"table":…,"rows":[[action, key, obj, old], …]}, …] in the order
-- they were made, else the tables' oids, "relids":[…] (the gateway then reads every view
-- of those tables). Read by the gateway from the log, never taken from a notification.
CREATE OR REPLACE FUNCTION place.change_feed(after_pos bigint, lim int DEFAULT 100)
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

-- CREATE OR REPLACE keeps the grants and the comment, not the settings.
ALTER FUNCTION place.change_feed(bigint, int) SET enable_seqscan = off SET jit = off;
