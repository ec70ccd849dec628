//! Sign-in from the site that embeds a board: `session.authorize` takes a JWT the site's
//! identity provider signed (HS256 with a shared secret, ES256 with a key of a JWKS file),
//! makes its user on first sight, and refuses an expired, foreign or forged one with
//! −32002 and a reason. Tokens are signed here as a provider would, with `jsonwebtoken`.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{encode, get_current_timestamp, Algorithm, EncodingKey, Header};
use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{connect, create_board, fresh_database};
use serde_json::{json, Value};

const ISSUER: &str = "https://id.example";
const AUDIENCE: &str = "pgplace-test";
const SECRET: &str = "the site's shared secret, at least 32 bytes long";

fn claims(sub: &str, name: &str, exp: u64) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "name": name, "exp": exp})
}

fn hs256(claims: &Value) -> String {
    let key = EncodingKey::from_secret(SECRET.as_bytes()).unwrap();
    encode(&Header::new(Algorithm::HS256), claims, &key).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_signs_its_players_in_with_its_jwts() {
    let url = fresh_database("gw_sign_in").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "signed", (8, 8), 4, "0").await;
    // The provider's keys, as files: a shared secret and a JWKS with one ES256 key.
    let dir = std::env::temp_dir().join(format!("pgplace-sign-in-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret_file = dir.join("secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let pkcs8 =
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .unwrap();
    let es_key = EncodingKey::from_ec_der(pkcs8.as_ref());
    let mut jwk = Jwk::from_encoding_key(&es_key, Algorithm::ES256).unwrap();
    jwk.common.key_id = Some("k1".into());
    let jwks_file = dir.join("jwks.json");
    std::fs::write(
        &jwks_file,
        serde_json::to_string(&JwkSet { keys: vec![jwk] }).unwrap(),
    )
    .unwrap();

    let gw = start_gateway(&url, |c| {
        c.jwt_issuer = Some(ISSUER.into());
        c.jwt_audience = Some(AUDIENCE.into());
        c.jwt_hs256_secret_file = Some(secret_file.clone());
        c.jwt_jwks_file = Some(jwks_file.clone());
    })
    .await;
    let http = Http::new(gw.addr);
    let later = get_current_timestamp() + 600;

    // First sight: the user is made with the offered name, and places.
    let session = http.ok("session.create", json!([])).await;
    let token = hs256(&claims("player-1", "Ada", later));
    let ada = http.ok("session.authorize", json!([session, token])).await;
    assert_eq!(ada["name"], "Ada", "{ada}");
    let placed = http
        .ok("board.place", json!([session, board, 1, 1, 3]))
        .await;
    assert_eq!(placed["seq"], 1, "{placed}");
    let placer: i64 = sql
        .query_one(
            "SELECT user_id FROM place.placements WHERE board_id = $1",
            &[&board],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(Some(placer), ada["user_id"].as_i64());

    // The same subject again (another tab, a new token): the same user.
    let again = http.ok("session.create", json!([])).await;
    let token = hs256(&claims("player-1", "Ada L.", later));
    let same = http.ok("session.authorize", json!([again, token])).await;
    assert_eq!(same["user_id"], ada["user_id"]);

    // ES256, by the JWKS key its kid names.
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("k1".into());
    let token = encode(&header, &claims("player-2", "Grace", later), &es_key).unwrap();
    let third = http.ok("session.create", json!([])).await;
    let grace = http.ok("session.authorize", json!([third, token])).await;
    assert_eq!(grace["name"], "Grace", "{grace}");
    assert_ne!(grace["user_id"], ada["user_id"]);

    // Refused, each with its reason, and the session stays without a user.
    let fourth = http.ok("session.create", json!([])).await;
    let past = get_current_timestamp() - 3600;
    header.kid = Some("k2".into());
    let refusals = [
        ("expired", hs256(&claims("player-3", "Late", past))),
        ("audience", {
            let mut c = claims("player-3", "Other site", later);
            c["aud"] = json!("another-site");
            hs256(&c)
        }),
        ("issuer", {
            let mut c = claims("player-3", "Forger", later);
            c["iss"] = json!("https://evil.example");
            hs256(&c)
        }),
        ("signature", {
            let key =
                EncodingKey::from_secret(b"not the site's secret, but 32 bytes long").unwrap();
            encode(
                &Header::new(Algorithm::HS256),
                &claims("player-1", "Ada", later),
                &key,
            )
            .unwrap()
        }),
        (
            "key",
            encode(&header, &claims("player-2", "Grace", later), &es_key).unwrap(),
        ),
    ];
    for (reason, token) in refusals {
        let error = http.err("session.authorize", json!([fourth, token])).await;
        assert_eq!(error["code"], -32002, "{reason}: {error}");
        assert_eq!(error["data"]["reason"], reason, "{error}");
    }
    let error = http
        .err("board.place", json!([fourth, board, 2, 2, 3]))
        .await;
    assert_eq!(error["code"], -32002, "not signed in: {error}");
    let users: i64 = sql
        .query_one("SELECT count(*) FROM place.user_identities", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(users, 2, "only the accepted tokens made users");

    // A gateway that takes no JWTs says so.
    let plain = start_gateway(&url, |_| {}).await;
    let plain_http = Http::new(plain.addr);
    let session = plain_http.ok("session.create", json!([])).await;
    let error = plain_http
        .err(
            "session.authorize",
            json!([session, hs256(&claims("player-1", "Ada", later))]),
        )
        .await;
    assert_eq!(error["code"], -32002);
    assert!(
        error["message"].as_str().unwrap().contains("--jwt-issuer"),
        "{error}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_with_half_a_sign_in_setup_does_not_start() {
    let url = fresh_database("gw_sign_in_setup").await;
    let short = std::env::temp_dir().join(format!("pgplace-short-secret-{}", std::process::id()));
    std::fs::write(&short, "too short").unwrap();
    let cases: [(&str, Box<dyn Fn(&mut pgplace_gateway::Config)>); 3] = [
        (
            "--jwt-audience",
            Box::new(|c| c.jwt_issuer = Some(ISSUER.into())),
        ),
        (
            "a key",
            Box::new(|c| {
                c.jwt_issuer = Some(ISSUER.into());
                c.jwt_audience = Some(AUDIENCE.into());
            }),
        ),
        (
            "at least 32",
            Box::new(|c| {
                c.jwt_issuer = Some(ISSUER.into());
                c.jwt_audience = Some(AUDIENCE.into());
                c.jwt_hs256_secret_file = Some(short.clone());
            }),
        ),
    ];
    for (says, tune) in cases {
        let mut config = pgplace_gateway::Config::for_database(&url);
        tune(&mut config);
        let error = match pgplace_gateway::start(config).await {
            Ok(_) => panic!("a gateway started without {says}"),
            Err(error) => error.to_string(),
        };
        assert!(error.contains(says), "{says}: {error}");
    }
    let _ = std::fs::remove_file(&short);
}
