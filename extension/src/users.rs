//! Users and their tokens. A token is 256 random bits, shown once by `create_user` and
//! stored only as its SHA-256, so neither a table read nor a dump reveals it.

use crate::boards::check_name;
use crate::input::{fail, required};
use crate::spi::{run, Statement};
use pgrx::prelude::*;
use pgrx::{pg_sys, PgSqlErrorCode};

const TOKEN_BYTES: usize = 32;

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
