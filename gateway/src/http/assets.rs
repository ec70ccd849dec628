//! The web page's files, embedded in the binary (no build step, no CDN). The page is a
//! plain long-polling JSON-RPC client; `assets/js/app.js` says which module does what.

/// (path, content type, content) of every file served.
pub const FILES: &[(&str, &str, &[u8])] = &[
    ("/", HTML, include_bytes!("../../assets/index.html")),
    (
        "/index.html",
        HTML,
        include_bytes!("../../assets/index.html"),
    ),
    ("/style.css", CSS, include_bytes!("../../assets/style.css")),
    (
        "/favicon.svg",
        SVG,
        include_bytes!("../../assets/favicon.svg"),
    ),
    // The client for any page, at a path that stays (gateway/README.md, "The web page").
    (
        "/client/pgplace.js",
        JS,
        include_bytes!("../../assets/client/pgplace.js"),
    ),
    ("/js/api.js", JS, include_bytes!("../../assets/js/api.js")),
    ("/js/app.js", JS, include_bytes!("../../assets/js/app.js")),
    (
        "/js/board-image.js",
        JS,
        include_bytes!("../../assets/js/board-image.js"),
    ),
    (
        "/js/cooldown.js",
        JS,
        include_bytes!("../../assets/js/cooldown.js"),
    ),
    (
        "/js/cursors.js",
        JS,
        include_bytes!("../../assets/js/cursors.js"),
    ),
    (
        "/js/frozen.js",
        JS,
        include_bytes!("../../assets/js/frozen.js"),
    ),
    ("/js/hash.js", JS, include_bytes!("../../assets/js/hash.js")),
    (
        "/js/history.js",
        JS,
        include_bytes!("../../assets/js/history.js"),
    ),
    ("/js/live.js", JS, include_bytes!("../../assets/js/live.js")),
    (
        "/js/packed.js",
        JS,
        include_bytes!("../../assets/js/packed.js"),
    ),
    (
        "/js/resume.js",
        JS,
        include_bytes!("../../assets/js/resume.js"),
    ),
    ("/js/view.js", JS, include_bytes!("../../assets/js/view.js")),
];

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

pub fn find(path: &str) -> Option<(&'static str, &'static [u8])> {
    FILES
        .iter()
        .find(|(p, _, _)| *p == path)
        .map(|(_, content_type, body)| (*content_type, *body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_page_imports_is_served() {
        for (path, _, body) in FILES {
            let text = std::str::from_utf8(body).expect("assets are UTF-8");
            // `from './x.js'` beside it, `from '../js/x.js'`, or a path from the root.
            for import in text.split("from '").skip(1) {
                let name = import.split('\'').next().expect("a quoted path");
                let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir);
                let served = match name.strip_prefix("./") {
                    Some(file) => format!("{dir}/{file}"),
                    None if name.starts_with('/') => name.to_string(),
                    None => format!("/{}", name.trim_start_matches("../")),
                };
                assert!(
                    find(&served).is_some(),
                    "{path} imports {served}, which is not served"
                );
            }
        }
    }

    /// What `default-src 'self'` (`responses::SECURITY_HEADERS`) would block, and the
    /// page would then silently lack: change the policy with the page, not after it.
    #[test]
    fn the_page_keeps_within_its_content_security_policy() {
        for (path, _, body) in FILES {
            let text = std::str::from_utf8(body).expect("assets are UTF-8");
            if path.ends_with(".svg") {
                // An image: its xmlns names a namespace, it loads and runs nothing.
                for blocked in ["href", "<script", "<style", "url("] {
                    assert!(!text.contains(blocked), "{path} has {blocked:?}");
                }
                continue;
            }
            for blocked in [
                "<style",
                " style=",
                "javascript:",
                "'data:",
                "\"data:",
                "`data:",
                "url(data:",
                "'blob:",
                "\"blob:",
                "`blob:",
                "createObjectURL",
                "eval(",
                "new Function",
                "innerHTML",
                "setAttribute('style'",
                "'http",
                "\"http",
                "`http",
            ] {
                assert!(!text.contains(blocked), "{path} has {blocked:?}");
            }
            if !path.ends_with(".html") && *path != "/" {
                continue;
            }
            for tag in text.split("<script").skip(1) {
                let tag = tag.split('>').next().expect("a tag");
                assert!(tag.contains(" src="), "{path} has an inline script");
            }
            for tag in text.split('<').skip(1) {
                let tag = tag.split('>').next().expect("a tag");
                assert!(
                    !tag.split_whitespace()
                        .any(|a| a.starts_with("on") && a.contains('=')),
                    "{path} has an inline event handler: <{tag}>"
                );
            }
        }
    }
}
