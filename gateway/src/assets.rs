//! The web page's files, embedded in the binary (no build step, no CDN).

/// (path, content type, content) of every file served.
pub const FILES: &[(&str, &str, &[u8])] = &[(
    "/",
    "text/html; charset=utf-8",
    include_bytes!("../assets/index.html"),
)];

pub fn find(path: &str) -> Option<(&'static str, &'static [u8])> {
    FILES
        .iter()
        .find(|(p, _, _)| *p == path)
        .map(|(_, content_type, body)| (*content_type, *body))
}
