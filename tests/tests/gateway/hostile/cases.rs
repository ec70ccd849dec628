//! The case tables: requests by hand (`table`), sizes, connections, slow and never-reading
//! clients, a flood of sessions.

use super::*;

pub(super) fn table(addr: SocketAddr, board: i64, past: &str, compacted_board: i64) -> Vec<Case> {
    let mut cases = Vec::new();
    // Cases of their own shape, added after the table's.
    let mut special = Vec::new();
    let mut add = |name: &str, request: Vec<u8>, expect: Expect| {
        cases.push(raw(addr, name, request, expect));
    };
    let parse = rpc_error(&[200], &[PARSE_ERROR]);
    let invalid = rpc_error(&[200], &[INVALID_REQUEST]);
    let list = br#"{"jsonrpc":"2.0","method":"board.list","id":1}"#.to_vec();
    let get_board =
        format!(r#"{{"jsonrpc":"2.0","method":"board.get","params":[{board}],"id":1}}"#);

    // The envelope.
    for (name, body) in [
        (
            "truncated JSON",
            br#"{"jsonrpc":"2.0","method":"board.list","id":1"#.to_vec(),
        ),
        ("invalid JSON", b"{nope}".to_vec()),
        ("empty body", b"".to_vec()),
        ("whitespace body", b"  \r\n ".to_vec()),
        (
            "trailing garbage",
            br#"{"jsonrpc":"2.0","method":"board.list","id":1} x"#.to_vec(),
        ),
        (
            "invalid UTF-8 in a string",
            b"{\"jsonrpc\":\"2.0\",\"method\":\"board.\xff\xfe\",\"id\":1}".to_vec(),
        ),
        (
            "a lone surrogate escape",
            br#"{"jsonrpc":"2.0","method":"\ud800","id":1}"#.to_vec(),
        ),
        (
            "a UTF-8 BOM",
            b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"method\":\"board.list\",\"id\":1}".to_vec(),
        ),
        (
            "NaN literal",
            br#"{"jsonrpc":"2.0","method":"board.get","params":[NaN],"id":1}"#.to_vec(),
        ),
        ("100,000 '['", "[".repeat(100_000).into_bytes()),
        (
            "100,000 nested objects",
            "{\"a\":".repeat(100_000).into_bytes(),
        ),
        (
            "100,000 '[' closed",
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
        ),
    ] {
        add(&format!("jsonrpc: {name}"), rpc_request(&body), parse);
    }
    for (name, body) in [
        ("a number", "1"),
        ("a string", "\"board.list\""),
        ("null", "null"),
        ("true", "true"),
        ("no method", r#"{"jsonrpc":"2.0","id":1}"#),
        ("method a number", r#"{"jsonrpc":"2.0","method":5,"id":1}"#),
        ("method null", r#"{"jsonrpc":"2.0","method":null,"id":1}"#),
        (
            "method an array",
            r#"{"jsonrpc":"2.0","method":["board.list"],"id":1}"#,
        ),
        (
            "jsonrpc 1.0",
            r#"{"jsonrpc":"1.0","method":"board.list","id":1}"#,
        ),
        (
            "jsonrpc 2 (a number)",
            r#"{"jsonrpc":2.0,"method":"board.list","id":1}"#,
        ),
        (
            "jsonrpc null",
            r#"{"jsonrpc":null,"method":"board.list","id":1}"#,
        ),
        (
            "id an object",
            r#"{"jsonrpc":"2.0","method":"board.list","id":{"a":1}}"#,
        ),
        (
            "id an array",
            r#"{"jsonrpc":"2.0","method":"board.list","id":[1]}"#,
        ),
        (
            "an unknown member",
            r#"{"jsonrpc":"2.0","method":"board.list","id":1,"extra":1}"#,
        ),
        ("an empty batch", "[]"),
    ] {
        add(
            &format!("jsonrpc: {name}"),
            rpc_request(body.as_bytes()),
            invalid,
        );
    }
    add(
        "jsonrpc: params a number",
        rpc_request(br#"{"jsonrpc":"2.0","method":"board.list","params":5,"id":1}"#),
        rpc_error(&[200], &[INVALID_REQUEST, INVALID_PARAMS]),
    );
    for (name, method) in [
        ("unknown method", "no.such"),
        ("empty method", ""),
        ("method with a NUL", "board.list\\u0000"),
        ("rpc. method we do not have", "rpc.describe"),
        ("100 kB method", &"m".repeat(100_000)),
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","method":"{method}","id":1}}"#);
        add(
            &format!("jsonrpc: {name}"),
            rpc_request(body.as_bytes()),
            rpc_error(&[200], &[METHOD_NOT_FOUND]),
        );
    }
    add(
        "jsonrpc: duplicate keys (method)",
        rpc_request(br#"{"jsonrpc":"2.0","method":"board.list","method":"no.such","id":1,"id":2}"#),
        rpc_error(&[200], &[METHOD_NOT_FOUND, INVALID_REQUEST]),
    );
    let dup_params = format!(
        r#"{{"jsonrpc":"2.0","method":"board.get","params":{{"board":{board},"board":"x"}},"id":1}}"#
    );
    add(
        "jsonrpc: duplicate keys (params)",
        rpc_request(dup_params.as_bytes()),
        Expect {
            status: &[200],
            rpc: Rpc::Any,
            allow: None,
            mentions: Some("\"id\":1"),
        },
    );
    add("jsonrpc: board.list", rpc_request(&list), RESULT);

    // Content-Type.
    for ct in [
        None,
        Some("application/json"),
        Some("application/json; charset=utf-8"),
        Some("Application/JSON;charset=UTF-8"),
        Some("application/vnd.api+json"),
        Some("application/json-rpc"),
        Some("application/jsonrequest"),
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let headers: Vec<(&str, &str)> = ct.map(|ct| ("Content-Type", ct)).into_iter().collect();
        add(
            &format!("content-type {ct:?} accepted"),
            http("POST", "/jsonrpc", &headers, get_board.as_bytes()),
            RESULT,
        );
    }
    add(
        "content-type form-urlencoded, body not JSON",
        http(
            "POST",
            "/jsonrpc",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            b"a=b&c=d",
        ),
        parse,
    );
    for ct in [
        "text/html",
        "application/xml",
        "multipart/form-data; boundary=xyz",
        "image/png",
        "application/octet-stream",
    ] {
        add(
            &format!("content-type {ct:?} refused"),
            http(
                "POST",
                "/jsonrpc",
                &[("Content-Type", ct)],
                get_board.as_bytes(),
            ),
            Expect {
                status: &[415],
                rpc: Rpc::Error(&[INVALID_REQUEST]),
                allow: None,
                mentions: Some("application/json"),
            },
        );
    }

    // Other methods on /jsonrpc.
    let not_allowed_post = Expect {
        status: &[405],
        rpc: Rpc::Any,
        allow: Some("POST"),
        mentions: None,
    };
    for method in ["GET", "PUT", "DELETE", "PATCH", "HEAD", "FOO"] {
        let body: &[u8] = if method == "PUT" || method == "PATCH" {
            &list
        } else {
            b""
        };
        add(
            &format!("{method} /jsonrpc"),
            http(method, "/jsonrpc", &[], body),
            not_allowed_post,
        );
    }
    // OPTIONS: a bare one is told what the route takes (204, or 405 with Allow); a CORS
    // preflight is answered by the policy (`--cors-origins`, here `ALLOWED_ORIGIN` only):
    // 204 saying POST for a listed origin, a refusal (403, or 405) for another.
    for (name, origin) in [
        ("OPTIONS /jsonrpc (no Origin)", None),
        (
            "CORS preflight from an unlisted origin",
            Some("http://elsewhere.example"),
        ),
        (
            "CORS preflight from the listed origin",
            Some(ALLOWED_ORIGIN),
        ),
    ] {
        let mut headers = vec![];
        if let Some(origin) = origin {
            headers.push(("Origin", origin));
            headers.push(("Access-Control-Request-Method", "POST"));
            headers.push(("Access-Control-Request-Headers", "content-type"));
        }
        let request = http("OPTIONS", "/jsonrpc", &headers, b"");
        special.push(case(name, async move {
            let resp = exchange(addr, &request, false).await?;
            match (origin, resp.status) {
                (_, 405) => check(&resp, &not_allowed_post),
                (None, _) => check(&resp, &status(&[204])),
                (Some(ALLOWED_ORIGIN), _) => {
                    check(&resp, &status(&[204]))?;
                    let methods = resp.header("access-control-allow-methods");
                    if !methods.is_some_and(|m| m.contains("POST")) {
                        return Err(format!("Access-Control-Allow-Methods: {methods:?}"));
                    }
                    Ok(())
                }
                (Some(_), _) => check(&resp, &status(&[403])),
            }
            .map(|()| String::new())
        }));
    }
    add(
        "OPTIONS *",
        b"OPTIONS * HTTP/1.1\r\nHost: gateway\r\n\r\n".to_vec(),
        status(&[204, 400, 404, 405]),
    );

    // GET routes.
    add("GET /healthz", get("/healthz"), status(&[200]));
    add(
        "HEAD /healthz",
        http("HEAD", "/healthz", &[], b""),
        status(&[200]),
    );
    add("GET /", get("/"), status(&[200]));
    add(
        &format!("GET /boards/{board}/bits"),
        get(&format!("/boards/{board}/bits")),
        status(&[200]),
    );
    add(
        &format!("HEAD /boards/{board}/bits"),
        http("HEAD", &format!("/boards/{board}/bits"), &[], b""),
        status(&[200]),
    );
    add(
        &format!("GET /boards/{board}.png"),
        get(&format!("/boards/{board}.png")),
        status(&[200]),
    );
    for id in [
        "abc",
        "-1",
        "0",
        "99999999999999999999",
        "1.5",
        "",
        "%20",
        "1e3",
        "999999",
    ] {
        add(
            &format!("GET /boards/{id}/bits"),
            get(&format!("/boards/{id}/bits")),
            status(&[400, 404]),
        );
        add(
            &format!("GET /boards/{id}.png"),
            get(&format!("/boards/{id}.png")),
            status(&[400, 404]),
        );
    }
    for query in [
        "at=garbage",
        "at=",
        "at=%ZZ",
        "at=%FF",
        "scale=0",
        "scale=-1",
        "scale=1000000",
        "scale=abc",
        "scale=99999999999999999999",
        "scale=1&scale=2",
        "x=-1",
        "x=100000",
        "width=0",
        "width=-5",
        "height=99999999",
        "bogus=1",
    ] {
        add(
            &format!("GET /boards/{board}.png?{query}"),
            get(&format!("/boards/{board}.png?{query}")),
            status(&[400]),
        );
    }
    // Timestamps Postgres reads: the board as it is now.
    for query in ["at=99999-01-01", "at=infinity", "at=-infinity", "at=epoch"] {
        add(
            &format!("GET /boards/{board}.png?{query}"),
            get(&format!("/boards/{board}.png?{query}")),
            status(&[200, 400, 404]),
        );
    }
    add(
        "GET .png?at= before the compacted history",
        get(&format!("/boards/{compacted_board}.png?at={past}")),
        Expect {
            status: &[404, 410],
            rpc: Rpc::Any,
            allow: None,
            mentions: Some("error"),
        },
    );
    for path in [
        "/nope",
        "/jsonrpc/",
        "/jsonrpc/x",
        "/boards",
        "/boards/",
        &format!("/boards/{board}"),
        &format!("/boards/{board}/bits/more"),
        &format!("/BOARDS/{board}/bits"),
        "/%2e%2e/%2e%2e/etc/passwd",
        "/healthz/",
        "//healthz",
    ] {
        add(&format!("GET {path}"), get(path), status(&[404]));
    }
    add(
        "GET a 16 kB path",
        get(&format!("/{}", "p".repeat(16_000))),
        status(&[404, 414, 431]),
    );
    add(
        "GET a 200 kB path",
        get(&format!("/{}", "p".repeat(200_000))),
        status(&[400, 404, 414, 431]),
    );
    let not_allowed_get = Expect {
        status: &[405],
        rpc: Rpc::Any,
        allow: Some("GET"),
        mentions: None,
    };
    for (method, path) in [
        ("POST", "/healthz".to_string()),
        ("DELETE", "/healthz".to_string()),
        ("POST", format!("/boards/{board}/bits")),
        ("PUT", format!("/boards/{board}/bits")),
        ("POST", format!("/boards/{board}.png")),
        ("POST", "/".to_string()),
    ] {
        add(
            &format!("{method} {path}"),
            http(method, &path, &[], b""),
            not_allowed_get,
        );
    }

    // HTTP framing that no client library sends.
    let bad = status(&[400]);
    add(
        "no Host header (HTTP/1.1)",
        b"GET /healthz HTTP/1.1\r\n\r\n".to_vec(),
        bad,
    );
    let mut no_host = format!(
        "POST /jsonrpc HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        list.len()
    )
    .into_bytes();
    no_host.extend_from_slice(&list);
    add("no Host header (POST /jsonrpc)", no_host, bad);
    // RFC 9112 3.2: 400 for a missing Host, several, or an invalid one.
    add(
        "two Host headers",
        b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".to_vec(),
        bad,
    );
    add(
        "an invalid Host",
        b"GET /healthz HTTP/1.1\r\nHost: a b/c\r\n\r\n".to_vec(),
        bad,
    );
    add(
        "HTTP/1.0 without Host",
        b"GET /healthz HTTP/1.0\r\n\r\n".to_vec(),
        status(&[200]),
    );
    add("a garbage request line", b"GARBAGE\r\n\r\n".to_vec(), bad);
    add(
        "HTTP/2.0 on an HTTP/1 port",
        b"GET /healthz HTTP/2.0\r\nHost: g\r\n\r\n".to_vec(),
        status(&[400, 505]),
    );
    add(
        "HTTP/9.9",
        b"GET /healthz HTTP/9.9\r\nHost: g\r\n\r\n".to_vec(),
        status(&[400, 505]),
    );
    add(
        "a NUL in the path",
        b"GET /heal\0thz HTTP/1.1\r\nHost: g\r\n\r\n".to_vec(),
        bad,
    );
    add(
        "a space in a header name",
        b"GET /healthz HTTP/1.1\r\nHost: g\r\nX Bad: 1\r\n\r\n".to_vec(),
        bad,
    );
    add(
        "a header without a colon",
        b"GET /healthz HTTP/1.1\r\nHost: g\r\nNoColon\r\n\r\n".to_vec(),
        bad,
    );
    add(
        "bare LF line ends",
        b"GET /healthz HTTP/1.1\nHost: g\n\n".to_vec(),
        status(&[200, 400]),
    );
    add(
        "a 100 kB header",
        format!(
            "GET /healthz HTTP/1.1\r\nHost: g\r\nX-Big: {}\r\n\r\n",
            "b".repeat(100_000)
        )
        .into_bytes(),
        status(&[200, 400, 431]),
    );
    add(
        "1,000 headers",
        format!(
            "GET /healthz HTTP/1.1\r\nHost: g\r\n{}\r\n",
            "X-H: 1\r\n".repeat(1000)
        )
        .into_bytes(),
        status(&[200, 400, 431]),
    );
    add(
        "an absolute-form URI",
        b"GET http://gateway/healthz HTTP/1.1\r\nHost: gateway\r\n\r\n".to_vec(),
        status(&[200, 400]),
    );
    let post = |headers: &str, body: &[u8]| {
        let mut bytes = format!(
            "POST /jsonrpc HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\n{headers}\r\n"
        )
        .into_bytes();
        bytes.extend_from_slice(body);
        bytes
    };
    add(
        "Content-Length: abc",
        post("Content-Length: abc\r\n", &list),
        bad,
    );
    add(
        "Content-Length: -1",
        post("Content-Length: -1\r\n", &list),
        bad,
    );
    add(
        "Content-Length: 2^64",
        post("Content-Length: 18446744073709551616\r\n", &list),
        status(&[400, 413]),
    );
    add(
        "two different Content-Lengths",
        post(
            &format!("Content-Length: {}\r\nContent-Length: 3\r\n", list.len()),
            &list,
        ),
        bad,
    );
    add(
        "Content-Length and chunked",
        post(
            &format!(
                "Content-Length: {}\r\nTransfer-Encoding: chunked\r\n",
                list.len()
            ),
            format!(
                "{:x}\r\n{}\r\n0\r\n\r\n",
                list.len(),
                String::from_utf8_lossy(&list)
            )
            .as_bytes(),
        ),
        status(&[200, 400]),
    );
    add(
        "chunked body",
        post(
            "Transfer-Encoding: chunked\r\n",
            format!(
                "5\r\n{}\r\n{:x}\r\n{}\r\n0\r\n\r\n",
                &get_board[..5],
                get_board.len() - 5,
                &get_board[5..]
            )
            .as_bytes(),
        ),
        RESULT,
    );
    add(
        "a bad chunk size",
        post("Transfer-Encoding: chunked\r\n", b"zz\r\nabc\r\n0\r\n\r\n"),
        bad,
    );
    add(
        "a chunk size beyond 2^64",
        post(
            "Transfer-Encoding: chunked\r\n",
            b"ffffffffffffffffffff\r\nabc\r\n0\r\n\r\n",
        ),
        status(&[400, 413]),
    );
    add(
        "Transfer-Encoding: gzip",
        post("Transfer-Encoding: gzip\r\n", &list),
        status(&[400, 501]),
    );
    add(
        "Content-Encoding: gzip",
        post(
            &format!(
                "Content-Length: {}\r\nContent-Encoding: gzip\r\n",
                list.len()
            ),
            &list,
        ),
        status(&[200, 400, 415]),
    );
    add(
        "Expect: 100-continue",
        post(
            &format!("Content-Length: {}\r\nExpect: 100-continue\r\n", list.len()),
            &list,
        ),
        RESULT,
    );
    add(
        "Expect: something-else",
        post(
            &format!("Content-Length: {}\r\nExpect: teapot\r\n", list.len()),
            &list,
        ),
        status(&[200, 400, 417]),
    );
    cases.extend(special);
    cases
}

// ---------------------------------------------------------------------------------------
// Cases that need more than one request and one answer.

pub(super) fn sized_cases(addr: SocketAddr) -> Vec<Case> {
    let mut cases = Vec::new();
    // A 10 MB body, with a Content-Length and chunked: 413 and −32600.
    for chunked in [false, true] {
        let name = if chunked {
            "a 10 MB chunked body"
        } else {
            "a 10 MB body"
        };
        cases.push(case(name, async move {
            let size = 10 << 20;
            let head = if chunked {
                "POST /jsonrpc HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".to_string()
            } else {
                format!("POST /jsonrpc HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n\r\n")
            };
            let mut conn = Conn::open(addr).await?;
            let mut writer = conn.take_writer();
            // Written beside the reading: the gateway may answer (and close) before the end.
            let write = tokio::spawn(async move {
                writer.write_all(head.as_bytes()).await?;
                let piece = vec![b' '; 64 * 1024];
                for _ in 0..size / piece.len() {
                    if chunked {
                        writer.write_all(format!("{:x}\r\n", piece.len()).as_bytes()).await?;
                        writer.write_all(&piece).await?;
                        writer.write_all(b"\r\n").await?;
                    } else {
                        writer.write_all(&piece).await?;
                    }
                }
                if chunked {
                    writer.write_all(b"0\r\n\r\n").await?;
                }
                Ok::<_, std::io::Error>(writer)
            });
            let resp = conn.response(false, ANSWER_WITHIN).await;
            let wrote = write.await.map_err(|e| e.to_string())?;
            let resp = resp.map_err(|e| format!("{e} (the writer: {:?})", wrote.err()))?;
            check(&resp, &rpc_error(&[413], &[INVALID_REQUEST])).map(|()| String::new())
        }));
    }
    // Batches.
    let entry = r#"{"jsonrpc":"2.0","method":"no.such","id":1}"#;
    for (name, n, expect_batch) in [
        ("a batch of 10,000", 10_000, false),
        ("a batch of 101", 101, false),
        ("a batch of 100", 100, true),
    ] {
        cases.push(case(name, async move {
            let body = format!("[{}]", vec![entry; n].join(","));
            let resp = exchange(addr, &rpc_request(body.as_bytes()), false).await?;
            if expect_batch {
                let answers = resp
                    .json()
                    .and_then(|v| v.as_array().cloned())
                    .unwrap_or_default();
                if resp.status != 200 || answers.len() != n {
                    return Err(format!("expected {n} answers, got {}", resp.summary()));
                }
                Ok(String::new())
            } else {
                check(&resp, &rpc_error(&[200], &[INVALID_REQUEST])).map(|()| String::new())
            }
        }));
    }
    cases.push(case("a batch of garbage entries", async move {
        let body = br#"[1, "x", null, {}, {"jsonrpc":"2.0","method":5,"id":7}, [], {"jsonrpc":"2.0","method":"no.such","id":8}]"#;
        let resp = exchange(addr, &rpc_request(body), false).await?;
        let answers = resp.json().and_then(|v| v.as_array().cloned()).unwrap_or_default();
        let codes: Vec<Option<i64>> = answers.iter().map(|a| a["error"]["code"].as_i64()).collect();
        let want = vec![Some(INVALID_REQUEST); 6]
            .into_iter()
            .chain([Some(METHOD_NOT_FOUND)])
            .collect::<Vec<_>>();
        if resp.status != 200 || codes != want {
            return Err(format!("codes {codes:?}, expected {want:?}: {}", resp.summary()));
        }
        Ok(String::new())
    }));
    cases
}

pub(super) fn connection_cases(addr: SocketAddr, board: i64) -> Vec<Case> {
    let mut cases = Vec::new();
    let get_board =
        format!(r#"{{"jsonrpc":"2.0","method":"board.get","params":[{board}],"id":1}}"#);

    cases.push(case(
        "HTTP/1.0 without keep-alive: answered, then closed",
        async move {
            let mut conn = Conn::open(addr).await?;
            conn.send(b"GET /healthz HTTP/1.0\r\n\r\n").await?;
            let resp = conn.response(false, ANSWER_WITHIN).await?;
            check(&resp, &status(&[200]))?;
            conn.closed_within(Duration::from_secs(3)).await?;
            Ok(String::new())
        },
    ));
    {
        let body = get_board.clone();
        cases.push(case("HTTP/1.0 POST /jsonrpc: answered, then closed", async move {
            let mut conn = Conn::open(addr).await?;
            let request = format!(
                "POST /jsonrpc HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            conn.send(request.as_bytes()).await?;
            let resp = conn.response(false, ANSWER_WITHIN).await?;
            check(&resp, &RESULT)?;
            conn.closed_within(Duration::from_secs(3)).await?;
            Ok(String::new())
        }));
    }
    {
        let body = get_board.clone();
        cases.push(case("20 pipelined requests: 20 answers in order", async move {
            let mut all = Vec::new();
            for id in 1..=20 {
                let request = match id % 4 {
                    0 => format!(r#"{{"jsonrpc":"2.0","method":"no.such","id":{id}}}"#),
                    1 => body.replace("\"id\":1", &format!("\"id\":{id}")),
                    // A short poll of an unknown session, an answer that takes a moment.
                    2 => format!(r#"{{"jsonrpc":"2.0","method":"board.list","id":{id}}}"#),
                    _ => format!(r#"{{"jsonrpc":"2.0","method":"session.get_events","params":["00",0.1],"id":{id}}}"#),
                };
                all.extend(rpc_request(request.as_bytes()));
            }
            let mut conn = Conn::open(addr).await?;
            conn.send(&all).await?;
            let mut ids = Vec::new();
            for _ in 1..=20 {
                let resp = conn.response(false, ANSWER_WITHIN).await?;
                if resp.status != 200 {
                    return Err(format!("answer {}: {}", ids.len() + 1, resp.summary()));
                }
                ids.push(resp.json().map_or(Value::Null, |v| v["id"].clone()));
            }
            let want: Vec<Value> = (1..=20).map(|i| json!(i)).collect();
            if ids != want {
                return Err(format!("ids in the order {ids:?}"));
            }
            Ok(String::new())
        }));
    }
    for (name, request) in [
        (
            "half-closing client (POST /jsonrpc) gets its answer",
            rpc_request(get_board.as_bytes()),
        ),
        (
            "half-closing client (GET /healthz) gets its answer",
            get("/healthz"),
        ),
    ] {
        cases.push(case(name, async move {
            let mut conn = Conn::open(addr).await?;
            conn.send(&request).await?;
            conn.take_writer()
                .shutdown()
                .await
                .map_err(|e| format!("shutdown: {e}"))?;
            let resp = conn.response(false, ANSWER_WITHIN).await?;
            check(&resp, &status(&[200])).map(|()| String::new())
        }));
    }
    cases
}

/// Slow clients; the gateway runs with 1 s header and body timeouts.
pub(super) fn slow_cases(addr: SocketAddr) -> Vec<Case> {
    let mut cases = Vec::new();
    cases.push(case("slowloris: headers one byte every 200 ms → closed", async move {
        let (mut reader, mut writer) = connect_tcp(addr).await?.into_split();
        let started = Instant::now();
        let request = format!(
            "POST /jsonrpc HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\nX-Slow: {}\r\n\r\n",
            "s".repeat(100)
        );
        let trickle = async move {
            for byte in request.as_bytes() {
                if writer.write_all(&[*byte]).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            std::future::pending::<()>().await;
        };
        let mut got = Vec::new();
        let read = async {
            let mut chunk = [0u8; 4096];
            loop {
                match reader.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&chunk[..n]),
                }
            }
        };
        let closed = tokio::select! {
            _ = trickle => false,
            _ = read => true,
            _ = tokio::time::sleep(Duration::from_secs(6)) => false,
        };
        let after = started.elapsed();
        if !closed {
            return Err(format!("still open after {after:?}"));
        }
        if after < Duration::from_millis(800) {
            return Err(format!("closed after only {after:?} (header timeout 1 s): {:?}", preview(&got)));
        }
        Ok(format!("closed after {after:?}, having sent {:?}", preview(&got)))
    }));
    cases.push(case(
        "an idle connection → closed after the header timeout",
        async move {
            let started = Instant::now();
            let mut conn = Conn::open(addr).await?;
            let sent = conn.closed_within(Duration::from_secs(5)).await?;
            Ok(format!(
                "closed after {:?} ({sent} bytes sent)",
                started.elapsed()
            ))
        },
    ));
    cases.push(case(
        "a kept-alive connection left idle → closed after the header timeout",
        async move {
            let mut conn = Conn::open(addr).await?;
            conn.send(&get("/healthz")).await?;
            check(&conn.response(false, ANSWER_WITHIN).await?, &status(&[200]))?;
            let started = Instant::now();
            conn.closed_within(Duration::from_secs(5)).await?;
            Ok(format!("closed after {:?}", started.elapsed()))
        },
    ));
    for trickle in [true, false] {
        let name = if trickle {
            "slow body: one byte every 200 ms → 408 with a JSON-RPC error"
        } else {
            "a body that never comes → 408 with a JSON-RPC error"
        };
        cases.push(case(name, async move {
            let mut conn = Conn::open(addr).await?;
            let started = Instant::now();
            conn.send(
                b"POST /jsonrpc HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n",
            )
            .await?;
            let mut writer = conn.take_writer();
            let dribble = tokio::spawn(async move {
                for _ in 0..200 {
                    if !trickle || writer.write_all(b" ").await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                tokio::time::sleep(Duration::from_secs(60)).await;
                drop(writer);
            });
            let resp = conn.response(false, Duration::from_secs(6)).await;
            dribble.abort();
            let after = started.elapsed();
            let resp = resp.map_err(|e| format!("after {after:?}: {e}"))?;
            check(&resp, &rpc_error(&[408], DOCUMENTED))?;
            if after < Duration::from_millis(800) {
                return Err(format!("408 after only {after:?} (body timeout 1 s)"));
            }
            Ok(format!("408 after {after:?}"))
        }));
    }
    cases
}

/// A client that writes thousands of pipelined requests and never reads: the gateway must
/// stop reading from it (its writes block), while an ordinary client is answered at once.
pub(super) fn never_reading_case(addr: SocketAddr, big_board: i64) -> Case {
    case("a client that never reads its answers", async move {
        let rss_before = rss_kib();
        let mut hog = Conn::open(addr).await?;
        // 2 kB requests for 128 kB answers: the gateway's sending side fills at once.
        let one = http(
            "GET",
            &format!("/boards/{big_board}/bits"),
            &[("X-Pad", &"p".repeat(2000))],
            b"",
        );
        let batch: Vec<u8> = one.iter().copied().cycle().take(one.len() * 100).collect();
        let mut written = 0usize;
        let mut blocked = None;
        for _ in 0..200 {
            // Up to 20,000 requests (≈ 40 MB).
            match timeout(Duration::from_secs(2), hog.writer().write_all(&batch)).await {
                Ok(Ok(())) => written += batch.len(),
                Ok(Err(e)) => {
                    blocked = Some(format!("the gateway closed it: {e}"));
                    break;
                }
                Err(_) => {
                    blocked = Some("writes block".to_string());
                    break;
                }
            }
        }
        let Some(how) = blocked else {
            return Err(format!(
                "the gateway kept reading: {} MB of requests went in without a read",
                written >> 20
            ));
        };
        // Meanwhile an ordinary client.
        let started = Instant::now();
        let resp = exchange(addr, &get("/healthz"), false).await?;
        let waited = started.elapsed();
        check(&resp, &status(&[200]))?;
        if waited > Duration::from_secs(1) {
            return Err(format!(
                "an ordinary client waited {waited:?} beside the hog"
            ));
        }
        let rss_after = rss_kib();
        drop(hog);
        Ok(format!(
            "{how} after {} kB written; ordinary client answered in {waited:?}; test process RSS {rss_before} → {rss_after} kB",
            written >> 10
        ))
    })
}

pub(super) fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// 2,000 session.create (20 batches of 100, 4 connections at a time): each a session id or
/// "too many sessions".
pub(super) fn flood_case(addr: SocketAddr) -> Case {
    case("session.create flood (2,000)", async move {
        let entry = r#"{"jsonrpc":"2.0","method":"session.create","id":1}"#;
        let body = format!("[{}]", vec![entry; 100].join(","));
        let started = Instant::now();
        let outcomes: Vec<Result<(usize, usize), String>> = futures::stream::iter(0..20)
            .map(|_| {
                let body = body.clone();
                async move {
                    let resp = exchange(addr, &rpc_request(body.as_bytes()), false).await?;
                    let answers = resp.json().and_then(|v| v.as_array().cloned());
                    let Some(answers) = answers.filter(|a| a.len() == 100 && resp.status == 200)
                    else {
                        return Err(resp.summary());
                    };
                    let created = answers.iter().filter(|a| a["result"].is_string()).count();
                    let refused = answers
                        .iter()
                        .filter(|a| a["error"]["code"] == TOO_MANY)
                        .count();
                    if created + refused != 100 {
                        return Err(format!("other answers: {}", resp.summary()));
                    }
                    Ok((created, refused))
                }
            })
            .buffer_unordered(4)
            .collect()
            .await;
        let (mut created, mut refused) = (0, 0);
        for outcome in outcomes {
            let (c, r) = outcome?;
            created += c;
            refused += r;
        }
        Ok(format!(
            "{created} created, {refused} refused in {:?}",
            started.elapsed()
        ))
    })
}

// ---------------------------------------------------------------------------------------
// The control subscriber and the steady writer.
