-- place.bitfield_get / bitfield_set: Redis BITFIELD u<k> #n layout.
-- r/Place: tile 0 is the high nibble of byte 0.
SELECT place.bitfield_set('\x0000'::bytea, 4, 0, 10) AS even_tile_high_nibble;
SELECT place.bitfield_set('\x0000'::bytea, 4, 1, 3) AS odd_tile_low_nibble;
SELECT place.bitfield_set('\x00'::bytea, 1, 0, 1) AS first_bit_is_msb;
SELECT place.bitfield_set('\x00'::bytea, 1, 7, 1) AS last_bit_is_lsb;
SELECT place.bitfield_set('\x00'::bytea, 2, 1, 3) AS two_bit_tile_1;
SELECT place.bitfield_set('\x0000'::bytea, 8, 1, 255) AS byte_tiles;
SELECT place.bitfield_get('\xa30f'::bytea, 4, n) AS nibble, n FROM generate_series(0, 3) n;
SELECT place.bitfield_get('\x81'::bytea, 1, n) AS bit, n FROM generate_series(0, 7) n;
SELECT place.bitfield_get(place.bitfield_set('\x5555'::bytea, 2, 5, 2), 2, 5) AS round_trip;
-- Setting never changes the length.
SELECT length(place.bitfield_set('\x000000'::bytea, 1, 23, 1)) AS same_length;

-- Errors: n outside the bytea (unlike Redis, no padding), bad widths, values, NULLs.
SELECT expect_error($$SELECT place.bitfield_get('\x00'::bytea, 4, 2)$$);
SELECT expect_error($$SELECT place.bitfield_get('\x00'::bytea, 4, -1)$$);
SELECT expect_error($$SELECT place.bitfield_set('\x00'::bytea, 1, 100000000, 1)$$);
SELECT expect_error($$SELECT place.bitfield_get(''::bytea, 8, 0)$$);
SELECT expect_error($$SELECT place.bitfield_get('\x00'::bytea, 3, 0)$$);
SELECT expect_error($$SELECT place.bitfield_get('\x00'::bytea, 0, 0)$$);
SELECT expect_error($$SELECT place.bitfield_set('\x00'::bytea, 16, 0, 1)$$);
SELECT expect_error($$SELECT place.bitfield_set('\x00'::bytea, 4, 0, 16)$$);
SELECT expect_error($$SELECT place.bitfield_set('\x00'::bytea, 4, 0, -1)$$);
SELECT expect_error($$SELECT place.bitfield_get(NULL, 4, 0)$$);
SELECT expect_error($$SELECT place.bitfield_get('\x00'::bytea, NULL, 0)$$);
SELECT expect_error($$SELECT place.bitfield_get('\x00'::bytea, 4, NULL)$$);
SELECT expect_error($$SELECT place.bitfield_set('\x00'::bytea, 4, 0, NULL)$$);
