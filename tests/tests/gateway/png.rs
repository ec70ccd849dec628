//! `GET /boards/{id}.png` over real HTTP: the picture decodes to the board's tiles in the
//! board's colours (checked against `place.board_bits` and the palette), scale and crop,
//! ETag and 304, `at` (through `place.board_at`), and the errors.

use hyper::header::HeaderMap;
use hyper::StatusCode;
use pgplace_core::bits::TileWidth;
use pgplace_core::png::decode;
use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{board_bits, connect, create_board, create_users, fresh_database};
use serde_json::Value;
use std::time::Duration;
use tokio_postgres::Client;

/// Places a varied pattern on (about) every tile of a `w` × `h` board, in one batch.
async fn paint(sql: &Client, board: i64, user: i64, (w, h): (i32, i32), k: i32, salt: i32) {
    let max = (1 << k) - 1;
    let (mut xs, mut ys, mut colors) = (Vec::new(), Vec::new(), Vec::new());
    for y in 0..h {
        for x in 0..w {
            xs.push(x);
            ys.push(y);
            colors.push((x * 7 + y * 13 + salt + x * y) % (max + 1));
        }
    }
    let users = vec![user; xs.len()];
    sql.execute(
        "SELECT count(*) FROM place.place_many($1, $2, $3, $4, $5)",
        &[&board, &users, &xs, &ys, &colors],
    )
    .await
    .expect("place_many");
}

async fn palette(sql: &Client, board: i64) -> Vec<String> {
    sql.query_one("SELECT palette FROM place.boards WHERE id = $1", &[&board])
        .await
        .unwrap()
        .get(0)
}

fn rgb(colour: &str) -> [u8; 3] {
    let v = u32::from_str_radix(&colour[1..], 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

/// Checks a PNG against the bits: every pixel's index is its tile's value and its colour
/// the palette's; `crop` = (x, y, width, height) in tiles.
fn assert_picture(
    png: &[u8],
    bits: &[u8],
    board_width: u32,
    k: i32,
    palette: &[String],
    scale: u32,
    (cx, cy, cw, ch): (u32, u32, u32, u32),
) {
    let tile = TileWidth::new(k.into()).unwrap();
    let decoded = decode(png).expect("a PNG that decodes");
    assert_eq!(
        (decoded.width, decoded.height),
        (cw * scale, ch * scale),
        "picture size"
    );
    assert_eq!(u32::from(decoded.bit_depth), tile.bits(), "bit depth");
    for py in 0..ch * scale {
        for px in 0..cw * scale {
            let (tx, ty) = (cx + px / scale, cy + py / scale);
            let want = tile
                .get(bits, i64::from(ty * board_width + tx))
                .expect("a tile");
            let got = decoded.indices[(py * cw * scale + px) as usize];
            assert_eq!(got, want, "pixel ({px}, {py}) shows tile ({tx}, {ty})");
            assert_eq!(
                decoded.palette[got as usize],
                rgb(&palette[want as usize]),
                "colour of pixel ({px}, {py})"
            );
        }
    }
}

async fn get_png(http: &Http, path: &str) -> (HeaderMap, bytes::Bytes) {
    let (status, headers, body) = http.get(path, &HeaderMap::new()).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{path}: {}",
        String::from_utf8_lossy(&body)
    );
    assert_eq!(headers["content-type"], "image/png");
    (headers, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pictures_show_the_board_for_every_tile_width_scaled_and_cropped() {
    let url = fresh_database("gw_png").await;
    let sql = connect(&url).await;
    let user = create_users(&sql, "png", 1).await[0];
    let mut boards = Vec::new();
    for (k, size) in [(1, (13, 5)), (2, (9, 6)), (4, (13, 7)), (8, (5, 4))] {
        let board = create_board(&sql, &format!("png{k}"), size, k, "0").await;
        paint(&sql, board, user, size, k, k).await;
        boards.push((board, k, size));
    }
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);

    for (board, k, (w, h)) in boards {
        let (seq, bits) = board_bits(&sql, board).await;
        let palette = palette(&sql, board).await;
        let (w, h) = (w as u32, h as u32);

        let (headers, png) = get_png(&http, &format!("/boards/{board}.png")).await;
        assert_eq!(headers["x-pgplace-seq"], seq.to_string().as_str());
        assert_picture(&png, &bits, w, k, &palette, 1, (0, 0, w, h));

        let (_, png) = get_png(&http, &format!("/boards/{board}.png?scale=3")).await;
        assert_picture(&png, &bits, w, k, &palette, 3, (0, 0, w, h));

        let path = format!("/boards/{board}.png?x=1&y=2&width=3&height=2");
        let (_, png) = get_png(&http, &path).await;
        assert_picture(&png, &bits, w, k, &palette, 1, (1, 2, 3, 2));

        // Width and height default to the rest of the board.
        let path = format!("/boards/{board}.png?scale=2&x=3&y=1");
        let (_, png) = get_png(&http, &path).await;
        assert_picture(&png, &bits, w, k, &palette, 2, (3, 1, w - 3, h - 1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pictures_have_etags_304s_and_clear_errors() {
    let url = fresh_database("gw_png_cache").await;
    let sql = connect(&url).await;
    let user = create_users(&sql, "pngc", 1).await[0];
    let board = create_board(&sql, "pngc", (20, 10), 4, "0").await;
    paint(&sql, board, user, (20, 10), 4, 1).await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let path = format!("/boards/{board}.png?scale=2");

    let (headers, png) = get_png(&http, &path).await;
    let (seq, _) = board_bits(&sql, board).await;
    let etag = headers["etag"].to_str().unwrap().to_string();
    assert!(etag.contains(&format!("{board}-{seq}-")), "{etag}");
    let cache = headers["cache-control"].to_str().unwrap();
    assert!(
        cache.contains("public") && cache.contains("max-age=1"),
        "{cache}"
    );
    assert!(cache.contains("stale-while-revalidate="), "{cache}");
    // Another query, another ETag.
    let (other, _) = get_png(&http, &format!("/boards/{board}.png?scale=3")).await;
    assert_ne!(other["etag"], headers["etag"]);
    let (other, _) = get_png(&http, &format!("/boards/{board}.png?scale=2&x=1")).await;
    assert_ne!(other["etag"], headers["etag"]);

    let mut conditional = HeaderMap::new();
    conditional.insert("if-none-match", etag.parse().unwrap());
    let (status, headers304, body) = http.get(&path, &conditional).await;
    assert_eq!((status, body.len()), (StatusCode::NOT_MODIFIED, 0));
    assert_eq!(headers304["etag"], etag.as_str());
    let mut weak = HeaderMap::new();
    weak.insert(
        "if-none-match",
        format!("\"other\", W/{etag}").parse().unwrap(),
    );
    assert_eq!(http.get(&path, &weak).await.0, StatusCode::NOT_MODIFIED);

    // A placement changes the picture and its ETag once the gateway has it.
    sql.execute("SELECT place.place($1, 0, 0, 15, $2)", &[&board, &user])
        .await
        .unwrap();
    let mut answer = None;
    for _ in 0..100 {
        let (status, headers, body) = http.get(&path, &conditional).await;
        if status == StatusCode::OK {
            answer = Some((headers, body));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (headers, new_png) = answer.expect("a new picture after a placement");
    assert_ne!(headers["etag"], etag.as_str());
    assert_ne!(new_png, png);
    let decoded = decode(&new_png).unwrap();
    assert_eq!(
        &decoded.indices[..2],
        &[15, 15],
        "tile (0, 0) is 2×2 pixels"
    );

    // Bad queries: 400 with a JSON error naming the value.
    for (query, needle) in [
        ("scale=0", "scale = 0"),
        ("scale=abc", "\"abc\" is not an integer"),
        ("scale=100000", "the limit is 16384 pixels a side"),
        ("x=20", "x = 20 is outside the board"),
        ("y=-1", "y = -1 is outside the board"),
        ("x=5&width=16", "width = 16 does not fit the board"),
        ("height=0", "height = 0"),
        ("zoom=2", "unknown parameter \"zoom\""),
        ("scale=2&scale=3", "more than once"),
        ("at=not%20a%20time", "at = \"not a time\""),
    ] {
        let (status, headers, body) = http
            .get(&format!("/boards/{board}.png?{query}"), &HeaderMap::new())
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(headers["content-type"], "application/json", "{query}");
        let error: Value = serde_json::from_slice(&body).unwrap();
        let message = error["error"].as_str().unwrap();
        assert!(message.contains(needle), "{query}: {message}");
    }
    assert_eq!(
        http.get("/boards/4242.png", &HeaderMap::new()).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        http.get("/boards/abc.png", &HeaderMap::new()).await.0,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_draws_the_board_as_it_was() {
    let url = fresh_database("gw_png_at").await;
    let sql = connect(&url).await;
    let user = create_users(&sql, "pnga", 1).await[0];
    let board = create_board(&sql, "pnga", (11, 6), 2, "0").await;
    paint(&sql, board, user, (11, 6), 2, 1).await;
    let (then_seq, then_bits) = board_bits(&sql, board).await;
    let then: String = sql
        .query_one(
            "SELECT max(placed_at)::text FROM place.placements WHERE board_id = $1",
            &[&board],
        )
        .await
        .unwrap()
        .get(0);
    tokio::time::sleep(Duration::from_millis(20)).await;
    paint(&sql, board, user, (11, 6), 2, 2).await;
    let (now_seq, now_bits) = board_bits(&sql, board).await;
    assert_ne!(then_bits, now_bits);
    let palette = palette(&sql, board).await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);

    // `then` looks like "2026-11-29 19:45:01.123456+00": the space is escaped, the plus
    // sign is kept.
    let at = then.replace(' ', "%20");
    let (status, headers, body) = http
        .get(&format!("/boards/{board}.png?at={at}"), &HeaderMap::new())
        .await;
    if status == StatusCode::NOT_IMPLEMENTED {
        panic!(
            "place.board_at is missing from the installed extension: {}",
            String::from_utf8_lossy(&body)
        );
    }
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert_eq!(headers["x-pgplace-seq"], then_seq.to_string().as_str());
    assert_picture(&body, &then_bits, 11, 2, &palette, 1, (0, 0, 11, 6));
    let (_, png) = get_png(&http, &format!("/boards/{board}.png?at={at}&scale=2&x=4")).await;
    assert_picture(&png, &then_bits, 11, 2, &palette, 2, (4, 0, 7, 6));

    // Conditional requests work for the past too.
    let mut conditional = HeaderMap::new();
    conditional.insert("if-none-match", headers["etag"].clone());
    let path = format!("/boards/{board}.png?at={at}");
    assert_eq!(
        http.get(&path, &conditional).await.0,
        StatusCode::NOT_MODIFIED
    );

    // Before the first placement: the empty board, seq 0.
    let (headers, png) = get_png(&http, &format!("/boards/{board}.png?at=2000-01-01Z")).await;
    assert_eq!(headers["x-pgplace-seq"], "0");
    assert!(decode(&png).unwrap().indices.iter().all(|&i| i == 0));
    // Now: the current board.
    let (headers, png) = get_png(&http, &format!("/boards/{board}.png?at=now")).await;
    assert_eq!(headers["x-pgplace-seq"], now_seq.to_string().as_str());
    assert_picture(&png, &now_bits, 11, 2, &palette, 1, (0, 0, 11, 6));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_says_501_when_the_extension_has_no_board_at() {
    let url = fresh_database("gw_png_501").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "png501", (4, 4), 1, "0").await;
    // An older extension: no place.board_at.
    sql.batch_execute(
        "ALTER EXTENSION pgplace DROP FUNCTION place.board_at(bigint, timestamptz); \
         DROP FUNCTION place.board_at(bigint, timestamptz);",
    )
    .await
    .unwrap();
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let (status, _, body) = http
        .get(&format!("/boards/{board}.png?at=now"), &HeaderMap::new())
        .await;
    assert_eq!(status, StatusCode::NOT_IMPLEMENTED);
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("place.board_at"),
        "{error}"
    );
    // Without `at` the picture still comes from the mirror.
    get_png(&http, &format!("/boards/{board}.png")).await;
}
