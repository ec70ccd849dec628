//! Scenario `held` (only with `--only held`): `board.place` through the gateway, as in
//! `place`, while another session of the database holds an old snapshot — the issue's
//! "no cliff" target for the gateway's placements. The clients place for one warm-up and
//! one undisturbed window, then for `--seconds` while a REPEATABLE READ transaction holds
//! its snapshot (`--held-control`: the same windows with nothing held, to see how much
//! the windows vary on their own). Each window's rate is the board's seq moved in it
//! (cooldown 0, distinct users: one seq per placement), printed as a ratio to the
//! undisturbed window.

use crate::place::{board_seq, Placers};
use crate::report::{rate, CpuClock, Table};
use crate::{Result, Setup};
use std::time::{Duration, Instant};

const NAME: &str = "held";

pub async fn run(setup: &Setup) -> Result<Table> {
    let window = Duration::from_secs(setup.args.held_window);
    let held_windows = setup.args.seconds.div_ceil(setup.args.held_window).max(1);
    // Warm-up, undisturbed, then the held windows.
    let total = window * (2 + held_windows as u32);
    let gateway = setup.gateway(NAME).await?;
    let db = pgplace_tests::connect(&setup.db_url).await;
    // Past the last boundary, so that the last window is as busy as the others.
    let placers = Placers::start(setup, gateway.addr, total + Duration::from_secs(2)).await?;
    let started = Instant::now();
    let cpu = CpuClock::start(&gateway);
    let mut table = Table::new();
    let mut boundary = started + window;
    tokio::time::sleep_until(boundary.into()).await;
    let (mut seq, mut at) = (board_seq(&db, setup.board).await?, Instant::now());
    let mut undisturbed = 0.0;
    let mut holder = None;
    let mut worst: Option<f64> = None;
    for w in 0..=held_windows {
        if w == 1 && !setup.args.held_control {
            holder = Some(hold_snapshot(&setup.db_url).await?);
        }
        boundary += window;
        tokio::time::sleep_until(boundary.into()).await;
        let (now_seq, now) = (board_seq(&db, setup.board).await?, Instant::now());
        let per_second = rate((now_seq - seq) as usize, now - at);
        (seq, at) = (now_seq, now);
        if w == 0 {
            undisturbed = per_second;
            table.info(
                NAME,
                "undisturbed window",
                format!("{per_second:.0} placements/s"),
            );
            continue;
        }
        let ratio = per_second / undisturbed;
        worst = Some(worst.map_or(ratio, |worst: f64| worst.min(ratio)));
        let from = (w - 1) * setup.args.held_window;
        table.info(
            NAME,
            &format!("{from}-{} s", from + setup.args.held_window),
            format!("{per_second:.0} placements/s, {ratio:.2}x"),
        );
    }
    let still_held = match &holder {
        Some(holder) => Some(holder_is_in_its_snapshot(&db, holder).await?),
        None => None,
    };
    let tally = placers.join().await?;
    drop(holder);
    table.info(NAME, "CPU over all windows", cpu.finish(&gateway));
    gateway.stop().await;
    let under = if setup.args.held_control {
        "worst window, nothing held (control)"
    } else {
        "worst window under the snapshot"
    };
    let worst = worst.unwrap_or(f64::NAN);
    table.target(NAME, under, format!("{worst:.2}x"), ">= 0.8x", worst >= 0.8);
    if let Some(held) = still_held {
        table.target(
            NAME,
            "snapshot held to the last window",
            held.to_string(),
            "true",
            held,
        );
    }
    let errors: usize = tally.errors.values().sum();
    table.target(NAME, "errors", errors.to_string(), "0", errors == 0);
    for (error, n) in tally.errors.iter().take(5) {
        table.info(NAME, &format!("  {n} x"), error.clone());
    }
    Ok(table)
}

/// A REPEATABLE READ transaction that has taken its snapshot; it stays open (and the
/// snapshot held) until the returned connection is dropped.
struct Holder {
    client: tokio_postgres::Client,
    pid: i32,
}

async fn hold_snapshot(db_url: &str) -> Result<Holder> {
    let client = pgplace_tests::connect(db_url).await;
    client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM place.boards")
        .await?;
    let pid = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await?
        .get(0);
    Ok(Holder { client, pid })
}

/// Whether the holder's backend still holds back the horizon (its xmin set, in its
/// transaction): the windows measured what they claim to.
async fn holder_is_in_its_snapshot(db: &tokio_postgres::Client, holder: &Holder) -> Result<bool> {
    holder.client.query_one("SELECT 1", &[]).await?;
    Ok(db
        .query_one(
            "SELECT count(*) = 1 FROM pg_stat_activity
             WHERE pid = $1 AND state = 'idle in transaction' AND backend_xmin IS NOT NULL",
            &[&holder.pid],
        )
        .await?
        .get(0))
}
