//! Users and their tokens. A token is 256 random bits, shown once by `create_user` and
//! stored only as its SHA-256, so neither a table read nor a dump reveals it.

use crate::boards::{check_name, MAX_NAME_CHARS};
use crate::input::{fail, required};
use crate::spi::{column, run, Statement};
use pgrx::prelude::*;
use pgrx::{pg_sys, PgSqlErrorCode};

const TOKEN_BYTES: usize = 32;

/// The user that moderation placements are made by (`moderation`).
pub const MODERATION_USER: &str = "moderation";

/// The user whose placements were made by users since erased (`erasing`).
pub const ERASED_USER: &str = "erased";

/// Names pgplace gives its own users, which nobody may sign up as: placements made under
/// them are the moderators' or nobody's.
const RESERVED_NAMES: [&str; 2] = [MODERATION_USER, ERASED_USER];

fn new_token() -> String {
    let mut buf = [0u8; TOKEN_BYTES];
    // SAFETY: buf is a valid, writable buffer of the length passed.
    let ok = unsafe { pg_sys::pg_strong_random(buf.as_mut_ptr().cast(), buf.len()) };
    if !ok {
        fail(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            "could not generate a random token".to_string(),
        );
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

static USER_NAMED: Statement = Statement {
    sql: "SELECT id FROM place.users WHERE name = $1",
    params: &[pg_sys::TEXTOID],
};

static INSERT_USER: Statement = Statement {
    sql: "WITH u AS (INSERT INTO place.users (name) VALUES ($1) RETURNING id) \
          INSERT INTO place.user_tokens (user_id, token_hash) \
          SELECT id, sha256(convert_to($2, 'UTF8')) FROM u RETURNING user_id",
    params: &[pg_sys::TEXTOID, pg_sys::TEXTOID],
};

/// Creates a user; the token is returned here and never again.
#[pg_extern(volatile, parallel_unsafe)]
fn create_user(
    name: Option<&str>,
) -> TableIterator<'static, (name!(user_id, i64), name!(token, String))> {
    let name = required("name", name);
    check_name("user", name);
    if RESERVED_NAMES.contains(&name) {
        fail(
            PgSqlErrorCode::ERRCODE_RESERVED_NAME,
            format!("the user name '{name}' is pgplace's own: choose another"),
        );
    }
    let token = new_token();
    let id = Spi::connect_mut(|client| {
        if let Some(existing) = run(client, &USER_NAMED, &[name.into()]).next() {
            let id = existing.get::<i64>(1).ok().flatten().unwrap_or_default();
            fail(
                PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
                format!("a user named '{name}' already exists (id {id})"),
            );
        }
        run(client, &INSERT_USER, &[name.into(), token.as_str().into()])
            .next()
            .and_then(|row| row.get::<i64>(1).ok().flatten())
            .expect("INSERT ... RETURNING user_id returns the id")
    });
    TableIterator::once((id, token))
}

static INSERT_GUEST: Statement = Statement {
    sql: "WITH u AS (INSERT INTO place.users (name, guest) VALUES ($1, true) \
                     ON CONFLICT (name) DO NOTHING RETURNING id) \
          INSERT INTO place.user_tokens (user_id, token_hash) \
          SELECT id, sha256(convert_to($2, 'UTF8')) FROM u RETURNING user_id",
    params: &[pg_sys::TEXTOID, pg_sys::TEXTOID],
};

/// A guest: a user with a generated name (`guest-` and hex digits) and a token, for a
/// visitor who plays without an account. For the gateway, which bounds how many an
/// address makes and lets them place only on the boards that take guests.
#[pg_extern(volatile, parallel_unsafe)]
fn create_guest() -> TableIterator<
    'static,
    (
        name!(user_id, i64),
        name!(user_name, String),
        name!(token, String),
    ),
> {
    let token = new_token();
    let made = Spi::connect_mut(|client| {
        // 24 random bits, then more while the name is taken (a name is never reused).
        (3..=8).find_map(|bytes| {
            let name = format!("guest-{}", &new_token()[..bytes * 2]);
            run(
                client,
                &INSERT_GUEST,
                &[name.as_str().into(), token.as_str().into()],
            )
            .next()
            .map(|row| (column::<i64>(&row, 1), name))
        })
    });
    let (id, name) = made.unwrap_or_else(|| {
        fail(
            PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
            "no free guest name was found; try again".to_string(),
        )
    });
    TableIterator::once((id, name, token))
}

static USER_FOR_TOKEN: Statement = Statement {
    sql: "SELECT user_id FROM place.user_tokens WHERE token_hash = sha256(convert_to($1, 'UTF8'))",
    params: &[pg_sys::TEXTOID],
};

/// The user a token belongs to, or NULL for an unknown (or NULL) token. Runs with the
/// extension owner's rights: callers need not (and should not) read token hashes.
#[pg_extern(stable, parallel_safe, strict, security_definer)]
#[search_path(pg_catalog, pg_temp)]
fn user_for_token(token: &str) -> Option<i64> {
    Spi::connect_mut(|client| {
        run(client, &USER_FOR_TOKEN, &[token.into()])
            .next()
            .and_then(|row| row.get::<i64>(1).ok().flatten())
    })
}

/// The longest issuer or subject taken from a JWT.
const MAX_IDENTITY_CHARS: usize = 255;

static USER_OF_SUBJECT: Statement = Statement {
    sql: "SELECT u.id, u.name FROM place.user_identities i JOIN place.users u ON u.id = i.user_id \
          WHERE i.issuer = $1 AND i.subject = $2",
    params: &[pg_sys::TEXTOID, pg_sys::TEXTOID],
};

// A name that is taken gets the new user's id after it: "ada" becomes "ada #42".
static NEW_NAMED_USER: Statement = Statement {
    sql: "INSERT INTO place.users (id, name) \
          SELECT n, CASE WHEN $2 THEN $1 || ' #' || n ELSE $1 END \
          FROM nextval('place.users_id_seq') n \
          ON CONFLICT (name) DO NOTHING RETURNING id, name",
    params: &[pg_sys::TEXTOID, pg_sys::BOOLOID],
};

static LINK_SUBJECT: Statement = Statement {
    sql: "INSERT INTO place.user_identities (issuer, subject, user_id) VALUES ($1, $2, $3) \
          ON CONFLICT (issuer, subject) DO NOTHING RETURNING user_id",
    params: &[pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::INT8OID],
};

static DROP_USER: Statement = Statement {
    sql: "DELETE FROM place.users WHERE id = $1",
    params: &[pg_sys::INT8OID],
};

/// A name a JWT offers, made one a user may have: trimmed, at most 64 characters, not
/// blank (`player`), not one of pgplace's own (it gets an id after it, as a taken one).
fn offered_name(name: Option<&str>) -> (String, bool) {
    let name: String = name
        .unwrap_or_default()
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS - 8)
        .collect();
    if name.trim().is_empty() {
        return ("player".into(), true);
    }
    let reserved = RESERVED_NAMES.contains(&name.as_str());
    (name, reserved)
}

fn check_identity(what: &str, value: &str) {
    let chars = value.chars().count();
    if value.is_empty() || chars > MAX_IDENTITY_CHARS {
        fail(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{what} must have 1 to {MAX_IDENTITY_CHARS} characters (it has {chars})"),
        );
    }
}

/// The user a site's identity provider calls `subject` (a JWT's `iss` and `sub`), made on
/// first sight with the name it offers (`name`: free, or with the user's id after it).
/// For the gateway, which checked the JWT's signature, issuer, audience and expiry.
#[pg_extern(volatile, parallel_unsafe)]
fn user_for_subject(
    issuer: Option<&str>,
    subject: Option<&str>,
    name: default!(Option<&str>, "NULL"),
) -> TableIterator<'static, (name!(user_id, i64), name!(user_name, String))> {
    let (issuer, subject) = (required("issuer", issuer), required("subject", subject));
    check_identity("issuer", issuer);
    check_identity("subject", subject);
    let found = Spi::connect_mut(|client| {
        let find = |client: &mut pgrx::spi::SpiClient<'_>| {
            run(client, &USER_OF_SUBJECT, &[issuer.into(), subject.into()])
                .next()
                .map(|row| (column::<i64>(&row, 1), column::<String>(&row, 2)))
        };
        if let Some(user) = find(client) {
            return user;
        }
        let (name, suffixed) = offered_name(name);
        let made = [suffixed, true]
            .into_iter()
            .find_map(|suffix| {
                run(
                    client,
                    &NEW_NAMED_USER,
                    &[name.as_str().into(), suffix.into()],
                )
                .next()
                .map(|row| (column::<i64>(&row, 1), column::<String>(&row, 2)))
            })
            .expect("a name with a fresh id after it is free");
        let linked = run(
            client,
            &LINK_SUBJECT,
            &[issuer.into(), subject.into(), made.0.into()],
        )
        .next()
        .is_some();
        if linked {
            return made;
        }
        // Another call made the user first (it committed while this one waited on the
        // key): theirs is the one.
        run(client, &DROP_USER, &[made.0.into()]);
        find(client).unwrap_or_else(|| {
            fail(
                PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
                "the user was made by a concurrent call this snapshot does not see; try again"
                    .to_string(),
            )
        })
    });
    TableIterator::once(found)
}
