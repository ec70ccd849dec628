//! The layouts the docs describe, read from the code, so that `tests/tests/database/layout.rs` can
//! hold each crate's docs against its imports and files:
//! - a crate's `lib.rs` lists its rooms (modules) from the ground up, one level per
//!   `//! - ` line; no room imports (`crate::…`) one of a later line;
//! - a room that is a folder names each of its files in its `mod.rs` docs (`` `name.rs` ``
//!   or `` `name` ``), and a one-file room with a folder beside it (`db.rs`) likewise.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A crate's `src/`.
pub struct Crate {
    pub src: PathBuf,
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// How a crate's `lib.rs` names a room on its line.
#[derive(Clone, Copy)]
pub enum Naming {
    /// Every room named bare in backticks on the line (`` `config`, `errors` ``): several
    /// rooms may share a level.
    Backticks,
    /// The line begins with one room as a doc link (`` [`storage`]: … ``): one room a line.
    LeadingLink,
}

impl Crate {
    /// The crate at `path` (relative to the workspace root).
    pub fn at(path: &str) -> Crate {
        Crate {
            src: Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(path)
                .join("src"),
        }
    }

    pub fn lib(&self) -> String {
        read(&self.src.join("lib.rs"))
    }

    /// The `pub mod` names of `lib.rs`.
    pub fn rooms(&self) -> Vec<String> {
        self.lib()
            .lines()
            .filter_map(|l| l.strip_prefix("pub mod "))
            .map(|l| l.trim_end_matches(';').to_string())
            .collect()
    }

    /// The `//! - ` lines of `lib.rs`, each with its continuation lines.
    pub fn bullets(&self) -> Vec<String> {
        let mut bullets: Vec<String> = Vec::new();
        for line in self.lib().lines().filter_map(|l| l.strip_prefix("//!")) {
            if let Some(rest) = line.strip_prefix(" - ") {
                bullets.push(rest.to_string());
            } else if let Some(last) = bullets.last_mut() {
                if line.starts_with("   ") {
                    last.push_str(line);
                }
            }
        }
        bullets
    }

    /// Each room's level: the number of the `lib.rs` line that names it first.
    pub fn levels(&self, naming: Naming) -> HashMap<String, usize> {
        let rooms = self.rooms();
        let mut level = HashMap::new();
        for (i, bullet) in self.bullets().iter().enumerate() {
            let named: Vec<&str> = match naming {
                // A room is named bare; `a::b` refers to something inside one.
                Naming::Backticks => bullet
                    .split('`')
                    .enumerate()
                    .filter(|(j, _)| j % 2 == 1)
                    .map(|(_, part)| part)
                    .collect(),
                Naming::LeadingLink => bullet
                    .strip_prefix("[`")
                    .and_then(|rest| rest.split('`').next())
                    .into_iter()
                    .collect(),
            };
            for part in named {
                if rooms.iter().any(|r| r == part) {
                    level.entry(part.to_string()).or_insert(i);
                }
            }
        }
        level
    }

    /// Every `.rs` file under `src/`, with the room it belongs to (its first path component).
    pub fn files(&self) -> Vec<(String, PathBuf)> {
        let mut out = Vec::new();
        self.walk(&self.src, &mut out);
        out
    }

    fn walk(&self, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                self.walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(&self.src).unwrap();
                let first = rel.components().next().unwrap().as_os_str();
                let room = first.to_string_lossy().trim_end_matches(".rs").to_string();
                out.push((room, path.clone()));
            }
        }
    }

    /// `"<file> uses <room>"` for each import of a room listed after the importing one.
    pub fn imports_against_order(&self, naming: Naming) -> Vec<String> {
        let levels = self.levels(naming);
        let mut wrong = Vec::new();
        for (room, path) in self.files() {
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
        wrong
    }

    /// The files and folders of each folder under `src/` that its map does not name.
    pub fn unnamed_files(&self) -> Vec<String> {
        let mut unnamed = Vec::new();
        for entry in std::fs::read_dir(&self.src).unwrap() {
            let dir = entry.unwrap().path();
            if dir.is_dir() {
                unnamed_in(&dir, &mut unnamed);
            }
        }
        unnamed.sort();
        unnamed
    }
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
