//! What anonymous clients can make a gateway hold: distinct `board_region` rectangles are
//! copies of their tiles, so a board serves a bounded number of them (its region budget)
//! and one address a bounded share of those; every other session on a rectangle shares its
//! copy. A real gateway process, its resident memory read from /proc.

use pgplace_tests::gateway::Http;
use pgplace_tests::processes::GatewayProcess;
use pgplace_tests::{connect, create_board, fresh_database};
use serde_json::{json, Value};

const TOO_MANY: i64 = -32007;
/// The default region budget of a board (`--max-region-tiles-per-board`) and of an address
/// (`--max-regions-per-address`).
const BOARD_TILES: i64 = 16_777_216;
const PER_ADDRESS: usize = 16;

/// A near-full rectangle of the 1000x1000 board, distinct for each `n` below 200 (even
/// width: whole bytes at 4 bits a tile).
fn size(n: i32) -> (i32, i32) {
    (1000 - 2 * (n % 10), 1000 - n / 10)
}

fn rectangle(board: i64, n: i32) -> Value {
    let (width, height) = size(n);
    json!({"board": board, "x": 0, "y": 0, "width": width, "height": height})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distinct_regions_are_bounded_per_board_and_per_address() {
    let _alone = pgplace_tests::alone();
    let url = fresh_database("gw_memory").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "memory", (1000, 1000), 4, "0").await;
    let dir = std::env::temp_dir().join("pgplace-memory");
    std::fs::create_dir_all(&dir).unwrap();
    let gateway = GatewayProcess::start("gw_memory", &url, &dir, &[]);
    gateway.wait_healthy().await;
    let http = Http::new(gateway.addr);
    // The board mirrored first, so that what follows is the regions' cost alone.
    let watcher = http.ok("session.create", json!([])).await;
    http.ok(
        "session.subscribe",
        json!([watcher, "board", {"board": board}]),
    )
    .await;
    let before = gateway.rss().expect("the gateway's RSS");

    // One address makes as many distinct rectangles as it may ...
    let a = "198.51.100.1";
    for n in 0..PER_ADDRESS as i32 {
        let session = http.call_as(a, "session.create", json!([])).await.unwrap();
        http.call_as(
            a,
            "session.subscribe",
            json!([session, "board_region", rectangle(board, n)]),
        )
        .await
        .unwrap();
    }
    // ... and no more, even small ones the board would have room for.
    let session = http.call_as(a, "session.create", json!([])).await.unwrap();
    for n in 0..4 {
        let small = json!({"board": board, "x": 10 * n, "y": 0, "width": 10, "height": 10});
        let error = http
            .call_as(
                a,
                "session.subscribe",
                json!([session, "board_region", small]),
            )
            .await
            .unwrap_err();
        assert_eq!(error["code"], TOO_MANY, "{error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("198.51.100.1 made its most"),
            "{error}"
        );
    }
    // Other addresses: the board's budget is spent by those sixteen (each ~1 M tiles).
    let tiles = |n: i32| size(n).0 as i64 * size(n).1 as i64;
    let held: i64 = (0..PER_ADDRESS as i32).map(tiles).sum();
    assert!(
        (20..200).all(|n| held + tiles(n) > BOARD_TILES),
        "the test's rectangles fill the budget"
    );
    for i in 0..10 {
        let b = format!("203.0.113.{}", 10 + i);
        let session = http.call_as(&b, "session.create", json!([])).await.unwrap();
        for j in 0..PER_ADDRESS as i32 {
            let error = http
                .call_as(
                    &b,
                    "session.subscribe",
                    json!([session, "board_region", rectangle(board, 20 + 16 * i + j)]),
                )
                .await
                .unwrap_err();
            assert_eq!(error["code"], TOO_MANY, "{error}");
            assert!(
                error["message"]
                    .as_str()
                    .unwrap()
                    .contains("serves its most distinct regions"),
                "{error}"
            );
        }
        // A rectangle that is served already is shared, whoever asks.
        let shared = http
            .call_as(
                &b,
                "session.subscribe",
                json!([session, "board_region", rectangle(board, 3)]),
            )
            .await
            .unwrap();
        assert!(shared[0].as_str().unwrap().contains("region"), "{shared}");
    }
    // Sixteen copies of ~1 M tiles: 8 MB of bits and 11 MB of JSON states; 64 MB leaves
    // room for the allocator. Without the budget, the 180 rectangles asked for above
    // would be copied each: over 200 MB.
    let grown = gateway
        .rss()
        .expect("the gateway's RSS")
        .saturating_sub(before);
    println!(
        "gateway_memory: 196 region subscribes, 16 copies: RSS +{:.1} MB",
        grown as f64 / 1e6
    );
    assert!(
        grown < 64 << 20,
        "the regions grew the gateway by {} MB",
        grown >> 20
    );
}
