-- The baseline pgplace's placements are measured against (`./pgplace.sh bench`): the same
-- contract written the straightforward way in PL/pgSQL, as a team without pgplace would.
-- A cooldown claimed by an upsert, the tile rewritten in its 512-byte chunk, the seq
-- bumped on the board's row (whose lock, held to commit, orders the seqs), the history
-- row inserted, one NOTIFY per statement. Boards of 4-bit tiles only; no bans, freezing,
-- keyframes or stamps that follow seqs, which pgplace has on top.
CREATE SCHEMA naive;
CREATE TABLE naive.users (id bigint PRIMARY KEY);
CREATE TABLE naive.boards (
    id       bigint PRIMARY KEY,
    width    int NOT NULL,
    height   int NOT NULL,
    cooldown interval NOT NULL,
    seq      bigint NOT NULL DEFAULT 0
);
CREATE TABLE naive.chunks (
    board_id bigint NOT NULL REFERENCES naive.boards,
    chunk_no int NOT NULL,
    bits     bytea NOT NULL,
    PRIMARY KEY (board_id, chunk_no)
);
CREATE TABLE naive.placements (
    board_id  bigint NOT NULL REFERENCES naive.boards,
    seq       bigint NOT NULL,
    x         int NOT NULL,
    y         int NOT NULL,
    color     int NOT NULL,
    user_id   bigint NOT NULL REFERENCES naive.users,
    placed_at timestamptz NOT NULL,
    PRIMARY KEY (board_id, seq)
);
CREATE INDEX ON naive.placements (board_id, x, y, seq);
CREATE TABLE naive.cooldowns (
    board_id       bigint NOT NULL REFERENCES naive.boards,
    user_id        bigint NOT NULL REFERENCES naive.users,
    last_placed_at timestamptz NOT NULL,
    PRIMARY KEY (board_id, user_id)
);

CREATE FUNCTION naive.notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('naive', (SELECT string_agg(seq || ' ' || x || ' ' || y || ' ' || color, ',') FROM added));
    RETURN NULL;
END $$;
CREATE TRIGGER notify AFTER INSERT ON naive.placements
REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION naive.notify();

CREATE FUNCTION naive.place(b bigint, px int, py int, c int, u bigint, OUT placed bool, OUT seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    w int;
    h int;
    wait interval;
    n int;
    byte int;
BEGIN
    SELECT width, height, cooldown INTO w, h, wait FROM naive.boards WHERE id = b;
    IF NOT FOUND OR px NOT BETWEEN 0 AND w - 1 OR py NOT BETWEEN 0 AND h - 1 OR c NOT BETWEEN 0 AND 15 THEN
        RAISE EXCEPTION 'bad placement' USING ERRCODE = '22003';
    END IF;
    INSERT INTO naive.cooldowns AS k VALUES (b, u, now())
    ON CONFLICT (board_id, user_id) DO UPDATE SET last_placed_at = now()
    WHERE k.last_placed_at <= now() - wait;
    IF NOT FOUND THEN
        placed := false;
        RETURN;
    END IF;
    n := px + py * w;
    byte := (n % 1024) / 2;
    UPDATE naive.chunks SET bits = set_byte(bits, byte, CASE WHEN n % 2 = 0
            THEN (get_byte(bits, byte) & 15) | (c << 4) ELSE (get_byte(bits, byte) & 240) | c END)
    WHERE board_id = b AND chunk_no = n / 1024;
    UPDATE naive.boards SET seq = naive.boards.seq + 1 WHERE id = b RETURNING naive.boards.seq INTO seq;
    INSERT INTO naive.placements VALUES (b, seq, px, py, c, u, now());
    placed := true;
END $$;

-- A batch, set-based where plain SQL makes it easy: one upsert claims every user's
-- cooldown, each accepted tile is rewritten in its chunk, the seq is bumped once, and one
-- INSERT writes the history (one NOTIFY).
CREATE FUNCTION naive.place_many(b bigint, us bigint[], xs int[], ys int[], cs int[])
RETURNS TABLE (ord int, placed bool, seq bigint) LANGUAGE plpgsql AS $$
DECLARE
    w int;
    h int;
    wait interval;
    claimed bigint[];
    accepted int[] := '{}';
    n int;
    byte int;
    first bigint;
    i int;
BEGIN
    SELECT width, height, cooldown INTO w, h, wait FROM naive.boards WHERE id = b;
    IF NOT FOUND OR EXISTS (SELECT FROM unnest(xs, ys, cs) AS t(x, y, c)
                            WHERE x NOT BETWEEN 0 AND w - 1 OR y NOT BETWEEN 0 AND h - 1 OR c NOT BETWEEN 0 AND 15) THEN
        RAISE EXCEPTION 'bad placement' USING ERRCODE = '22003';
    END IF;
    WITH claim AS (
        INSERT INTO naive.cooldowns AS k
        SELECT DISTINCT b, u, now() FROM unnest(us) AS u ORDER BY 2
        ON CONFLICT (board_id, user_id) DO UPDATE SET last_placed_at = now()
        WHERE k.last_placed_at <= now() - wait
        RETURNING k.user_id)
    SELECT array_agg(user_id) INTO claimed FROM claim;
    FOR i IN 1 .. cardinality(us) LOOP
        -- A user's first item places (a second one too without a cooldown).
        IF us[i] = ANY(claimed) AND (wait = '0' OR NOT us[i] = ANY(us[1:i - 1])) THEN
            accepted := accepted || i;
        END IF;
    END LOOP;
    -- Chunks in chunk order, so that two batches never wait for each other in a circle.
    FOR i, n IN SELECT a, xs[a] + ys[a] * w FROM unnest(accepted) AS a ORDER BY (xs[a] + ys[a] * w) / 1024, a LOOP
        byte := (n % 1024) / 2;
        UPDATE naive.chunks SET bits = set_byte(bits, byte, CASE WHEN n % 2 = 0
                THEN (get_byte(bits, byte) & 15) | (cs[i] << 4) ELSE (get_byte(bits, byte) & 240) | cs[i] END)
        WHERE board_id = b AND chunk_no = n / 1024;
    END LOOP;
    UPDATE naive.boards SET seq = naive.boards.seq + cardinality(accepted) WHERE id = b
    RETURNING naive.boards.seq - cardinality(accepted) + 1 INTO first;
    INSERT INTO naive.placements
    SELECT b, first + k - 1, xs[a.j], ys[a.j], cs[a.j], us[a.j], now() FROM unnest(accepted) WITH ORDINALITY AS a(j, k);
    RETURN QUERY SELECT g, g = ANY(accepted), first + array_position(accepted, g) - 1
                 FROM generate_series(1, cardinality(us)) AS g;
END $$;

-- Board 1: 1000x1000 tiles of 4 bits (977 chunks), cooldown 0, users 1..20000.
INSERT INTO naive.boards VALUES (1, 1000, 1000, '0');
INSERT INTO naive.chunks SELECT 1, k, decode(repeat('00', 512), 'hex') FROM generate_series(0, 976) k;
INSERT INTO naive.users SELECT generate_series(1, 20000);
