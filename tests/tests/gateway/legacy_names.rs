//! A legacy client's own method names: the gateway started with `--method-prefix qik.` and
//! `--view-methods stream.subscribe_public_live=public_live`, driven through a recorded
//! Qik-style exchange (JSON-RPC 1.0 envelopes, positional params, `qik.`-prefixed names),
//! and checked against the same calls under pgplace's own names.

use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{connect, fresh_database};
use serde_json::{json, Value};

/// The exchange as a Qik client made it: each request, and what its answer must hold.
/// `$S` is the session id the first answer gave.
const RECORDED: &[(&str, &str)] = &[
    (
        r#"{"method":"qik.session.create","params":[],"id":1}"#,
        "session",
    ),
    (
        r#"{"method":"qik.stream.subscribe_public_live","params":["$S",2],"id":2}"#,
        "subscribed",
    ),
    (
        r#"{"method":"qik.session.get_events","params":["$S",0],"id":3}"#,
        "no events",
    ),
    ("WRITE", ""),
    // A notification (no id) gets no answer, so it must take no events: under its prefixed
    // name too (before 0.8.7 only the plain name was known as a long poll).
    (
        r#"{"method":"qik.session.get_events","params":["$S",2]}"#,
        "no answer",
    ),
    (
        r#"{"method":"qik.session.get_events","params":["$S",5],"id":4}"#,
        "the change",
    ),
    (
        r#"{"method":"qik.session.unsubscribe","params":["$S","view/public_live/2"],"id":5}"#,
        "true",
    ),
    (
        r#"{"method":"qik.session.destroy","params":["$S"],"id":6}"#,
        "true",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_qik_client_speaks_its_own_names() {
    let url = fresh_database("gw_legacy_names").await;
    let sql = connect(&url).await;
    sql.batch_execute(
        "CREATE TABLE streams (id int PRIMARY KEY, title text NOT NULL, viewers int NOT NULL,
                               live boolean NOT NULL);
         INSERT INTO streams VALUES (1, 'a', 10, true), (2, 'b', 20, true), (3, 'c', 5, false);
         SELECT place.watch('streams', ARRAY['title', 'viewers', 'live']);
         SELECT place.create_view('public_live', 'streams', 'viewers', 'live', max_limit => 10);",
    )
    .await
    .unwrap();
    let gw = start_gateway(&url, |c| {
        c.method_prefix = Some("qik.".into());
        c.view_methods = "stream.subscribe_public_live=public_live".into();
    })
    .await;
    let http = Http::new(gw.addr);

    // The view method answers exactly what session.subscribe answers for the same view.
    let other = http.ok("session.create", json!([])).await;
    let by_subscribe = http
        .ok(
            "session.subscribe",
            json!([other, "public_live", {"limit": 2}]),
        )
        .await;

    let mut session = Value::Null;
    for (request, expect) in RECORDED {
        if *request == "WRITE" {
            sql.execute("UPDATE streams SET viewers = 30 WHERE id = 1", &[])
                .await
                .unwrap();
            continue;
        }
        let body = request.replace("$S", session.as_str().unwrap_or(""));
        let (status, answer) = http.post(&body).await;
        if *expect == "no answer" {
            assert_eq!(status.as_u16(), 204, "{body}: {answer:?}");
            continue;
        }
        let answer = answer.expect("a JSON answer");
        // JSON-RPC 1.0: result and error, both present.
        assert!(answer["error"].is_null(), "{body}: {answer}");
        let result = &answer["result"];
        match *expect {
            "session" => {
                assert!(result.as_str().is_some_and(|s| s.len() == 32), "{answer}");
                session = result.clone();
            }
            "subscribed" => assert_eq!(result, &by_subscribe, "{body}"),
            "no events" => assert_eq!(result, &json!([]), "{body}"),
            "the change" => {
                let events = result.as_array().expect("events");
                assert!(!events.is_empty(), "{answer}");
                assert!(
                    events.iter().all(|e| e["key"] == "view/public_live/2"),
                    "{answer}"
                );
                assert!(
                    events.iter().any(|e| e["obj"]["viewers"] == 30),
                    "the change of row 1 reached the client: {answer}"
                );
            }
            "true" => assert_eq!(result, &json!(true), "{body}"),
            other => panic!("no such expectation {other}"),
        }
    }

    // Under pgplace's names the same gateway still answers; the prefix does not reach the
    // API's own description, and an unknown prefixed name is unknown.
    assert_eq!(
        http.error_code("qik.nothing.at_all", json!([])).await,
        -32601
    );
    assert_eq!(http.error_code("qik.rpc.discover", json!([])).await, -32601);
    let document = http.ok("rpc.discover", json!([])).await;
    let names: Vec<&str> = document["methods"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    for name in [
        "qik.session.create",
        "qik.session.get_events",
        "stream.subscribe_public_live",
        "qik.stream.subscribe_public_live",
    ] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
}
