//! Board regions over real HTTP: a session on a rectangle gets the rectangle's packed
//! tiles, then exactly the placements inside it (edges included, nothing outside), in
//! both forms; under random placements every region session ends equal to the board's
//! rectangle; bad rectangles are refused; a shrinking board resets its regions.

use base64::Engine;
use pgplace_core::bits::TileWidth;
use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{board_bits, connect, create_board, create_users, fresh_database};
use rand::Rng;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const BITS: i64 = 4;

/// A region client: its rectangle's colours, row by row, and the seq it has reached.
struct RegionModel {
    x: i32,
    y: i32,
    width: i32,
    tiles: Vec<u8>,
    seq: i64,
}

impl RegionModel {
    fn from_state(state: &Value) -> Self {
        let r = &state["region"];
        let (x, y, width, height) = (
            r["x"].as_i64().unwrap() as i32,
            r["y"].as_i64().unwrap() as i32,
            r["width"].as_i64().unwrap() as i32,
            r["height"].as_i64().unwrap() as i32,
        );
        let bits = base64::engine::general_purpose::STANDARD
            .decode(state["bits"].as_str().unwrap())
            .unwrap();
        let tile = TileWidth::new(state["bits_per_tile"].as_i64().unwrap()).unwrap();
        let tiles = (0..(width * height) as i64)
            .map(|n| tile.get(&bits, n).unwrap())
            .collect();
        RegionModel {
            x,
            y,
            width,
            tiles,
            seq: state["seq"].as_i64().unwrap(),
        }
    }

    fn set(&mut self, x: i32, y: i32, color: i64) {
        let height = self.tiles.len() as i32 / self.width.max(1);
        assert!(
            x >= self.x && y >= self.y && x < self.x + self.width && y < self.y + height,
            "a tile outside the region: ({x}, {y})"
        );
        self.tiles[((x - self.x) + self.width * (y - self.y)) as usize] = color as u8;
    }

    fn apply(&mut self, event: &Value) {
        match event["action"].as_str().unwrap() {
            "update" => {
                let obj = &event["obj"];
                let seq = obj["seq"].as_i64().unwrap();
                assert!(seq > self.seq, "seq {seq} after {}", self.seq);
                self.seq = seq;
                self.set(
                    obj["x"].as_i64().unwrap() as i32,
                    obj["y"].as_i64().unwrap() as i32,
                    obj["color"].as_i64().unwrap(),
                );
            }
            "tiles" => {
                let (first, last) = (
                    event["seq"][0].as_i64().unwrap(),
                    event["seq"][1].as_i64().unwrap(),
                );
                assert!(
                    first > self.seq && last >= first,
                    "{event} after {}",
                    self.seq
                );
                self.seq = last;
                for t in event["tiles"].as_array().unwrap() {
                    self.set(
                        t[0].as_i64().unwrap() as i32,
                        t[1].as_i64().unwrap() as i32,
                        t[2].as_i64().unwrap(),
                    );
                }
            }
            "reset" => *self = RegionModel::from_state(&event["obj"]),
            "settings" => {}
            other => panic!("unexpected region event {other}: {event}"),
        }
    }

    /// The same rectangle of the packed board.
    fn expected(&self, bits: &[u8], board_width: i32) -> Vec<u8> {
        let tile = TileWidth::new(BITS).unwrap();
        let height = self.tiles.len() as i32 / self.width.max(1);
        let mut out = Vec::new();
        for row in 0..height {
            for col in 0..self.width {
                let n = (self.x + col) as i64 + board_width as i64 * (self.y + row) as i64;
                out.push(tile.get(bits, n).unwrap());
            }
        }
        out
    }
}

async fn poll(http: &Http, session: &Value, seconds: u64) -> Vec<Value> {
    http.ok("session.get_events", json!([session, seconds]))
        .await
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_gets_its_tiles_and_nothing_else() {
    let url = fresh_database("gw_regions").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "regions", (16, 8), BITS as i32, "0").await;
    let users = create_users(&sql, "r", 8).await;
    let place = |i: usize, x: i32, y: i32, color: i32| {
        let (sql, user) = (&sql, users[i]);
        async move {
            sql.execute(
                "SELECT place.place($1, $2, $3, $4, $5)",
                &[&board, &x, &y, &color, &user],
            )
            .await
            .unwrap();
        }
    };
    place(0, 5, 3, 7).await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let session = http.ok("session.create", json!([])).await;
    let rect = json!({"board": board, "x": 4, "y": 2, "width": 5, "height": 3});
    let reply = http
        .ok("session.subscribe", json!([session, "board_region", rect]))
        .await;
    assert_eq!(reply[0], format!("board/{board}/region/4,2,5,3"));
    let mut compact_params = rect.clone();
    compact_params["compact"] = json!(true);
    let compact_reply = http
        .ok(
            "session.subscribe",
            json!([session, "board_region", compact_params]),
        )
        .await;
    assert_eq!(
        compact_reply[0],
        format!("board/{board}/region/4,2,5,3/compact")
    );
    let mut qik = RegionModel::from_state(&reply[1]);
    let mut compact = RegionModel::from_state(&compact_reply[1]);
    assert_eq!(qik.seq, 1);
    assert_eq!(reply[1]["name"], "regions");
    let (_, bits) = board_bits(&sql, board).await;
    assert_eq!(
        qik.tiles,
        qik.expected(&bits, 16),
        "the initial state is the rectangle"
    );
    assert_eq!(qik.tiles[1 + 5], 7, "tile (5, 3) is inside at (1, 1)");

    // The four corners are inside; the tiles just beyond each edge are not.
    let inside = [(4, 2), (8, 2), (4, 4), (8, 4)];
    let outside = [(3, 2), (9, 4), (4, 1), (8, 5)];
    for (i, (x, y)) in outside.iter().chain(inside.iter()).enumerate() {
        place(i, *x, *y, (i + 1) as i32).await;
    }
    let mut qik_events = Vec::new();
    let started = Instant::now();
    while qik.seq < 9 || compact.seq < 9 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "events: {qik_events:?}"
        );
        for event in poll(&http, &session, 2).await {
            if event["key"] == reply[0] {
                qik.apply(&event);
                qik_events.push(event);
            } else {
                compact.apply(&event);
            }
        }
    }
    let seqs: Vec<i64> = qik_events
        .iter()
        .map(|e| e["obj"]["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [6, 7, 8, 9], "only the placements inside, in order");
    assert_eq!(qik_events[0]["old"], json!({"x": 4, "y": 2, "color": 0}));
    let (_, bits) = board_bits(&sql, board).await;
    assert_eq!(qik.tiles, qik.expected(&bits, 16));
    assert_eq!(compact.tiles, qik.tiles);

    // Bad rectangles: refused, nothing subscribed.
    for (params, code) in [
        (
            json!({"board": board, "x": 12, "y": 0, "width": 5, "height": 1}),
            -32602,
        ),
        (
            json!({"board": board, "x": -1, "y": 0, "width": 1, "height": 1}),
            -32602,
        ),
        (
            json!({"board": board, "x": 0, "y": 0, "width": 0, "height": 1}),
            -32602,
        ),
        (
            json!({"board": board, "x": 0, "y": 7, "width": 1, "height": 2}),
            -32602,
        ),
        (json!({"board": board, "x": 0, "y": 0, "width": 1}), -32602),
        (
            json!({"board": board, "x": 0, "y": 0, "width": 1, "height": 1, "zoom": 2}),
            -32602,
        ),
        (
            json!({"board": 4242, "x": 0, "y": 0, "width": 1, "height": 1}),
            -32005,
        ),
    ] {
        assert_eq!(
            http.error_code(
                "session.subscribe",
                json!([session, "board_region", params.clone()])
            )
            .await,
            code,
            "{params}"
        );
    }

    // The board shrinks under the region: a reset with the part that is left.
    sql.execute("SELECT place.resize_board($1, 6, 3)", &[&board])
        .await
        .unwrap();
    let started = Instant::now();
    loop {
        assert!(started.elapsed() < Duration::from_secs(10));
        let events = poll(&http, &session, 2).await;
        if let Some(reset) = events
            .iter()
            .find(|e| e["key"] == reply[0] && e["action"] == "reset")
        {
            assert_eq!(
                reset["obj"]["region"],
                json!({"x": 4, "y": 2, "width": 2, "height": 1})
            );
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_random_placements_every_region_ends_equal_to_the_board() {
    let url = fresh_database("gw_regions_random").await;
    let sql = connect(&url).await;
    // Rectangles up to the whole board: the larger ones are copied from the board in
    // several bands (`Region::fill_band`: 65,536 tiles a band), placements coming between.
    let (width, height) = (400, 300);
    let board = create_board(&sql, "regions_random", (width, height), BITS as i32, "0").await;
    let users = create_users(&sql, "rr", 200).await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let writer = {
        let url = url.clone();
        tokio::spawn(async move {
            let sql = connect(&url).await;
            let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(7);
            for _ in 0..60 {
                let n = rng.random_range(1..50);
                let xs: Vec<i32> = (0..n).map(|_| rng.random_range(0..width)).collect();
                let ys: Vec<i32> = (0..n).map(|_| rng.random_range(0..height)).collect();
                let colors: Vec<i32> = (0..n).map(|_| rng.random_range(0..16)).collect();
                let who: Vec<i64> = (0..n).map(|i| users[i]).collect();
                sql.execute(
                    "SELECT place.place_many($1, $2, $3, $4, $5)",
                    &[&board, &who, &xs, &ys, &colors],
                )
                .await
                .unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let mut sessions = Vec::new();
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(8);
    for i in 0..20 {
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..60))).await;
        let (w, h) = (rng.random_range(1..width), rng.random_range(1..height));
        let params = json!({
            "board": board, "x": rng.random_range(0..width - w), "y": rng.random_range(0..height - h),
            "width": w, "height": h, "compact": i % 2 == 0,
        });
        let session = http.ok("session.create", json!([])).await;
        let reply = http
            .ok(
                "session.subscribe",
                json!([session, "board_region", params]),
            )
            .await;
        sessions.push((session, RegionModel::from_state(&reply[1])));
    }
    writer.await.unwrap();
    let (seq, bits) = board_bits(&sql, board).await;
    for (session, model) in &mut sessions {
        let started = Instant::now();
        while model.seq < seq {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "stuck at seq {} of {seq}",
                model.seq
            );
            for event in poll(&http, session, 1).await {
                model.apply(&event);
            }
            if model.tiles == model.expected(&bits, width) {
                break;
            }
        }
        assert_eq!(
            model.tiles,
            model.expected(&bits, width),
            "the region equals the board's rectangle"
        );
    }
}

/// A region session further behind than its log holds (`--session-buffer`) gets one
/// `reset` with the rectangle as it is, counted as `region_position_lost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_session_too_far_behind_gets_a_reset() {
    let url = fresh_database("gw_regions_behind").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "regions-behind", (16, 8), BITS as i32, "0").await;
    let user = create_users(&sql, "rb", 1).await[0];
    let gw = start_gateway(&url, |c| c.session_buffer = 5).await;
    let http = Http::new(gw.addr);
    let session = http.ok("session.create", json!([])).await;
    let rect = json!({"board": board, "x": 0, "y": 0, "width": 8, "height": 2});
    let reply = http
        .ok("session.subscribe", json!([session, "board_region", rect]))
        .await;
    let series = "pgplace_resets_total{reason=\"region_position_lost\"}";
    let before = http.metric(series).await.unwrap_or(0.0);
    // Twelve placements inside, more than the log keeps, while the session does not poll.
    for i in 0..12 {
        sql.execute(
            "SELECT place.place($1, $2, $3, $4, $5)",
            &[&board, &(i % 8), &(i / 8), &(1 + i % 7), &user],
        )
        .await
        .unwrap();
    }
    // Once this gateway's copy has them all.
    for _ in 0..100 {
        if http.ok("board.get", json!([board])).await["seq"] == 12 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let events = poll(&http, &session, 2).await;
    let resets: Vec<&Value> = events.iter().filter(|e| e["action"] == "reset").collect();
    assert_eq!(resets.len(), 1, "one reset: {events:?}");
    assert_eq!(resets[0]["key"], reply[0]);
    let model = RegionModel::from_state(&resets[0]["obj"]);
    assert_eq!(model.seq, 12, "the rectangle as it is now");
    // (At least: the metrics are the process's, shared with the other tests here.)
    assert!(
        http.metric(series).await.unwrap_or(0.0) >= before + 1.0,
        "counted"
    );
}
