//! The events that turn one window of a list view into the next.

use crate::events::{ClientEvent, Row};
use std::collections::{HashMap, HashSet};

/// Events that, applied in order to `old`, give `new`: first the rows that left (deleted,
/// no longer matching, pushed past the limit), then, in the new order, rows that came in,
/// moved, or whose content changed. A row that changed and moved down is moved itself,
/// rather than every unchanged row it passed being moved up: the events name the rows
/// that really changed.
pub fn diff(old: &[Row], new: &[Row]) -> Vec<ClientEvent> {
    let staying: HashSet<&str> = new.iter().map(|r| r.id.as_ref()).collect();
    let new_index: HashMap<&str, usize> = new
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id.as_ref(), i))
        .collect();
    let mut events = Vec::new();
    let mut list: Vec<&Row> = Vec::with_capacity(old.len().max(new.len()));
    for row in old {
        if staying.contains(row.id.as_ref()) {
            list.push(row);
        } else {
            events.push(ClientEvent::Delete {
                position: list.len(),
                obj: row.value.as_ref().clone(),
            });
        }
    }
    // list[..i] equals new[..i].
    let mut i = 0;
    while i < new.len() {
        let row = &new[i];
        if list.get(i).is_some_and(|r| r.id == row.id) {
            if list[i].value != row.value {
                events.push(ClientEvent::Update {
                    position: i,
                    from: None,
                    obj: row.value.as_ref().clone(),
                    old: list[i].value.as_ref().clone(),
                });
            }
            list[i] = row;
            i += 1;
            continue;
        }
        let later = list
            .iter()
            .skip(i + 1)
            .position(|r| r.id == row.id)
            .map(|j| i + 1 + j);
        // The row in the way belongs further down; when it changed and `row` did not, it
        // is the one that moved.
        if let (Some(j), Some(here)) = (later, list.get(i)) {
            let target = new_index[here.id.as_ref()];
            let (in_way_changed, row_unchanged) =
                (here.value != new[target].value, list[j].value == row.value);
            if in_way_changed && row_unchanged {
                let moved = list.remove(i);
                let position = target.min(list.len());
                events.push(ClientEvent::Update {
                    position,
                    from: Some(i),
                    obj: new[target].value.as_ref().clone(),
                    old: moved.value.as_ref().clone(),
                });
                list.insert(position, &new[target]);
                continue;
            }
        }
        match later {
            Some(from) => {
                let moved = list.remove(from);
                events.push(ClientEvent::Update {
                    position: i,
                    from: Some(from),
                    obj: row.value.as_ref().clone(),
                    old: moved.value.as_ref().clone(),
                });
            }
            None => events.push(ClientEvent::Insert {
                position: i,
                obj: row.value.as_ref().clone(),
            }),
        }
        list.insert(i, row);
        i += 1;
    }
    events
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

    fn check(old: &[(i64, i64)], new: &[(i64, i64)]) -> Vec<ClientEvent> {
        let (old, new) = (rows(old), rows(new));
        let events = diff(&old, &new);
        let mut list: Vec<Value> = old.iter().map(|r| r.value.as_ref().clone()).collect();
        apply(&mut list, &events);
        let want: Vec<Value> = new.iter().map(|r| r.value.as_ref().clone()).collect();
        assert_eq!(list, want, "{events:?}");
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
