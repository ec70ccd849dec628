//! The events that turn one window of a list view into the next.

use crate::views::events::{ClientEvent, Row};
use std::collections::{HashMap, HashSet};

/// Events that, applied in order to `old`, give `new`, naming only rows that changed,
/// entered or left: an `update` is a row whose content changed (moved or not), each such
/// row in one `update`; a row whose content is the same is never in an `update` (a client
/// that shows updates, as Qik's "the element changed", would flash a row nothing touched).
///
/// 1. `delete`s: the rows that left (deleted, no longer matching, pushed past the limit),
///    and those unchanged rows that must move (the others' order is kept: the longest run
///    of unchanged rows already in their new order stays where it is). A row that moved
///    without changing leaves and comes back: a `delete` here, an `insert` in step 3.
/// 2. One `update` per changed row, in the new order, placed right after the row it
///    follows in the new window among those already in their final order.
/// 3. `insert`s, in the new order, of the rows that came in (or came back).
pub fn diff(old: &[Row], new: &[Row]) -> Vec<ClientEvent> {
    let new_index: HashMap<&str, usize> = new
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id.as_ref(), i))
        .collect();
    let old_rows: HashMap<&str, &Row> = old.iter().map(|r| (r.id.as_ref(), r)).collect();
    let changed = |row: &Row| {
        old_rows
            .get(row.id.as_ref())
            .is_some_and(|o| o.value != row.value)
    };
    // Unchanged rows that stay, in the old order, by new index: the longest increasing run
    // keeps its place.
    let unchanged: Vec<(&str, usize)> = old
        .iter()
        .filter_map(|r| {
            let i = *new_index.get(r.id.as_ref())?;
            (new[i].value == r.value).then_some((r.id.as_ref(), i))
        })
        .collect();
    let kept: HashSet<&str> = longest_increasing(&unchanged);

    let mut events = Vec::new();
    // What the client holds, by id, as the events go.
    let mut list: Vec<&str> = Vec::with_capacity(old.len().max(new.len()));
    for row in old {
        let stays = match new_index.get(row.id.as_ref()) {
            None => false,
            Some(&i) => new[i].value != row.value || kept.contains(row.id.as_ref()),
        };
        if stays {
            list.push(row.id.as_ref());
        } else {
            events.push(ClientEvent::Delete {
                position: list.len(),
                obj: row.value.as_ref().clone(),
            });
        }
    }
    // Rows in their final order so far: the kept ones, then each changed row once placed.
    let mut settled: HashSet<&str> = kept.clone();
    for (i, row) in new.iter().enumerate() {
        if !changed(row) {
            continue;
        }
        let id = row.id.as_ref();
        let from = list
            .iter()
            .position(|r| *r == id)
            .expect("a changed row stays");
        list.remove(from);
        let position = new[..i]
            .iter()
            .rev()
            .map(|r| r.id.as_ref())
            .find(|r| settled.contains(r))
            .map_or(0, |before| {
                list.iter()
                    .position(|r| *r == before)
                    .expect("settled rows are held")
                    + 1
            });
        list.insert(position, id);
        settled.insert(id);
        events.push(ClientEvent::Update {
            position,
            from: (from != position).then_some(from),
            obj: row.value.as_ref().clone(),
            old: old_rows[id].value.as_ref().clone(),
        });
    }
    // Every row that stays now holds its new relative order: each one that comes in goes
    // where the new window has it.
    for (i, row) in new.iter().enumerate() {
        if !settled.contains(row.id.as_ref()) {
            events.push(ClientEvent::Insert {
                position: i,
                obj: row.value.as_ref().clone(),
            });
        }
    }
    events
}

/// The ids of a longest run of `items` (id, key) whose keys increase (patience sorting).
fn longest_increasing<'a>(items: &[(&'a str, usize)]) -> HashSet<&'a str> {
    // tails[k]: the index in `items` of the smallest last key of a run of length k + 1.
    let mut tails: Vec<usize> = Vec::new();
    let mut before: Vec<Option<usize>> = vec![None; items.len()];
    for (n, &(_, key)) in items.iter().enumerate() {
        let k = tails.partition_point(|&t| items[t].1 < key);
        before[n] = k.checked_sub(1).map(|k| tails[k]);
        if k == tails.len() {
            tails.push(n);
        } else {
            tails[k] = n;
        }
    }
    let mut run = HashSet::new();
    let mut at = tails.last().copied();
    while let Some(n) = at {
        run.insert(items[n].0);
        at = before[n];
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn rows(items: &[(i64, i64)]) -> Vec<Row> {
        items
            .iter()
            .map(|(id, v)| Row::new(json!({"id": id, "v": v})))
            .collect()
    }

    /// Applies events the way the README tells clients to.
    fn apply(list: &mut Vec<Value>, events: &[ClientEvent]) {
        for event in events {
            match event {
                ClientEvent::Insert { position, obj } => list.insert(*position, obj.clone()),
                ClientEvent::Update {
                    position,
                    from,
                    obj,
                    old,
                } => {
                    let at = from.unwrap_or(*position);
                    assert_eq!(&list[at], old, "old is the row the client holds");
                    list.remove(at);
                    list.insert(*position, obj.clone());
                }
                ClientEvent::Delete { position, obj } => {
                    assert_eq!(&list.remove(*position), obj);
                }
                ClientEvent::Ping | ClientEvent::Deleted => {}
            }
        }
    }

    /// Applies `diff(old, new)` to `old` and asserts that it gives `new`, naming only rows
    /// that changed, came in or left: every `update` changes its row, a row in no more than
    /// one; a row the same in both windows is in no `update`.
    fn check(old: &[(i64, i64)], new: &[(i64, i64)]) -> Vec<ClientEvent> {
        let (old_rows, new_rows) = (rows(old), rows(new));
        let events = diff(&old_rows, &new_rows);
        let mut list: Vec<Value> = old_rows.iter().map(|r| r.value.as_ref().clone()).collect();
        apply(&mut list, &events);
        let want: Vec<Value> = new_rows.iter().map(|r| r.value.as_ref().clone()).collect();
        assert_eq!(list, want, "{events:?}");
        let mut updated = HashSet::new();
        for event in &events {
            if let ClientEvent::Update { obj, old: was, .. } = event {
                assert_ne!(
                    obj, was,
                    "an update of a row that did not change: {events:?}"
                );
                assert!(
                    updated.insert(obj["id"].clone()),
                    "one update a row: {events:?}"
                );
                assert!(
                    !old.iter()
                        .any(|o| new.contains(o) && json!(o.0) == obj["id"]),
                    "an unchanged row in an update: {events:?}"
                );
            }
        }
        events
    }

    #[test]
    fn each_kind_of_change_gives_its_event() {
        assert!(check(&[(1, 1), (2, 2)], &[(1, 1), (2, 2)]).is_empty());
        // A row enters at the top and pushes the last one out.
        let e = check(&[(1, 9), (2, 8)], &[(3, 10), (1, 9)]);
        assert!(matches!(
            e[..],
            [
                ClientEvent::Delete { position: 1, .. },
                ClientEvent::Insert { position: 0, .. }
            ]
        ));
        // A row changes in place.
        let e = check(&[(1, 9), (2, 8)], &[(1, 9), (2, 7)]);
        assert!(matches!(
            e[..],
            [ClientEvent::Update {
                position: 1,
                from: None,
                ..
            }]
        ));
        // A row moves up.
        let e = check(&[(1, 9), (2, 8), (3, 7)], &[(3, 10), (1, 9), (2, 8)]);
        assert!(matches!(
            e[..],
            [ClientEvent::Update {
                position: 0,
                from: Some(2),
                ..
            }]
        ));
        // The list empties and fills.
        assert_eq!(check(&[(1, 1), (2, 2)], &[]).len(), 2);
        assert_eq!(check(&[], &[(1, 1), (2, 2)]).len(), 2);
    }

    #[test]
    fn random_windows_are_reached_exactly() {
        // A small linear congruential generator: the same cases on every run.
        let mut seed: u64 = 42;
        let mut next = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for _ in 0..2000 {
            let pick = |next: &mut dyn FnMut(u64) -> u64| -> Vec<(i64, i64)> {
                let n = next(8);
                let mut ids: Vec<i64> = (0..12).collect();
                let mut out = Vec::new();
                for _ in 0..n {
                    let id = ids.remove(next(ids.len() as u64) as usize);
                    out.push((id, next(3) as i64));
                }
                out
            };
            let old = pick(&mut next);
            let new = pick(&mut next);
            check(&old, &new);
        }
    }
}
