-- pgplace 0.8.9 -> 0.8.10: palettes carry their colours' names (issue 45).
-- - board_settings.palette_names (and the boards view's last column): one name per colour,
--   NULL for a colour without one; set by place.set_palette_names. create_board names the
--   default palettes' colours (library only), set_palette keeps the name of a colour that
--   stays at its index, and a change of names is a settings notification.
-- - Boards whose palette is a default palette get its names here; whoever may call
--   set_palette may call set_palette_names.

ALTER TABLE place.board_settings
    ADD COLUMN palette_names text[],
    ADD CONSTRAINT palette_names_fit CHECK (cardinality(palette_names) = cardinality(palette));

CREATE OR REPLACE VIEW place.boards AS
SELECT s.id, s.name, s.width, s.height, s.bits_per_tile, s.palette, s.cooldown, s.state,
       coalesce((SELECT max(p.seq) FROM place.placements p WHERE p.board_id = s.id),
                s.history_from) AS seq,
       s.created_at, s.keyframe_every, s.history_from, s.freeze_after,
       coalesce((SELECT p.placed_at FROM place.placements p WHERE p.board_id = s.id
                 ORDER BY p.seq DESC LIMIT 1),
                (SELECT k.taken_at FROM place.keyframes k
                 WHERE k.board_id = s.id AND k.seq = s.history_from AND s.history_from > 0))
           AS last_placed_at,
       s.palette_names
FROM place.board_settings s;

CREATE OR REPLACE FUNCTION place._insert_board() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO place.board_settings (id, name, width, height, bits_per_tile, palette, cooldown, state,
                                      created_at, keyframe_every, history_from, freeze_after,
                                      palette_names)
    VALUES (NEW.id, NEW.name, NEW.width, NEW.height, NEW.bits_per_tile, NEW.palette, NEW.cooldown,
            NEW.state, NEW.created_at, NEW.keyframe_every, NEW.history_from, NEW.freeze_after,
            NEW.palette_names);
    RETURN NEW;
END
$$;

DROP TRIGGER notify_board_settings ON place.board_settings;
CREATE TRIGGER notify_board_settings
AFTER UPDATE ON place.board_settings
FOR EACH ROW
WHEN ((OLD.name, OLD.width, OLD.height, OLD.bits_per_tile, OLD.palette, OLD.cooldown, OLD.state, OLD.freeze_after,
       OLD.palette_names)
      IS DISTINCT FROM
      (NEW.name, NEW.width, NEW.height, NEW.bits_per_tile, NEW.palette, NEW.cooldown, NEW.state, NEW.freeze_after,
       NEW.palette_names))
EXECUTE FUNCTION place._notify_board_change();

-- pgplace::palette_names::set_palette_names
CREATE  FUNCTION place."set_palette_names"(
	"board_id" bigint, /* Option < i64 > */
	"names" TEXT[] /* :: std :: option :: Option < Vec < Option < String > > > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'set_palette_names_wrapper';
COMMENT ON FUNCTION place.set_palette_names(bigint, text[]) IS
    'Names the palette''s colours: one name per colour (1 to 40 characters; NULL for a colour without one), or NULL to name none. Pages show them beside the swatches. set_palette keeps the name of a colour that stays at its index. Listeners get a settings notification.';
COMMENT ON FUNCTION place.set_palette(bigint, text[]) IS
    'Replaces the palette (#rrggbb strings, at most 2^bits_per_tile); it must still name every colour on the board. A colour that stays at its index keeps its name (set_palette_names). Listeners get a settings notification.';
ALTER FUNCTION place.set_palette_names(bigint, text[])
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION place.set_palette_names(bigint, text[]) FROM PUBLIC;
DO $$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN
        SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC'
                   ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END
        FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
        WHERE p.oid = 'place.set_palette(bigint, text[])'::pg_catalog.regprocedure
          AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION place.set_palette_names(bigint, text[]) TO %s', grantee);
    END LOOP;
END
$$;

-- The default palettes' names (pgplace_core::palette and palette_names, as of 0.8.10), for
-- the boards that have such a palette: 1, 2 and 4 bits whole; 8 bits r/Place's sixteen and
-- the 240 colours after them unnamed.
WITH rplace(colours, names) AS (
    VALUES (ARRAY['#ffffff', '#e4e4e4', '#888888', '#222222', '#ffa7d1', '#e50000', '#e59500', '#a06a42',
                  '#e5d900', '#94e044', '#02be01', '#00d3dd', '#0083c7', '#0000ea', '#cf6ee4', '#820080'],
            ARRAY['white', 'light grey', 'grey', 'black', 'pink', 'red', 'orange', 'brown',
                  'yellow', 'light green', 'green', 'cyan', 'blue', 'dark blue', 'magenta', 'purple'])
), levels(level, n) AS (
    SELECT * FROM unnest('{0,95,135,175,215,255}'::int[]) WITH ORDINALITY
), defaults(bits, colours, names) AS (
    SELECT 1, ARRAY['#ffffff', '#000000'], ARRAY['white', 'black']
    UNION ALL
    SELECT 2, ARRAY['#ffffff', '#aaaaaa', '#555555', '#000000'], ARRAY['white', 'light grey', 'dark grey', 'black']
    UNION ALL
    SELECT 4, colours, names FROM rplace
    UNION ALL
    SELECT 8,
           colours
           || ARRAY(SELECT '#' || lpad(to_hex(r.level), 2, '0') || lpad(to_hex(g.level), 2, '0')
                               || lpad(to_hex(b.level), 2, '0')
                    FROM levels r, levels g, levels b ORDER BY r.n, g.n, b.n)
           || ARRAY(SELECT '#' || repeat(lpad(to_hex(8 + 10 * i), 2, '0'), 3)
                    FROM generate_series(0, 23) AS i ORDER BY i),
           names || array_fill(NULL::text, ARRAY[240])
    FROM rplace
)
UPDATE place.board_settings s SET palette_names = d.names
FROM defaults d
WHERE s.bits_per_tile = d.bits AND s.palette = d.colours AND s.palette_names IS NULL;
