//! The layouts the docs describe, held against the code (`pgplace_tests::layout`): the
//! gateway's and the extension's `lib.rs` list their rooms from the ground up and no room
//! imports one listed after it; each of the gateway's folders maps its files; the
//! extension's `lib.rs` names every SQL file it installs. Files only: no database.

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

/// Every SQL file the extension installs (all of `extension/sql/` but the update scripts)
/// has its line in `lib.rs`, and every file a line names is there.
#[test]
fn the_extension_lib_rs_names_its_sql_files() {
    let extension = Crate::at("extension");
    let sql_dir = extension.src.join("../sql");
    let mut present: Vec<String> = std::fs::read_dir(&sql_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|name| name.ends_with(".sql") && !name.starts_with("pgplace--"))
        .collect();
    present.sort();
    let mut named: Vec<String> = extension
        .bullets()
        .iter()
        .filter_map(|b| b.strip_prefix("`../sql/"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_string)
        .collect();
    named.sort();
    assert_eq!(
        named, present,
        "extension/src/lib.rs's SQL lines against extension/sql/"
    );
}
