//! What a LISTENer on channel `pgplace` receives: after commit only, one set of payloads
//! per statement, every payload under NOTIFY's limit, every seq exactly once.

use pgplace_core::payload::{
    BoardChange, BoardPayload, Payload, Tile, TilesPayload, MAX_INLINE_TILES, MAX_PAYLOAD_BYTES,
};
use pgplace_tests::{connect, create_board, create_users, fresh_database, listen};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::timeout;
use tokio_postgres::Notification;

async fn next_payload(rx: &mut UnboundedReceiver<Notification>) -> Payload {
    let n = timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("a notification within 5 s")
        .expect("listener alive");
    assert_eq!(n.channel(), "pgplace");
    assert!(
        n.payload().len() <= MAX_PAYLOAD_BYTES,
        "{} bytes",
        n.payload().len()
    );
    Payload::decode(n.payload()).unwrap_or_else(|e| panic!("undecodable {:?}: {e}", n.payload()))
}

async fn next_tiles(rx: &mut UnboundedReceiver<Notification>) -> TilesPayload {
    match next_payload(rx).await {
        Payload::Tiles(t) => t,
        other => panic!("expected tiles, got {other:?}"),
    }
}

async fn assert_silent(rx: &mut UnboundedReceiver<Notification>) {
    if let Ok(n) = timeout(Duration::from_millis(300), rx.recv()).await {
        panic!("unexpected notification {n:?}");
    }
}

#[tokio::test]
async fn a_committed_placement_is_announced_with_its_tile_and_time() {
    let url = fresh_database("pgplace_test_notify_one").await;
    let client = connect(&url).await;
    let board = create_board(&client, "n", (10, 10), 4, "0").await;
    let user = create_users(&client, "n", 1).await[0];
    let (_listener, mut rx) = listen(&url).await;

    client
        .query(
            "SELECT * FROM place.place($1, 3, 4, 5, $2)",
            &[&board, &user],
        )
        .await
        .unwrap();
    let p = next_tiles(&mut rx).await;
    let at: i64 = client
        .query_one(
            "SELECT (extract(epoch FROM placed_at) * 1000000)::bigint FROM place.placements WHERE board_id = $1 AND seq = 1",
            &[&board],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!((p.board, p.first, p.last, p.at), (board, 1, 1, Some(at)));
    assert_eq!(p.tiles, Some(vec![Tile(3, 4, 5, user)]));
    assert_silent(&mut rx).await;
}

#[tokio::test]
async fn nothing_is_announced_before_commit_or_after_rollback() {
    let url = fresh_database("pgplace_test_notify_rollback").await;
    let mut client = connect(&url).await;
    let board = create_board(&client, "n", (10, 10), 4, "0").await;
    let user = create_users(&client, "n", 1).await[0];
    let (_listener, mut rx) = listen(&url).await;

    let tx = client.transaction().await.unwrap();
    tx.query(
        "SELECT * FROM place.place($1, 1, 1, 1, $2)",
        &[&board, &user],
    )
    .await
    .unwrap();
    tx.query("SELECT place.set_cooldown($1, '1 minute')", &[&board])
        .await
        .unwrap();
    assert_silent(&mut rx).await;
    tx.rollback().await.unwrap();
    assert_silent(&mut rx).await;

    let tx = client.transaction().await.unwrap();
    tx.query(
        "SELECT * FROM place.place($1, 2, 2, 2, $2)",
        &[&board, &user],
    )
    .await
    .unwrap();
    assert_silent(&mut rx).await;
    tx.commit().await.unwrap();
    // The rolled-back placement used no seq: the committed one is seq 1.
    let p = next_tiles(&mut rx).await;
    assert_eq!(
        (p.first, p.last, p.tiles),
        (1, 1, Some(vec![Tile(2, 2, 2, user)]))
    );
    assert_silent(&mut rx).await;
}

#[tokio::test]
async fn a_big_batch_splits_into_consecutive_payloads_under_the_limit() {
    let url = fresh_database("pgplace_test_notify_split").await;
    let client = connect(&url).await;
    let board = create_board(&client, "n", (1000, 1000), 8, "0").await;
    let user = create_users(&client, "n", 1).await[0];
    let (_listener, mut rx) = listen(&url).await;

    let n = 3000;
    let xs: Vec<i32> = (0..n).map(|i| i % 1000).collect();
    let ys: Vec<i32> = (0..n).map(|i| (i * 7) % 1000).collect();
    let colors: Vec<i32> = (0..n).map(|i| 100 + i % 156).collect();
    let users = vec![user; n as usize];
    client
        .query(
            "SELECT * FROM place.place_many($1, $2, $3, $4, $5)",
            &[&board, &users, &xs, &ys, &colors],
        )
        .await
        .unwrap();

    let mut tiles = Vec::new();
    let mut payloads = 0;
    while tiles.len() < n as usize {
        let p = next_tiles(&mut rx).await;
        assert_eq!(
            p.first,
            tiles.len() as i64 + 1,
            "payloads cover consecutive seqs in order"
        );
        let chunk = p.tiles.expect("a batch this size travels inline");
        assert_eq!(chunk.len() as i64, p.last - p.first + 1);
        tiles.extend(chunk);
        payloads += 1;
    }
    assert!(payloads > 1, "3000 tiles do not fit one payload");
    let expected: Vec<Tile> = (0..n as usize)
        .map(|i| Tile(xs[i], ys[i], colors[i], user))
        .collect();
    assert_eq!(tiles, expected);
    assert_silent(&mut rx).await;
}

#[tokio::test]
async fn a_huge_statement_refers_to_the_history() {
    let url = fresh_database("pgplace_test_notify_huge").await;
    let client = connect(&url).await;
    let board = create_board(&client, "n", (1000, 1000), 4, "0").await;
    let user = create_users(&client, "n", 1).await[0];
    let (_listener, mut rx) = listen(&url).await;

    let n = MAX_INLINE_TILES as i32 + 1;
    client
        .query(
            "SELECT * FROM place.place_many($1, array_fill($2::bigint, ARRAY[$3::int]), \
             ARRAY(SELECT g % 1000 FROM generate_series(1, $3::int) g), ARRAY(SELECT g / 1000 FROM generate_series(1, $3::int) g), \
             array_fill(1, ARRAY[$3::int]))",
            &[&board, &user, &n],
        )
        .await
        .unwrap();
    let p = next_tiles(&mut rx).await;
    assert_eq!(
        (p.board, p.first, p.last, p.at, p.tiles),
        (board, 1, i64::from(n), None, None)
    );
    assert_silent(&mut rx).await;
}

#[tokio::test]
async fn board_changes_are_announced_but_placements_alone_are_not_settings() {
    let url = fresh_database("pgplace_test_notify_board").await;
    let client = connect(&url).await;
    let (_listener, mut rx) = listen(&url).await;
    let board = create_board(&client, "n", (10, 10), 2, "0").await;
    assert_eq!(
        next_payload(&mut rx).await,
        Payload::Board(BoardPayload::new(board, 0, BoardChange::Created))
    );

    let user = create_users(&client, "n", 1).await[0];
    client
        .query(
            "SELECT * FROM place.place($1, 0, 0, 1, $2)",
            &[&board, &user],
        )
        .await
        .unwrap();
    assert!(matches!(next_payload(&mut rx).await, Payload::Tiles(_)));

    let changes = [
        (
            "SELECT place.set_cooldown($1, '10 seconds')",
            BoardChange::Settings,
        ),
        (
            "SELECT place.set_board_state($1, 'paused')",
            BoardChange::Settings,
        ),
        (
            "DELETE FROM place.boards WHERE id = $1",
            BoardChange::Deleted,
        ),
    ];
    for (statement, change) in changes {
        client.query(statement, &[&board]).await.unwrap();
        let expected = Payload::Board(BoardPayload::new(board, 1, change));
        assert_eq!(next_payload(&mut rx).await, expected, "after {statement}");
    }
    assert_silent(&mut rx).await;
}

#[tokio::test]
async fn payloads_arrive_in_commit_order_across_boards() {
    let url = fresh_database("pgplace_test_notify_order").await;
    let client = connect(&url).await;
    let a = create_board(&client, "a", (10, 10), 4, "0").await;
    let b = create_board(&client, "b", (10, 10), 4, "0").await;
    let user = create_users(&client, "n", 1).await[0];
    let (_listener, mut rx) = listen(&url).await;

    let order = [a, b, b, a, b, a, a];
    for board in order {
        client
            .query(
                "SELECT * FROM place.place($1, 1, 1, 1, $2)",
                &[&board, &user],
            )
            .await
            .unwrap();
    }
    let mut next_seq = std::collections::HashMap::from([(a, 1), (b, 1)]);
    for board in order {
        let p = next_tiles(&mut rx).await;
        assert_eq!(p.board, board);
        let expected = next_seq.get_mut(&board).unwrap();
        assert_eq!(p.first, *expected);
        *expected += 1;
    }
}
