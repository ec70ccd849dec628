//! The layouts the docs describe, held against the code (`pgplace_tests::layout`): the
//! gateway's and the extension's `lib.rs` list their rooms from the ground up and no room
//! imports one listed after it; each of the gateway's folders maps its files; the
//! extension's `lib.rs` names every SQL file of its schema, kept apart from the update
//! scripts. Files only: no database.

use pgplace_tests::layout::{Crate, Naming};

fn unlisted(krate: &Crate, naming: Naming) -> Vec<String> {
    let levels = krate.levels(naming);
    krate
        .rooms()
        .into_iter()
        .filter(|r| !levels.contains_key(r))
        .collect()
}

#[test]
fn every_gateway_room_has_a_level_in_its_lib_rs() {
    let gateway = Crate::at("gateway");
    let missing = unlisted(&gateway, Naming::Backticks);
    assert!(
        missing.is_empty(),
        "rooms gateway/src/lib.rs does not list: {missing:?}"
    );
}

#[test]
fn no_gateway_room_imports_one_listed_after_it() {
    let wrong = Crate::at("gateway").imports_against_order(Naming::Backticks);
    assert!(
        wrong.is_empty(),
        "imports against gateway/src/lib.rs's order: {wrong:#?}"
    );
}

#[test]
fn every_gateway_folder_maps_its_files() {
    let unnamed = Crate::at("gateway").unnamed_files();
    assert!(
        unnamed.is_empty(),
        "files their folder's map does not name: {unnamed:#?}"
    );
}

#[test]
fn every_extension_module_has_a_line_in_its_lib_rs() {
    let extension = Crate::at("extension");
    let missing = unlisted(&extension, Naming::LeadingLink);
    assert!(
        missing.is_empty(),
        "modules extension/src/lib.rs does not list: {missing:?}"
    );
}

#[test]
fn no_extension_module_imports_one_listed_after_it() {
    let wrong = Crate::at("extension").imports_against_order(Naming::LeadingLink);
    assert!(
        wrong.is_empty(),
        "imports against extension/src/lib.rs's order: {wrong:#?}"
    );
}

fn sql_files(dir: &str) -> Vec<String> {
    let dir = Crate::at("extension").src.join(dir);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    names
}

/// Every SQL file of the current schema (`extension/schema/`) has its line in `lib.rs`, and
/// every file a line names is there; `extension/sql/` holds the update scripts alone.
#[test]
fn the_extension_lib_rs_names_its_sql_files() {
    let present = sql_files("../schema");
    let mut named: Vec<String> = Crate::at("extension")
        .bullets()
        .iter()
        .filter_map(|b| b.strip_prefix("`../schema/"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_string)
        .collect();
    named.sort();
    assert_eq!(
        named, present,
        "extension/src/lib.rs's SQL lines against extension/schema/"
    );
    let not_updates: Vec<String> = sql_files("../sql")
        .into_iter()
        .filter(|name| !(name.starts_with("pgplace--") && name.matches("--").count() == 2))
        .collect();
    assert!(
        not_updates.is_empty(),
        "extension/sql/ holds update scripts only: {not_updates:?}"
    );
}
