-- pgplace 0.8.6 -> 0.8.7: idempotency keys for placements. place(..., key) and
-- place_many(..., keys) answer a retry of a keyed placement with the first placement
-- (extension/src/placement_keys.rs). The functions gain a parameter, so they are made
-- anew: whoever could EXECUTE the old ones may EXECUTE the new ones.

-- Idempotency keys (since 0.8.7): a client's name for one placement, so that its retry
-- answers with the placement instead of placing again (extension/src/placement_keys.rs).
-- A row is written by the call that places under the key and holds the placement's seq;
-- a refused placement's key is removed. Kept a day: each call that adds keys removes as
-- many expired ones (made_at_idx).
CREATE TABLE place.placement_keys (
    board_id        bigint NOT NULL REFERENCES place.board_settings (id) ON DELETE CASCADE,
    user_id         bigint NOT NULL REFERENCES place.users (id) ON DELETE CASCADE,
    key             text NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 200),
    x               int NOT NULL,
    y               int NOT NULL,
    color           int NOT NULL,
    made_at         timestamptz NOT NULL,
    -- NULL only inside the call that made the row.
    seq             bigint,
    next_allowed_at timestamptz,
    PRIMARY KEY (board_id, user_id, key)
);
CREATE INDEX placement_keys_made_at_idx ON place.placement_keys (made_at);
COMMENT ON TABLE place.placement_keys IS 'Idempotency keys of placements (place(..., key), place_many(..., keys)): a retry with the key within a day answers with the placement''s seq';
SELECT pg_catalog.pg_extension_config_dump('place.placement_keys', '');

-- Who may EXECUTE the old functions, kept (in a setting of this transaction: a table
-- made here would belong to the extension) to grant the new ones.
SELECT pg_catalog.set_config('pgplace.update_grants', coalesce(pg_catalog.jsonb_agg(
           pg_catalog.jsonb_build_array(p.proname, CASE a.grantee WHEN 0 THEN 'PUBLIC'
               ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END)), '[]')::text, true)
FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
WHERE p.oid IN ('place.place(bigint, int, int, int, bigint)'::pg_catalog.regprocedure,
                'place.place_many(bigint, bigint[], int[], int[], int[])'::pg_catalog.regprocedure)
  AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner;

DROP FUNCTION place.place(bigint, int, int, int, bigint);
DROP FUNCTION place.place_many(bigint, bigint[], int[], int[], int[]);

CREATE  FUNCTION place."place"(
	"board_id" bigint, /* Option < i64 > */
	"x" INT, /* Option < i32 > */
	"y" INT, /* Option < i32 > */
	"color" INT, /* Option < i32 > */
	"user_id" bigint, /* Option < i64 > */
	"key" TEXT DEFAULT NULL /* Option < String > */
) RETURNS TABLE (
	"placed" bool,  /* bool */
	"seq" bigint,  /* Option < i64 > */
	"next_allowed_at" timestamp with time zone  /* TimestampWithTimeZone */
)
VOLATILE PARALLEL UNSAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'place_keyed_wrapper';

CREATE  FUNCTION place."place_many"(
	"board_id" bigint, /* Option < i64 > */
	"user_ids" bigint[], /* :: std :: option :: Option < Vec < Option < i64 > > > */
	"xs" INT[], /* :: std :: option :: Option < Vec < Option < i32 > > > */
	"ys" INT[], /* :: std :: option :: Option < Vec < Option < i32 > > > */
	"colors" INT[], /* :: std :: option :: Option < Vec < Option < i32 > > > */
	"keys" TEXT[] DEFAULT NULL /* :: std :: option :: Option < Vec < Option < String > > > */
) RETURNS TABLE (
	"ord" INT,  /* i32 */
	"placed" bool,  /* bool */
	"seq" bigint,  /* Option < i64 > */
	"next_allowed_at" timestamp with time zone  /* TimestampWithTimeZone */
)
VOLATILE PARALLEL UNSAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'place_many_keyed_wrapper';

-- As functions.sql sets them.
ALTER FUNCTION place.place(bigint, int, int, int, bigint, text) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.place_many(bigint, bigint[], int[], int[], int[], text[]) SET plan_cache_mode = force_generic_plan;
COMMENT ON FUNCTION place.place(bigint, int, int, int, bigint, text) IS
    'Places one tile (board, x, y, color, user). Inside the cooldown: placed = false and next_allowed_at says when. key (optional, 1 to 200 bytes): a retry with the same key within a day answers with the first placement instead of placing again.';
COMMENT ON FUNCTION place.place_many(bigint, bigint[], int[], int[], int[], text[]) IS
    'Places many tiles in array order in one transaction, with the rules of place(); one row per item. keys (optional: NULL, or one per item, NULL for none) as place()''s key.';
ALTER FUNCTION place.place(bigint, int, int, int, bigint, text)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.place_many(bigint, bigint[], int[], int[], int[], text[])
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION place.place(bigint, int, int, int, bigint, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.place_many(bigint, bigint[], int[], int[], int[], text[]) FROM PUBLIC;

DO $$
DECLARE
    g jsonb;
BEGIN
    FOR g IN SELECT pg_catalog.jsonb_array_elements(pg_catalog.current_setting('pgplace.update_grants')::jsonb) LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION place.%I%s TO %s', g->>0,
            CASE g->>0 WHEN 'place' THEN '(bigint, int, int, int, bigint, text)'
                       ELSE '(bigint, bigint[], int[], int[], int[], text[])' END,
            g->>1);
    END LOOP;
END
$$;
