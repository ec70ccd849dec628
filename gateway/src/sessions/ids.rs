//! Random numbers that name sessions, subscriptions and answers.

pub fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    u64::from_le_bytes(bytes)
}

/// 128 random bits from the operating system, in lowercase hex: unguessable. Clients'
/// session ids are checked against this form (`names::is_session_id`) before any lookup.
pub fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
