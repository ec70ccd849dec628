//! JSON text the gateway writes by hand (events are serialized once, as text, and sliced).

/// `s` as a JSON string.
pub fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}

/// RFC 3339 in UTC with microseconds, from microseconds since the Unix epoch.
pub fn timestamp(micros: i64) -> String {
    chrono::DateTime::from_timestamp_micros(micros)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}
