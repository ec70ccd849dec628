-- How the functions run, and what \df+ place.* shows of them.

-- The hot paths run a handful of kept SPI plans with parameters; left to choose, the plan
-- cache re-plans them on every call (a custom plan looks cheaper for an array parameter),
-- which was a seventh of place()'s CPU. Their generic plans are the right ones.
ALTER FUNCTION place.place(bigint, int, int, int, bigint) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.place_many(bigint, bigint[], int[], int[], int[]) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.board_bits(bigint) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.get_tile(bigint, int, int) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.user_for_token(text) SET plan_cache_mode = force_generic_plan;

COMMENT ON FUNCTION place.create_board(text, int, int, int, interval, text[]) IS
    'A new empty board: name, width, height, bits_per_tile (1, 2, 4, 8), cooldown, palette (#rrggbb strings; NULL = default). Returns its id.';
COMMENT ON FUNCTION place.create_user(text) IS
    'A new user and their token (256 random bits, shown only this once; stored as SHA-256).';
COMMENT ON FUNCTION place.user_for_token(text) IS
    'The user a token belongs to, or NULL.';
COMMENT ON FUNCTION place.place(bigint, int, int, int, bigint) IS
    'Places one tile (board, x, y, color, user). Inside the cooldown: placed = false and next_allowed_at says when.';
COMMENT ON FUNCTION place.place_many(bigint, bigint[], int[], int[], int[]) IS
    'Places many tiles in array order in one transaction, with the rules of place(); one row per item.';
COMMENT ON FUNCTION place.board_bits(bigint) IS
    'The packed board (tile n = x + width*y at bits [n*k, (n+1)*k) from the MSB of byte 0) and the seq it reflects.';
COMMENT ON FUNCTION place.get_tile(bigint, int, int) IS
    'The colour (palette index) of tile (x, y).';
COMMENT ON FUNCTION place.bitfield_get(bytea, int, bigint) IS
    'Tile n of a packed bytea (Redis BITFIELD GET u<k> #n); n outside the bytea is an error.';
COMMENT ON FUNCTION place.bitfield_set(bytea, int, bigint, int) IS
    'A copy of a packed bytea with tile n set (Redis BITFIELD SET u<k> #n); never changes its length.';
COMMENT ON FUNCTION place.set_cooldown(bigint, interval) IS
    'Changes a board''s cooldown at once (0 to 366 days); listeners get a settings notification.';
COMMENT ON FUNCTION place.set_board_state(bigint, text) IS
    'open or paused (a paused board refuses placements); listeners get a settings notification.';
COMMENT ON FUNCTION place._placement_payloads(bigint[], bigint[], int[], int[], int[], bigint[], timestamptz[]) IS
    'Internal: the NOTIFY payloads for rows inserted into place.placements.';
COMMENT ON FUNCTION place._apply_tiles(bytea, int, bigint[], int[]) IS
    'Internal: a chunk with tiles set in order (used by place and place_many).';
COMMENT ON FUNCTION place._board_payload(bigint, bigint, text) IS
    'Internal: the NOTIFY payload for a board created, changed or deleted.';
COMMENT ON FUNCTION place._notify_placements() IS 'Internal: statement trigger announcing placements.';
COMMENT ON FUNCTION place._notify_board_change() IS 'Internal: row trigger announcing board changes.';
