//! A visitor plays without an account on a board that takes guests (`--guest-boards`):
//! `session.play_as_guest` makes a guest and signs the session in; the token signs them in
//! again; guests place on those boards only, also through another gateway that reads the
//! session afresh; an address makes at most `--guests-per-address-per-hour` of them (the
//! gateway trusts loopback as a proxy here: the limited clients name themselves).

use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{connect, create_board, fresh_database};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_plays_as_a_guest_where_guests_are_welcome() {
    let url = fresh_database("gw_guests").await;
    let sql = connect(&url).await;
    let open = create_board(&sql, "open-to-all", (8, 8), 4, "0").await;
    let members = create_board(&sql, "members-only", (8, 8), 4, "0").await;
    let tune = |c: &mut pgplace_gateway::Config| {
        c.guest_boards = "open-to-all".into();
        c.guests_per_address_per_hour = 3;
    };
    let gw = start_gateway(&url, tune).await;
    let http = Http::new(gw.addr);

    let listed = http.ok("board.list", json!([])).await;
    let takes = |id: i64| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["id"] == id)
            .unwrap()["guests"]
            .clone()
    };
    assert_eq!((takes(open), takes(members)), (json!(true), json!(false)));

    // A guest joins and places where guests are welcome, and nowhere else.
    let session = http.ok("session.create", json!([])).await;
    let guest = http
        .ok("session.play_as_guest", json!([session, "open-to-all"]))
        .await;
    let name = guest["name"].as_str().unwrap();
    assert!(name.starts_with("guest-"), "{guest}");
    let placed = http
        .ok("board.place", json!([session, open, 1, 1, 3]))
        .await;
    assert_eq!(placed["seq"], 1);
    let refused = http
        .err("board.place", json!([session, members, 1, 1, 3]))
        .await;
    assert_eq!(refused["code"], -32002, "{refused}");
    assert!(refused["message"]
        .as_str()
        .unwrap()
        .contains("takes no guests"));
    let is_guest: bool = sql
        .query_one("SELECT guest FROM place.users WHERE name = $1", &[&name])
        .await
        .unwrap()
        .get(0);
    assert!(is_guest);

    // No guests from a board that does not take them.
    let other = http.ok("session.create", json!([])).await;
    let error = http
        .err("session.play_as_guest", json!([other, members]))
        .await;
    assert_eq!(error["code"], -32002, "{error}");

    // The token signs the guest in again, still a guest: on a second gateway too, which
    // reads the first session afresh from the database.
    let token = guest["token"].as_str().unwrap();
    let again = http.ok("session.create", json!([])).await;
    let signed = http.ok("session.authorize", json!([again, token])).await;
    assert_eq!(signed["user_id"], guest["user_id"]);
    assert_eq!(
        http.err("board.place", json!([again, members, 2, 2, 3]))
            .await["code"],
        -32002
    );
    let second = start_gateway(&url, tune).await;
    let http2 = Http::new(second.addr);
    assert_eq!(
        http2
            .err("board.place", json!([session, members, 3, 3, 3]))
            .await["code"],
        -32002,
        "a guest read from the database is still a guest"
    );

    // A ban stops a guest as any user.
    sql.execute(
        "SELECT place.ban_user($1)",
        &[&guest["user_id"].as_i64().unwrap()],
    )
    .await
    .unwrap();
    let banned = http
        .err("board.place", json!([session, open, 4, 4, 3]))
        .await;
    assert_eq!(banned["code"], -32002, "{banned}");
    assert!(
        banned["message"].as_str().unwrap().contains("banned"),
        "{banned}"
    );

    // And a guest's tiles are reverted as any user's: (1, 1) is colour 0 again, painted
    // back by pgplace's moderation user, and a session watching the board hears it.
    let watcher = http.ok("session.create", json!([])).await;
    http.ok(
        "session.subscribe",
        json!([watcher, "board", {"board": open}]),
    )
    .await;
    let reverted: i32 = sql
        .query_one(
            "SELECT place.revert_user($1, $2, '-infinity')",
            &[&open, &guest["user_id"].as_i64().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(reverted, 1);
    let (colour, by): (i32, String) = sql
        .query_one(
            "SELECT place.get_tile($1, 1, 1), (SELECT u.name FROM place.placements p \
             JOIN place.users u ON u.id = p.user_id WHERE p.board_id = $1 ORDER BY p.seq DESC LIMIT 1)",
            &[&open],
        )
        .await
        .map(|row| (row.get(0), row.get(1)))
        .unwrap();
    assert_eq!((colour, by.as_str()), (0, "moderation"));
    let events = http
        .events_until(&watcher, 20, |e| e["action"] == "update")
        .await;
    let update = events.last().unwrap();
    assert_eq!(
        (
            &update["old"]["color"],
            &update["obj"]["color"],
            &update["obj"]["seq"]
        ),
        (&json!(3), &json!(0), &json!(2)),
        "{update}"
    );

    // An address makes at most 3 guests an hour (a refused attempt counts): the fourth is
    // too fast, and another address still makes one.
    let address = "198.51.100.7";
    for attempt in 1..=4 {
        let s = http.ok("session.create", json!([])).await;
        let answer = http
            .call_as(address, "session.play_as_guest", json!([s, open]))
            .await;
        match attempt {
            1..=3 => assert!(answer.is_ok(), "attempt {attempt}: {answer:?}"),
            _ => {
                let fast = answer.expect_err("the fourth guest of the hour");
                assert_eq!(fast["code"], -32011, "{fast}");
                assert!(fast["data"]["retry_after_ms"].as_u64().unwrap() > 0);
            }
        }
    }
    let s = http.ok("session.create", json!([])).await;
    http.call_as("198.51.100.8", "session.play_as_guest", json!([s, open]))
        .await
        .expect("another address");
    let guests: i64 = sql
        .query_one("SELECT count(*) FROM place.users WHERE guest", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(guests, 5, "a refused call made no guest");
}
