-- pgplace's read functions take no transaction id: a reader in a loop must not bring
-- anti-wraparound vacuums sooner, nor write a commit record per call, and a hot standby
-- has no id to give. Each read below runs in a transaction of its own (the procedure
-- commits after each), which reports whether it was given an id. Two must take one: a
-- placement, which writes, and settled_seq, which locks the board's row (FOR SHARE) to
-- wait out the placements in flight. The board freezes tiles, so that frozen_tiles reads
-- its placements through a cursor.
SELECT place.create_board('readers', 4, 4, 4, '0') AS board \gset
SELECT user_id AS reader, token AS reader_token FROM place.create_user('reader') \gset
SELECT seq AS first_seq FROM place.place(:board, 1, 1, 2, :reader) \gset
SELECT seq FROM place.place(:board, 2, 2, 3, :reader);
SELECT place.build_keyframes(:board);
SELECT place.set_freeze_after(:board, '1 hour');
CREATE TABLE read_calls (n serial, label text, took_xid boolean);
-- calls: pairs of a label and a statement.
CREATE PROCEDURE run_each_alone(calls text[])
LANGUAGE plpgsql AS $$
DECLARE
    i int;
    took boolean;
BEGIN
    FOR i IN 1 .. array_length(calls, 1) BY 2 LOOP
        EXECUTE calls[i + 1];
        took := pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL;
        ROLLBACK;
        INSERT INTO read_calls (label, took_xid) VALUES (calls[i], took);
        COMMIT;
    END LOOP;
END
$$;
CALL run_each_alone(ARRAY[
    'get_tile', format('SELECT place.get_tile(%s, 1, 1)', :board),
    'board_bits', format('SELECT * FROM place.board_bits(%s)', :board),
    'tiles', format('SELECT * FROM place.tiles(%s)', :board),
    'tile_history', format('SELECT * FROM place.tile_history(%s, 1, 1)', :board),
    'user_history', format('SELECT * FROM place.user_history(%s, %s)', :board, :reader),
    'tile_at', format('SELECT place.tile_at(%s, 1, 1, now())', :board),
    'tiles_at', format('SELECT * FROM place.tiles_at(%s, now())', :board),
    'board_at_seq', format('SELECT * FROM place.board_at_seq(%s, %s)', :board, :first_seq),
    'board_at', format('SELECT * FROM place.board_at(%s, now())', :board),
    'frozen_tiles', format('SELECT * FROM place.frozen_tiles(%s, ''infinity'')', :board),
    'render_png', format('SELECT length(place.render_png(%s)) > 0', :board),
    'user_for_token', format('SELECT place.user_for_token(%L)', :'reader_token'),
    'settled_seq', format('SELECT * FROM place.settled_seq(%s)', :board),
    'place', format('SELECT place.place(%s, 3, 3, 1, %s)', :board, :reader)
]);
SELECT label, took_xid FROM read_calls ORDER BY n;
-- frozen_tiles read the tiles it reports (through its cursor):
SELECT count(*) AS frozen_later FROM place.frozen_tiles(:board, 'infinity');
