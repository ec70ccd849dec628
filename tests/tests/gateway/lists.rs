//! List views over real HTTP: each kind of change reaches a session as the event the
//! README promises, and the session's list equals the view in the database after each.

use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::list_check::ListModel;
use pgplace_tests::{connect, fresh_database};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The view's rows as the database has them now.
async fn fresh_rows(sql: &tokio_postgres::Client, view: &str, limit: i32) -> Vec<Value> {
    let rows: Value = sql
        .query_one("SELECT rows FROM place.view_rows($1, $2)", &[&view, &limit])
        .await
        .expect("view_rows")
        .get(0);
    rows.as_array().unwrap().clone()
}

/// Applies the session's events for `key` until its list equals the database's (10 s at
/// most); returns the events that came.
async fn settle(
    http: &Http,
    sql: &tokio_postgres::Client,
    session: &Value,
    key: &str,
    model: &mut ListModel,
    view: &str,
    limit: i32,
) -> Vec<Value> {
    let want = fresh_rows(sql, view, limit).await;
    let started = Instant::now();
    let mut seen = Vec::new();
    while model.rows != want {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the list never reached {want:?}; holds {:?} after {seen:?}",
            model.rows
        );
        let events = http.ok("session.get_events", json!([session, 1])).await;
        for event in events.as_array().unwrap() {
            assert_eq!(event["key"], key);
            model.apply(event);
            seen.push(event.clone());
        }
    }
    seen
}

fn actions(events: &[Value]) -> Vec<(String, u64)> {
    events
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_string(),
                e["position"].as_u64().unwrap_or(u64::MAX),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_change_reaches_the_list_as_its_event() {
    let url = fresh_database("gw_lists").await;
    let sql = connect(&url).await;
    sql.batch_execute(
        "CREATE TABLE items (id int PRIMARY KEY, title text NOT NULL, score int NOT NULL,
                             live boolean NOT NULL, secret text);
         INSERT INTO items VALUES (1, 'a', 10, true, 's'), (2, 'b', 20, true, 's'),
                                  (3, 'c', 30, false, 's'), (4, 'd', 40, true, 's');
         SELECT place.watch('items', ARRAY['title', 'score', 'live']);
         SELECT place.create_view('top', 'items', 'score', 'live', max_limit => 5);",
    )
    .await
    .unwrap();
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let session = http.ok("session.create", json!([])).await;
    let reply = http
        .ok("session.subscribe", json!([session, "top", {"limit": 3}]))
        .await;
    let key = reply[0].as_str().unwrap().to_string();
    assert_eq!(key, "view/top/3");
    let mut model = ListModel::new(&reply[1]);
    assert_eq!(model.rows, fresh_rows(&sql, "top", 3).await);
    assert_eq!(
        model.rows[0],
        json!({"id": 4, "title": "d", "score": 40, "live": true}),
        "watched columns and the key only"
    );
    let step = |statement: &'static str| {
        let sql = &sql;
        async move { sql.batch_execute(statement).await.expect(statement) }
    };

    // A row enters at the top of a full window and pushes the last one out.
    step("INSERT INTO items VALUES (5, 'e', 50, true, 's')").await;
    let events = settle(&http, &sql, &session, &key, &mut model, "top", 3).await;
    assert_eq!(
        actions(&events),
        [("delete".into(), 2), ("insert".into(), 0)]
    );
    // A row stops matching the filter: it leaves, and the next one comes up.
    step("UPDATE items SET live = false WHERE id = 4").await;
    let events = settle(&http, &sql, &session, &key, &mut model, "top", 3).await;
    assert_eq!(
        actions(&events),
        [("delete".into(), 1), ("insert".into(), 2)]
    );
    // A row starts matching.
    step("UPDATE items SET live = true WHERE id = 3").await;
    let events = settle(&http, &sql, &session, &key, &mut model, "top", 3).await;
    assert_eq!(
        actions(&events),
        [("delete".into(), 2), ("insert".into(), 1)]
    );
    // A row moves up: one update with where it came from.
    step("UPDATE items SET score = 99 WHERE id = 2").await;
    let events = settle(&http, &sql, &session, &key, &mut model, "top", 3).await;
    assert_eq!(actions(&events), [("update".into(), 0)]);
    assert_eq!(
        (
            events[0]["from"].as_u64(),
            events[0]["old"]["score"].as_i64()
        ),
        (Some(2), Some(20))
    );
    // A row changes in place.
    step("UPDATE items SET title = 'B' WHERE id = 2").await;
    let events = settle(&http, &sql, &session, &key, &mut model, "top", 3).await;
    assert_eq!(actions(&events), [("update".into(), 0)]);
    assert!(events[0].get("from").is_none());
    // A row is deleted: the window takes the next one.
    step("DELETE FROM items WHERE id = 5").await;
    let events = settle(&http, &sql, &session, &key, &mut model, "top", 3).await;
    assert_eq!(
        actions(&events),
        [("delete".into(), 1), ("insert".into(), 2)]
    );
    // A row too large for one NOTIFY payload arrives whole.
    step("INSERT INTO items VALUES (6, repeat('x', 10000), 1000, true, 's')").await;
    let events = settle(&http, &sql, &session, &key, &mut model, "top", 3).await;
    assert_eq!(
        events[1]["obj"]["title"].as_str().map(str::len),
        Some(10000)
    );
    // Unwatched columns and rolled-back changes: nothing.
    step("UPDATE items SET secret = 'changed'").await;
    step("BEGIN; UPDATE items SET score = 5000 WHERE id = 1; ROLLBACK").await;
    let quiet = http.ok("session.get_events", json!([session, 1])).await;
    assert_eq!(quiet, json!([]), "nothing watched changed");
    assert_eq!(model.rows, fresh_rows(&sql, "top", 3).await);

    // Bad subscriptions change nothing and say why.
    for (view, params, code) in [
        ("nope", json!({}), -32004),
        ("top", json!({"limit": 6}), -32602),
        ("top", json!({"limit": 0}), -32602),
        ("top", json!({"limit": "3"}), -32602),
        ("top", json!({"limit": 3, "colour": 1}), -32602),
    ] {
        let code_seen = http
            .error_code("session.subscribe", json!([session, view, params]))
            .await;
        assert_eq!(code_seen, code, "{view} {params}");
    }
    // Without a limit: the view's max_limit, and a key of its own.
    let whole = http.ok("session.subscribe", json!([session, "top"])).await;
    assert_eq!(whole[0], "view/top/5");
    assert_eq!(
        whole[1].as_array().unwrap(),
        &fresh_rows(&sql, "top", 5).await
    );

    // The view is dropped: both subscriptions end with `deleted`.
    step("SELECT place.drop_view('top')").await;
    let mut ended = Vec::new();
    let started = Instant::now();
    while ended.len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "ended: {ended:?}"
        );
        for event in http
            .ok("session.get_events", json!([session, 1]))
            .await
            .as_array()
            .unwrap()
        {
            if event["action"] == "deleted" {
                ended.push(event["key"].as_str().unwrap().to_string());
            }
        }
    }
    ended.sort();
    assert_eq!(ended, ["view/top/3", "view/top/5"]);
    let code = http
        .error_code("session.unsubscribe", json!([session, "view/top/3"]))
        .await;
    assert_eq!(code, -32004, "the subscription is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_list_gets_pings() {
    let url = fresh_database("gw_lists_ping").await;
    let sql = connect(&url).await;
    sql.batch_execute(
        "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL);
         SELECT place.watch('t');
         SELECT place.create_view('all_t', 't', 'v');",
    )
    .await
    .unwrap();
    let gw = start_gateway(&url, |c| c.list_ping_secs = 1).await;
    let http = Http::new(gw.addr);
    let session = http.ok("session.create", json!([])).await;
    let reply = http
        .ok("session.subscribe", json!([session, "all_t"]))
        .await;
    assert_eq!(reply[1], json!([]));
    let started = Instant::now();
    let events = http.ok("session.get_events", json!([session, 10])).await;
    assert_eq!(events, json!([{"key": "view/all_t/100", "action": "ping"}]));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "a ping after about a second"
    );
    // A change in between: its event, and the quiet time starts again.
    sql.batch_execute("INSERT INTO t VALUES (1, 1)")
        .await
        .unwrap();
    let events = http.ok("session.get_events", json!([session, 10])).await;
    assert_eq!(events[0]["action"], "insert");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recent_placements_enter_at_the_top_and_leave_at_the_bottom() {
    let url = fresh_database("gw_recent").await;
    let sql = connect(&url).await;
    let board = pgplace_tests::create_board(&sql, "recent", (4, 4), 2, "0").await;
    let user: i64 = sql
        .query_one("SELECT user_id FROM place.create_user('r')", &[])
        .await
        .unwrap()
        .get(0);
    let place = |x: i32, color: i32| {
        let sql = &sql;
        async move {
            sql.execute(
                "SELECT place.place($1, $2, 0, $3, $4)",
                &[&board, &x, &color, &user],
            )
            .await
            .unwrap();
        }
    };
    for x in 0..3 {
        place(x, 1).await;
    }
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let session = http.ok("session.create", json!([])).await;
    let reply = http
        .ok(
            "session.subscribe",
            json!([session, "recent_placements", {"board": board, "limit": 2}]),
        )
        .await;
    assert_eq!(reply[0], format!("board/{board}/recent/2"));
    let seqs = |rows: &[Value]| {
        rows.iter()
            .map(|r| r["seq"].as_i64().unwrap())
            .collect::<Vec<_>>()
    };
    let mut model = ListModel::new(&reply[1]);
    assert_eq!(seqs(&model.rows), [3, 2]);
    assert_eq!(model.rows[0]["x"], 2);
    assert_eq!(model.rows[0]["user"], user);
    place(3, 2).await;
    let mut events = Vec::new();
    while seqs(&model.rows) != [4, 3] {
        for event in http
            .ok("session.get_events", json!([session, 5]))
            .await
            .as_array()
            .unwrap()
        {
            model.apply(event);
            events.push(event.clone());
        }
        assert!(events.len() <= 2, "{events:?}");
    }
    assert_eq!(
        actions(&events),
        [("delete".into(), 1), ("insert".into(), 0)]
    );
    assert_eq!(events[1]["obj"]["color"], 2);
    for (params, code) in [
        (json!({"board": board, "limit": 101}), -32602),
        (json!({"board": board, "limit": 0}), -32602),
        (json!({"limit": 5}), -32602),
        (json!({"board": board, "colour": 1}), -32602),
        (json!({"board": 4242}), -32005),
    ] {
        assert_eq!(
            http.error_code(
                "session.subscribe",
                json!([session, "recent_placements", params.clone()])
            )
            .await,
            code,
            "{params}"
        );
    }
}

/// Sessions at five limits of one view: the view is read once per change, not once per
/// limit, and every session's list is the view's first rows at its limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_limit_of_a_view_is_served_from_one_read() {
    let url = fresh_database("gw_lists_limits").await;
    let sql = connect(&url).await;
    sql.batch_execute(
        "CREATE TABLE items (id int PRIMARY KEY, score int NOT NULL);
         INSERT INTO items SELECT g, g FROM generate_series(1, 20) g;
         SELECT place.watch('items');
         SELECT place.create_view('by_score', 'items', 'score', max_limit => 10);",
    )
    .await
    .unwrap();
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let limits = [1, 3, 5, 8, 10];
    let mut subs = Vec::new();
    for limit in limits {
        let session = http.ok("session.create", json!([])).await;
        let reply = http
            .ok(
                "session.subscribe",
                json!([session, "by_score", {"limit": limit}]),
            )
            .await;
        let mut model = ListModel::default();
        model.rows = reply[1].as_array().unwrap().clone();
        subs.push((
            session,
            reply[0].as_str().unwrap().to_string(),
            model,
            limit,
        ));
    }
    let before = http.view_reads("by_score").await;
    for round in 0..5 {
        sql.execute(
            "UPDATE items SET score = score + 100 WHERE id = $1",
            &[&(round * 3 + 2)],
        )
        .await
        .unwrap();
        for (session, key, model, limit) in &mut subs {
            settle(&http, &sql, session, key, model, "by_score", *limit).await;
        }
    }
    let reads = http.view_reads("by_score").await - before;
    // Five changes, five limits: one read per change (give or take one owed twice), where
    // an instance per limit read on its own would be five per change.
    assert!(
        (5..=8).contains(&reads),
        "{reads} reads of the view for 5 changes at {} limits",
        limits.len()
    );
}

/// The feed carries each position's changed rows, so a filtered view is read again only
/// when a row it matches (before or after) changed: commits that touch only rows outside
/// its filter cost it no read, while a view of the same table without a filter reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_outside_a_views_filter_does_not_read_it() {
    let url = fresh_database("gw_lists_filtered").await;
    let sql = connect(&url).await;
    sql.batch_execute(
        "CREATE TABLE items (id int PRIMARY KEY, score int NOT NULL, live boolean NOT NULL);
         INSERT INTO items SELECT g, g, g % 2 = 0 FROM generate_series(1, 10) g;
         SELECT place.watch('items');
         SELECT place.create_view('live_top', 'items', 'score', 'live', max_limit => 5);
         SELECT place.create_view('all_top', 'items', 'score', max_limit => 5);",
    )
    .await
    .unwrap();
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let mut subs = Vec::new();
    for view in ["live_top", "all_top"] {
        let session = http.ok("session.create", json!([])).await;
        let reply = http
            .ok("session.subscribe", json!([session, view, {"limit": 5}]))
            .await;
        let key = reply[0].as_str().unwrap().to_string();
        subs.push((session, key, ListModel::new(&reply[1]), view));
    }
    let live_before = http.view_reads("live_top").await;
    let all_before = http.view_reads("all_top").await;
    for id in [1, 3, 5] {
        sql.execute("UPDATE items SET score = score + 100 WHERE id = $1", &[&id])
            .await
            .unwrap();
    }
    let (session, key, model, view) = &mut subs[1];
    settle(&http, &sql, session, key, model, view, 5).await;
    // The unfiltered view has read those positions; a read of the other one would have
    // been started with it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(http.view_reads("all_top").await > all_before);
    assert_eq!(
        http.view_reads("live_top").await,
        live_before,
        "three changes of rows outside live_top's filter read it"
    );
    sql.execute("UPDATE items SET score = score + 100 WHERE id = 2", &[])
        .await
        .unwrap();
    let (session, key, model, view) = &mut subs[0];
    settle(&http, &sql, session, key, model, view, 5).await;
    assert!(http.view_reads("live_top").await > live_before);
}

/// A view made for signed-in sessions refuses anonymous ones (−32002, nothing subscribed)
/// and serves a session bound to a user, at every limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_in_view_refuses_anonymous_sessions() {
    let url = fresh_database("gw_lists_signed_in").await;
    let sql = connect(&url).await;
    sql.batch_execute(
        "CREATE TABLE notes (id int PRIMARY KEY, score int NOT NULL);
         INSERT INTO notes VALUES (1, 1), (2, 2);
         SELECT place.watch('notes');
         SELECT place.create_view('members', 'notes', 'score', max_limit => 5, signed_in => true);",
    )
    .await
    .unwrap();
    let users = pgplace_tests::create_users_with_tokens(&sql, "member", 1).await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let anonymous = http.ok("session.create", json!([])).await;
    for params in [json!({}), json!({"limit": 1})] {
        let code = http
            .error_code("session.subscribe", json!([anonymous, "members", params]))
            .await;
        assert_eq!(code, -32002);
    }
    let member = http.ok("session.create", json!([])).await;
    http.ok("session.authorize", json!([member, users[0].1]))
        .await;
    let reply = http
        .ok(
            "session.subscribe",
            json!([member, "members", {"limit": 1}]),
        )
        .await;
    assert_eq!(reply[0], "view/members/1");
    assert_eq!(reply[1].as_array().unwrap().len(), 1);
}

/// A view is shown only while the role that created it may read its table: once it may
/// not, a new subscribe is refused (−32004) and the sessions on it get `deleted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_whose_creator_lost_its_table_shows_nothing_more() {
    let url = fresh_database("gw_lists_creator").await;
    let sql = connect(&url).await;
    let creator = "gw_lists_creator_role";
    // What an interrupted run left (roles belong to the cluster).
    sql.batch_execute(&format!(
        "DO $$ BEGIN
             IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{creator}') THEN
                 EXECUTE 'DROP OWNED BY {creator}'; EXECUTE 'DROP ROLE {creator}';
             END IF;
         END $$"
    ))
    .await
    .unwrap();
    sql.batch_execute(&format!(
        "CREATE ROLE {creator} LOGIN;
         GRANT EXECUTE ON FUNCTION place.watch(regclass, text[], boolean),
             place.create_view(text, regclass, text, text, boolean, int, boolean) TO {creator};
         CREATE TABLE shown (id int PRIMARY KEY, score int NOT NULL);
         INSERT INTO shown VALUES (1, 1);
         ALTER TABLE shown OWNER TO {creator};"
    ))
    .await
    .unwrap();
    let as_creator = connect(&url.replace("postgres@", &format!("{creator}@"))).await;
    as_creator
        .batch_execute(
            "SELECT place.watch('shown');
             SELECT place.create_view('shown_top', 'shown', 'score');",
        )
        .await
        .unwrap();
    drop(as_creator);
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let session = http.ok("session.create", json!([])).await;
    http.ok("session.subscribe", json!([session, "shown_top", {}]))
        .await;
    // The table is given away: its creator may no longer read it.
    sql.batch_execute("ALTER TABLE shown OWNER TO postgres; UPDATE shown SET score = 2")
        .await
        .unwrap();
    let mut deleted = false;
    for _ in 0..20 {
        let events = http.ok("session.get_events", json!([session, 1])).await;
        if events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "deleted")
        {
            deleted = true;
            break;
        }
    }
    assert!(deleted, "the view's sessions were told");
    let other = http.ok("session.create", json!([])).await;
    let code = http
        .error_code("session.subscribe", json!([other, "shown_top", {}]))
        .await;
    assert_eq!(code, -32004);
    sql.batch_execute(&format!("DROP OWNED BY {creator}; DROP ROLE {creator}"))
        .await
        .unwrap();
}
