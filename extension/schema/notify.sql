-- Change notifications on channel 'pgplace' (payload format: README, "Notifications").
-- NOTIFY is delivered only on commit, so listeners never see a rolled-back placement.

-- Placements are announced by the library as it writes them (since 0.8.4:
-- extension/src/notify.rs), one set of payloads per call, each under NOTIFY's 8,000-byte
-- limit.

-- The seq in a board's payload is the board's seq when the change commits: the functions
-- that change a board hold its seq lock, so no placement takes a seq meanwhile. A deletion is
-- announced before the row goes, while its history (gone with it after the statement, by
-- place._drop_board_history) still says the seq; NOTIFY is sent on commit all the same.
CREATE FUNCTION place._notify_board_change() RETURNS trigger
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

CREATE TRIGGER notify_board_created
AFTER INSERT ON place.board_settings
FOR EACH ROW EXECUTE FUNCTION place._notify_board_change();

CREATE TRIGGER notify_board_deleted
BEFORE DELETE ON place.board_settings
FOR EACH ROW EXECUTE FUNCTION place._notify_board_change();

-- Only a change of the settings is news (compact_history raising history_from is not).
CREATE TRIGGER notify_board_settings
AFTER UPDATE ON place.board_settings
FOR EACH ROW
WHEN ((OLD.name, OLD.width, OLD.height, OLD.bits_per_tile, OLD.palette, OLD.cooldown, OLD.state, OLD.freeze_after,
       OLD.palette_names)
      IS DISTINCT FROM
      (NEW.name, NEW.width, NEW.height, NEW.bits_per_tile, NEW.palette, NEW.cooldown, NEW.state, NEW.freeze_after,
       NEW.palette_names))
EXECUTE FUNCTION place._notify_board_change();
