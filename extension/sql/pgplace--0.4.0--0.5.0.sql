-- pgplace 0.4.0 -> 0.5.0 (ALTER EXTENSION pgplace UPDATE): placements no longer update
-- their board's row. The settings stay in the table, renamed place.board_settings; the seq
-- and the newest stamp come from the history, and place.boards becomes a view showing the
-- same columns as before.
-- Checked by tests/upgrade/run.sh: an updated database must be exactly a fresh 0.5.0.
\echo Use "ALTER EXTENSION pgplace UPDATE" to load this file. \quit

ALTER TABLE place.boards RENAME TO board_settings;
ALTER INDEX place.boards_pkey RENAME TO board_settings_pkey;
ALTER INDEX place.boards_name_key RENAME TO board_settings_name_key;
-- The names a fresh install gives the CHECK constraints (errors name them).
ALTER TABLE place.board_settings RENAME CONSTRAINT boards_width_check TO board_settings_width_check;
ALTER TABLE place.board_settings RENAME CONSTRAINT boards_height_check TO board_settings_height_check;
ALTER TABLE place.board_settings RENAME CONSTRAINT boards_bits_per_tile_check TO board_settings_bits_per_tile_check;
ALTER TABLE place.board_settings RENAME CONSTRAINT boards_cooldown_check TO board_settings_cooldown_check;
ALTER TABLE place.board_settings RENAME CONSTRAINT boards_state_check TO board_settings_state_check;
ALTER TABLE place.board_settings RENAME CONSTRAINT boards_keyframe_every_check TO board_settings_keyframe_every_check;
ALTER TABLE place.board_settings RENAME CONSTRAINT boards_history_from_check TO board_settings_history_from_check;
ALTER TABLE place.board_settings RENAME CONSTRAINT boards_freeze_after_check TO board_settings_freeze_after_check;
ALTER TABLE place.board_settings RENAME CONSTRAINT boards_check TO board_settings_check;
-- What the history says already (seq = the newest placement's, last_placed_at its stamp).
ALTER TABLE place.board_settings DROP COLUMN seq, DROP COLUMN last_placed_at;
-- No longer updated by every placement: no room to keep for HOT updates.
ALTER TABLE place.board_settings RESET (fillfactor);
COMMENT ON TABLE place.board_settings IS 'pgplace boards'' settings (read place.boards, which adds seq and last_placed_at)';

-- The boards as SQL users read them: the settings, plus
--   seq             the number of accepted placements = the newest placement's seq
--                   (history_from when compact_history removed them all);
--   last_placed_at  the newest placement's stamp (stamps never go back as seqs go up).
-- Both come from the newest history row, found by the primary key's index.
CREATE VIEW place.boards AS
SELECT s.id, s.name, s.width, s.height, s.bits_per_tile, s.palette, s.cooldown, s.state,
       coalesce((SELECT max(p.seq) FROM place.placements p WHERE p.board_id = s.id),
                s.history_from) AS seq,
       s.created_at, s.keyframe_every, s.history_from, s.freeze_after,
       coalesce((SELECT p.placed_at FROM place.placements p WHERE p.board_id = s.id
                 ORDER BY p.seq DESC LIMIT 1),
                (SELECT k.taken_at FROM place.keyframes k
                 WHERE k.board_id = s.id AND k.seq = s.history_from AND s.history_from > 0))
           AS last_placed_at
FROM place.board_settings s;
COMMENT ON VIEW place.boards IS 'pgplace boards: size, tile width, palette, cooldown, state and seq (the number of accepted placements)';

GRANT SELECT ON place.boards TO PUBLIC;

-- Restoring a dump of an earlier version, whose place.boards was a table: pg_dump writes
-- CREATE EXTENSION pgplace without a version, then COPY place.boards with its columns.
-- Rows written to the view go to place.board_settings; seq and last_placed_at are what the
-- history says, so they are not stored. The view's defaults are the table's.
ALTER VIEW place.boards ALTER COLUMN id SET DEFAULT nextval('place.boards_id_seq');
ALTER VIEW place.boards ALTER COLUMN state SET DEFAULT 'open';
ALTER VIEW place.boards ALTER COLUMN created_at SET DEFAULT now();
ALTER VIEW place.boards ALTER COLUMN keyframe_every SET DEFAULT 10000;
ALTER VIEW place.boards ALTER COLUMN history_from SET DEFAULT 0;
CREATE FUNCTION place._insert_board() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO place.board_settings (id, name, width, height, bits_per_tile, palette, cooldown, state,
                                      created_at, keyframe_every, history_from, freeze_after)
    VALUES (NEW.id, NEW.name, NEW.width, NEW.height, NEW.bits_per_tile, NEW.palette, NEW.cooldown,
            NEW.state, NEW.created_at, NEW.keyframe_every, NEW.history_from, NEW.freeze_after);
    RETURN NEW;
END
$$;
CREATE TRIGGER insert_board INSTEAD OF INSERT ON place.boards
FOR EACH ROW EXECUTE FUNCTION place._insert_board();

-- The seq in a board's payload is the board's seq when the change commits: the functions
-- that change a board hold its seq lock, so no placement takes a seq meanwhile. A deletion is
-- announced before the row goes, while its history (gone with it by ON DELETE CASCADE)
-- still says the seq; NOTIFY is sent on commit all the same.
CREATE OR REPLACE FUNCTION place._notify_board_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_catalog.pg_notify('pgplace', place._board_payload(OLD.id,
            (SELECT b.seq FROM place.boards b WHERE b.id = OLD.id), 'deleted'));
        RETURN OLD;
    ELSE
        PERFORM pg_catalog.pg_notify('pgplace', place._board_payload(NEW.id,
            (SELECT b.seq FROM place.boards b WHERE b.id = NEW.id),
            CASE TG_OP WHEN 'INSERT' THEN 'created' ELSE 'settings' END));
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER notify_board_created_or_deleted ON place.board_settings;
CREATE TRIGGER notify_board_created
AFTER INSERT ON place.board_settings
FOR EACH ROW EXECUTE FUNCTION place._notify_board_change();

CREATE TRIGGER notify_board_deleted
BEFORE DELETE ON place.board_settings
FOR EACH ROW EXECUTE FUNCTION place._notify_board_change();

DROP TRIGGER notify_board_settings ON place.board_settings;
-- Only a change of the settings is news (compact_history raising history_from is not).
CREATE TRIGGER notify_board_settings
AFTER UPDATE ON place.board_settings
FOR EACH ROW
WHEN ((OLD.name, OLD.width, OLD.height, OLD.bits_per_tile, OLD.palette, OLD.cooldown, OLD.state, OLD.freeze_after)
      IS DISTINCT FROM
      (NEW.name, NEW.width, NEW.height, NEW.bits_per_tile, NEW.palette, NEW.cooldown, NEW.state, NEW.freeze_after))
EXECUTE FUNCTION place._notify_board_change();
