//! The region kind's unit tests: filling in bands, the grid, the budget.

use crate::errors::{RpcError, TOO_MANY};
use crate::mirror::snapshot::Settings;
use crate::views::region::index::Regions;
use crate::views::region::rect::{cut, Packed, Rect};
use crate::views::region::*;
use pgplace_core::bits::TileWidth;
use pgplace_core::payload::Placement;
use std::sync::Arc;

fn settings(width: i32, height: i32, bits_per_tile: i32) -> Arc<Settings> {
    Arc::new(Settings {
        id: 1,
        name: "b".into(),
        width,
        height,
        bits_per_tile,
        palette: Vec::new(),
        palette_names: None,
        cooldown: 0.0,
        state: "open".into(),
        freeze_after: None,
    })
}

#[test]
fn a_region_filled_in_bands_between_placements_ends_as_the_board() {
    // A 1-bit board at an odd column: copied tile by tile, in several bands.
    let (width, height) = (600, 400);
    let settings = settings(width, height, 1);
    let tile = TileWidth::new(1).unwrap();
    let mut board = vec![0u8; (width * height / 8) as usize];
    let mut state = 7u64;
    let mut random = move |below: i64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as i64 % below
    };
    for n in 0..(width * height) as i64 {
        tile.set(&mut board, n, random(2)).unwrap();
    }
    let regions = Regions::default();
    let rect = Rect {
        x: 3,
        y: 5,
        width: 590,
        height: 390,
    };
    let budget = RegionBudget {
        regions: 4,
        tiles: 1 << 30,
    };
    let (region, made) = regions
        .get(&settings, rect, false, 0, 10_000, budget, || Ok(()))
        .unwrap();
    assert!(made);
    let (mut seq, mut bands) = (0, 0);
    // Placed on the board, not yet handed to the regions (the board's lock is let go
    // before they are: a band may come between).
    let mut in_flight: Vec<(Placement, u8)> = Vec::new();
    loop {
        for _ in 0..40 {
            seq += 1;
            let (x, y) = (random(width as i64) as i32, random(height as i64) as i32);
            let n = x as i64 + width as i64 * y as i64;
            let old = tile.get(&board, n).unwrap();
            let color = 1 - old as i32;
            tile.set(&mut board, n, color.into()).unwrap();
            let p = Placement {
                board: 1,
                seq,
                x,
                y,
                color,
                user: 1,
                at: 0,
            };
            in_flight.push((p, old));
        }
        let handed: Vec<_> = in_flight.drain(..in_flight.len() / 2).collect();
        regions.apply(handed[0].0.seq, handed.last().unwrap().0.seq, &handed);
        bands += 1;
        if !region.fill_band(&board, width) {
            break;
        }
    }
    regions.apply(in_flight[0].0.seq, seq, &in_flight);
    assert!(bands >= 4, "{bands} bands");
    let s = region.lock();
    assert_eq!(s.seq, seq);
    assert!(
        s.bits
            == cut(
                Packed {
                    bits: &board,
                    width,
                    tile
                },
                rect
            ),
        "the board's tiles"
    );
}

#[test]
fn a_board_serves_distinct_regions_within_its_budget_and_shares_the_rest() {
    let regions = Regions::default();
    let settings = settings(100, 100, 4);
    let budget = RegionBudget {
        regions: 2,
        tiles: 150,
    };
    let rect = |x: i32, w: i32| Rect {
        x,
        y: 0,
        width: w,
        height: 10,
    };
    let get = |r: Rect| regions.get(&settings, r, false, 0, 10, budget, || Ok(()));
    let (a, made) = get(rect(0, 10)).unwrap();
    assert!(made);
    let (again, made) = get(rect(0, 10)).unwrap();
    assert!(!made && Arc::ptr_eq(&a, &again), "one copy per rectangle");
    let too_big = get(rect(20, 6)).err().expect("refused");
    assert_eq!(too_big.code, TOO_MANY, "100 + 60 tiles > 150");
    let (_b, _) = get(rect(20, 4)).unwrap();
    assert_eq!(
        get(rect(40, 1)).err().expect("refused").code,
        TOO_MANY,
        "two at most"
    );
    // A client's own limit is asked only for a new rectangle.
    let refused = regions.get(&settings, rect(0, 10), false, 0, 10, budget, || {
        Err(RpcError::new(TOO_MANY, "no"))
    });
    assert!(refused.is_ok(), "an existing rectangle is shared");
    drop((a, again, refused));
    // Rectangles nobody holds give their room back.
    let (_, made) = get(rect(60, 10)).unwrap();
    assert!(made);
}
