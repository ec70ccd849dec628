//! A board's placer lease (pgplace 0.8.12, `place.claim_placer`): which gateway groups the
//! board's placements, and where the others forward theirs.

use deadpool_postgres::ClientWrapper;

/// Who holds a board's lease after this gateway's claim.
pub struct Holder {
    pub gateway: u64,
    pub address: String,
    pub token: String,
}

/// Takes or renews the lease of `board` for `lease_ms` when it is free, expired or this
/// gateway's; answers who holds it now.
pub async fn claim(
    client: &ClientWrapper,
    board: i64,
    gateway: u64,
    address: &str,
    token: &str,
    lease_ms: i32,
) -> Result<Option<Holder>, tokio_postgres::Error> {
    let sql = "SELECT gateway, address, token FROM place.claim_placer($1, $2, $3, $4, $5)";
    let row = client
        .query_opt(
            &client.prepare_cached(sql).await?,
            // Gateway ids are random u64s; the database keeps their bits in a bigint.
            &[&board, &(gateway as i64), &address, &token, &lease_ms],
        )
        .await?;
    Ok(row.map(|row| Holder {
        gateway: row.get::<_, i64>(0) as u64,
        address: row.get(1),
        token: row.get(2),
    }))
}

/// Gives the lease of `board` up if this gateway holds it.
pub async fn release(
    client: &ClientWrapper,
    board: i64,
    gateway: u64,
) -> Result<(), tokio_postgres::Error> {
    let sql = "SELECT place.release_placer($1, $2)";
    client
        .query_one(
            &client.prepare_cached(sql).await?,
            &[&board, &(gateway as i64)],
        )
        .await?;
    Ok(())
}
