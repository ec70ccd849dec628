//! The layout the docs describe, checked against the code, so that neither can drift:
//! - `lib.rs` lists the rooms from the ground up, one level per `//! - ` line (a room is
//!   named bare in backticks); no room imports (`crate::…`) one of a later line;
//! - a room that is a folder names each of its files in its `mod.rs` docs (`` `name.rs` ``
//!   or `` `name` ``), and the one-file rooms with a folder beside them (`db.rs`) likewise.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `pub mod` names of lib.rs.
fn rooms() -> Vec<String> {
    read(&src().join("lib.rs"))
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect()
}

/// Each room's level, from lib.rs's `//! - ` lines (a line continues until the next one):
/// the rooms a line names in backticks, first mention first.
fn levels() -> HashMap<String, usize> {
    let rooms = rooms();
    let text = read(&src().join("lib.rs"));
    let mut bullets: Vec<String> = Vec::new();
    for line in text.lines().filter_map(|l| l.strip_prefix("//!")) {
        if let Some(rest) = line.strip_prefix(" - ") {
            bullets.push(rest.to_string());
        } else if let Some(last) = bullets.last_mut() {
            if line.starts_with("   ") {
                last.push_str(line);
            }
        }
    }
    let mut level = HashMap::new();
    for (i, bullet) in bullets.iter().enumerate() {
        // A room is named bare; `a::b` refers to something inside one.
        for (j, part) in bullet.split('`').enumerate() {
            if j % 2 == 1 && rooms.iter().any(|r| r == part) {
                level.entry(part.to_string()).or_insert(i);
            }
        }
    }
    level
}

/// Every `.rs` file under `dir`, with the room it belongs to (its first path component).
fn files(dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(src()).unwrap();
            let first = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            out.push((first.trim_end_matches(".rs").to_string(), path.clone()));
        }
    }
}

#[test]
fn every_room_has_a_level_in_lib_rs() {
    let levels = levels();
    let missing: Vec<String> = rooms()
        .into_iter()
        .filter(|r| !levels.contains_key(r) && r != "layout_check")
        .collect();
    assert!(
        missing.is_empty(),
        "rooms lib.rs's list does not name: {missing:?}"
    );
}

#[test]
fn no_room_imports_one_listed_after_it() {
    let levels = levels();
    let mut all = Vec::new();
    files(&src(), &mut all);
    let mut wrong = Vec::new();
    for (room, path) in all {
        let Some(&from) = levels.get(&room) else {
            continue;
        };
        // The code, not its comments or its tests.
        let code = read(&path);
        let code = code.split("#[cfg(test)]").next().unwrap_or("");
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let name: String = line[i + 7..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if levels.get(&name).is_some_and(|&to| to > from) {
                    wrong.push(format!("{} uses {name}", path.display()));
                }
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "imports against lib.rs's order: {wrong:#?}"
    );
}

/// The `//!` docs of a folder's map: its `mod.rs`, or the file of the same name beside it.
fn map_docs(dir: &Path) -> (PathBuf, String) {
    let map = if dir.join("mod.rs").exists() {
        dir.join("mod.rs")
    } else {
        dir.with_extension("rs")
    };
    let docs = read(&map)
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    (map, docs)
}

/// The files and folders directly in `dir` that its map does not name (a folder as
/// `` `name/` ``), and the same for each folder in it.
fn unnamed_in(dir: &Path, out: &mut Vec<String>) {
    let (map, docs) = map_docs(dir);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let named = if path.is_dir() {
            unnamed_in(&path, out);
            docs.contains(&format!("`{name}/")) || docs.contains(&format!("`{name}`"))
        } else if let Some(stem) = name.strip_suffix(".rs") {
            stem == "mod"
                || docs.contains(&format!("`{stem}.rs`"))
                || docs.contains(&format!("`{stem}`"))
        } else {
            true
        };
        if !named {
            out.push(format!("{} does not name {name}", map.display()));
        }
    }
}

#[test]
fn every_folder_room_maps_its_files() {
    let mut unnamed = Vec::new();
    for entry in std::fs::read_dir(src()).unwrap() {
        let dir = entry.unwrap().path();
        if dir.is_dir() {
            unnamed_in(&dir, &mut unnamed);
        }
    }
    unnamed.sort();
    assert!(
        unnamed.is_empty(),
        "files their room's map does not name: {unnamed:#?}"
    );
}
