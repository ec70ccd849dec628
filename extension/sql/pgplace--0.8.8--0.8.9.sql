-- pgplace 0.8.8 -> 0.8.9: what a newcomer reaches for (issue 45).
-- - place and place_many say why an item was not placed: a `reason` column, 'cooldown' or
--   'frozen' (NULL when placed). Their result type changes, so they are dropped and made
--   again; whoever could execute the old ones may execute the new ones (as in 0.8.7's).
-- - tile_at and tiles_at: the board as it was at a time, tile by tile, with the seq that
--   gave each tile its colour.
-- - delete_board, and erase_user (a person's name, token and sessions go, their placements
--   stay as the user 'erased'). create_user refuses the names pgplace gives its own users
--   ('moderation', 'erased'; library only).
-- - Sign-in from the site that embeds a board: place.user_identities (a JWT's issuer and
--   subject per user) and user_for_subject, which the gateway calls for a checked JWT.
-- - Guests: users.guest, and create_guest, which the gateway calls for a visitor of a
--   board that takes guests.
-- - COMMENT ON SCHEMA place.

COMMENT ON SCHEMA place IS
    'pgplace, a collaborative board: boards, users and every placement (\dt place.*), and the functions that place, look back and moderate (\df place.*; each has a comment: \df+). Start with place.create_board, place.create_user and place.place.';

-- Who may EXECUTE the old functions, kept (in a setting of this transaction: a table
-- made here would belong to the extension) to grant the new ones.
SELECT pg_catalog.set_config('pgplace.update_grants', coalesce(pg_catalog.jsonb_agg(
           pg_catalog.jsonb_build_array(p.proname, CASE a.grantee WHEN 0 THEN 'PUBLIC'
               ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END)), '[]')::text, true)
FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
WHERE p.oid IN ('place.place(bigint, int, int, int, bigint, text)'::pg_catalog.regprocedure,
                'place.place_many(bigint, bigint[], int[], int[], int[], text[])'::pg_catalog.regprocedure)
  AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner;

DROP FUNCTION place.place(bigint, int, int, int, bigint, text);
-- pgplace::placing::place
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
	"next_allowed_at" timestamp with time zone,  /* TimestampWithTimeZone */
	"reason" TEXT  /* Option < & '_ str > */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'place_with_reason_wrapper';

DROP FUNCTION place.place_many(bigint, bigint[], int[], int[], int[], text[]);
-- pgplace::placing::place_many
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
	"next_allowed_at" timestamp with time zone,  /* TimestampWithTimeZone */
	"reason" TEXT  /* Option < & '_ str > */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'place_many_with_reason_wrapper';

ALTER FUNCTION place.place(bigint, int, int, int, bigint, text) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.place_many(bigint, bigint[], int[], int[], int[], text[]) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.place(bigint, int, int, int, bigint, text)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.place_many(bigint, bigint[], int[], int[], int[], text[])
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION place.place(bigint, int, int, int, bigint, text) IS
    'Places one tile (board, x, y, color, user). Not placed: placed = false, reason ''cooldown'' (next_allowed_at says when) or ''frozen'' (the tile is frozen; next_allowed_at is infinity). key (optional, 1 to 200 bytes): a retry with the same key within a day answers with the first placement instead of placing again.';
COMMENT ON FUNCTION place.place_many(bigint, bigint[], int[], int[], int[], text[]) IS
    'Places many tiles in array order in one transaction, with the rules of place(); one row per item, with place()''s reason. keys (optional: NULL, or one per item, NULL for none) as place()''s key.';

-- pgplace::past_tiles::tile_at
CREATE  FUNCTION place."tile_at"(
	"board_id" bigint, /* Option < i64 > */
	"x" INT, /* Option < i32 > */
	"y" INT, /* Option < i32 > */
	"at" timestamp with time zone /* Option < TimestampWithTimeZone > */
) RETURNS INT /* i32 */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'tile_at_wrapper';

-- pgplace::past_tiles::tiles_at
CREATE  FUNCTION place."tiles_at"(
	"board_id" bigint, /* Option < i64 > */
	"at" timestamp with time zone, /* Option < TimestampWithTimeZone > */
	"x" INT DEFAULT 0, /* Option < i32 > */
	"y" INT DEFAULT 0, /* Option < i32 > */
	"width" INT DEFAULT NULL, /* Option < i32 > */
	"height" INT DEFAULT NULL /* Option < i32 > */
) RETURNS TABLE (
	"x" INT,  /* i32 */
	"y" INT,  /* i32 */
	"color" INT,  /* i32 */
	"seq" bigint  /* Option < i64 > */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'tiles_at_wrapper';

COMMENT ON FUNCTION place.tile_at(bigint, int, int, timestamptz) IS
    'The colour (palette index) tile (x, y) had at a time: right after the newest placement stamped at or before it.';
COMMENT ON FUNCTION place.tiles_at(bigint, timestamptz, int, int, int, int) IS
    'The tiles of the rectangle (x, y, width, height; NULL: to the edge) as they were at a time, row by row: colour, and the seq of the placement that gave it (NULL: none in the history).';
ALTER FUNCTION place.tile_at(bigint, int, int, timestamptz) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.tiles_at(bigint, timestamptz, int, int, int, int) SET search_path = pg_catalog, pg_temp;

-- pgplace::erasing::delete_board
CREATE  FUNCTION place."delete_board"(
	"board_id" bigint /* Option < i64 > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'delete_board_wrapper';

-- pgplace::erasing::erase_user
CREATE  FUNCTION place."erase_user"(
	"user_id" bigint /* Option < i64 > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'erase_user_wrapper';

COMMENT ON FUNCTION place.delete_board(bigint) IS
    'Deletes a board with its history (waiting for placements in flight); its subscribers get a deleted event. Returns its last seq.';
COMMENT ON FUNCTION place.erase_user(bigint) IS
    'Erases a person: their name, token, sessions, bans and placement keys go; their placements stay, made by the user "erased" (seqs, tiles and board_at unchanged). Returns how many placements.';
ALTER FUNCTION place.delete_board(bigint)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.erase_user(bigint)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE TABLE place.user_identities (
    issuer  text NOT NULL,
    subject text NOT NULL,
    user_id bigint NOT NULL REFERENCES place.users (id) ON DELETE CASCADE,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX user_identities_user_idx ON place.user_identities (user_id);
COMMENT ON TABLE place.user_identities IS 'The identity provider''s issuer and subject of each user who signs in with a JWT (place.user_for_subject)';
SELECT pg_catalog.pg_extension_config_dump('place.user_identities', '');

-- pgplace::users::user_for_subject
CREATE  FUNCTION place."user_for_subject"(
	"issuer" TEXT, /* Option < & str > */
	"subject" TEXT, /* Option < & str > */
	"name" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"user_id" bigint,  /* i64 */
	"user_name" TEXT  /* String */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'user_for_subject_wrapper';
COMMENT ON FUNCTION place.user_for_subject(text, text, text) IS
    'The user a site''s identity provider calls subject (a JWT''s iss and sub, checked by the caller), made on first sight with the offered name (free, or with the user''s id after it).';
ALTER FUNCTION place.user_for_subject(text, text, text)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION place.user_for_subject(text, text, text) FROM PUBLIC;

ALTER TABLE place.users ADD COLUMN guest boolean NOT NULL DEFAULT false;

-- pgplace::users::create_guest
CREATE  FUNCTION place."create_guest"() RETURNS TABLE (
	"user_id" bigint,  /* i64 */
	"user_name" TEXT,  /* String */
	"token" TEXT  /* String */
)
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'create_guest_wrapper';
COMMENT ON FUNCTION place.create_guest() IS
    'A guest (users.guest): a user with a generated name (guest-...) and a token, shown this once. For the gateway, which bounds how many an address makes and where they place.';
ALTER FUNCTION place.create_guest()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION place.create_guest() FROM PUBLIC;

-- As the install script does for every SECURITY DEFINER function: nobody but the owner
-- until sql/roles.sql grants them.
REVOKE EXECUTE ON FUNCTION place.place(bigint, int, int, int, bigint, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.place_many(bigint, bigint[], int[], int[], int[], text[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.delete_board(bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.erase_user(bigint) FROM PUBLIC;

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
