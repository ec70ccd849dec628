-- pgplace's read functions take no transaction id: a reader in a loop must not bring
-- anti-wraparound vacuums sooner, nor write a commit record per call, and a hot standby
-- has no id to give. Each read below runs in a transaction of its own (the procedure
-- commits after each), which reports whether it was given an id. Two must take one: a
-- placement, which writes, and settled_seq, which locks the board's row (FOR SHARE) to
-- wait out the placements in flight.
SELECT place.create_board('readers', 4, 4, 4, '0') AS board \gset
SELECT user_id AS reader FROM place.create_user('reader') \gset
SELECT seq AS first_seq FROM place.place(:board, 1, 1, 2, :reader) \gset
SELECT seq FROM place.place(:board, 2, 2, 3, :reader);
SELECT place.build_keyframes(:board);
CREATE TABLE read_calls (n serial, call text, took_xid boolean);
CREATE PROCEDURE run_each_alone(calls text[])
LANGUAGE plpgsql AS $$
DECLARE
    call text;
    took boolean;
BEGIN
    FOREACH call IN ARRAY calls LOOP
        EXECUTE call;
        took := pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL;
        ROLLBACK;
        INSERT INTO read_calls (call, took_xid) VALUES (call, took);
        COMMIT;
    END LOOP;
END
$$;
CALL run_each_alone(ARRAY[
    format('SELECT place.get_tile(%s, 1, 1)', :board),
    format('SELECT * FROM place.board_bits(%s)', :board),
    format('SELECT * FROM place.tiles(%s)', :board),
    format('SELECT * FROM place.tile_history(%s, 1, 1)', :board),
    format('SELECT * FROM place.user_history(%s, %s)', :board, :reader),
    format('SELECT place.tile_at(%s, 1, 1, now())', :board),
    format('SELECT * FROM place.tiles_at(%s, now())', :board),
    format('SELECT * FROM place.board_at_seq(%s, %s)', :board, :first_seq),
    format('SELECT * FROM place.board_at(%s, now())', :board),
    format('SELECT * FROM place.frozen_tiles(%s)', :board),
    format('SELECT length(place.render_png(%s)) > 0', :board),
    format('SELECT * FROM place.settled_seq(%s)', :board),
    format('SELECT place.place(%s, 3, 3, 1, %s)', :board, :reader)
]);
SELECT call, took_xid FROM read_calls ORDER BY n;
