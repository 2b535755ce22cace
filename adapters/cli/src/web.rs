//! `stagger demo --web`: serves the static web demo (built by `web-demo/build.sh`) on
//! loopback, so the page can reach the demo cluster's WebSocket bridges.
//!
//! A static file server is all it is: GET only, paths confined to the dist directory,
//! content types for what the site contains (wasm must be `application/wasm`).

use std::path::{Component, Path, PathBuf};
use std::thread;

/// Where the built site lives: `$STAGGER_WEB_DIST`, else `web-demo/dist` in this workspace.
pub fn dist_dir() -> PathBuf {
    std::env::var_os("STAGGER_WEB_DIST")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web-demo/dist"))
}

/// Starts serving `dir` on `127.0.0.1:port` in a background thread; returns the bound port.
pub fn serve(dir: PathBuf, port: u16) -> Result<u16, String> {
    if !dir.join("index.html").is_file() {
        return Err(format!(
            "the web demo is not built ({} has no index.html); run `bash web-demo/build.sh` first",
            dir.display()
        ));
    }
    let server = tiny_http::Server::http(("127.0.0.1", port))
        .map_err(|e| format!("could not listen on 127.0.0.1:{port}: {e}"))?;
    let bound = server.server_addr().to_ip().map_or(port, |a| a.port());
    thread::spawn(move || {
        for request in server.incoming_requests() {
            let response = respond(&dir, request.url());
            let _ = request.respond(response);
        }
    });
    Ok(bound)
}

fn respond(dir: &Path, url: &str) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let path = url.split(['?', '#']).next().unwrap_or("/");
    let Some(file) = resolve(dir, path) else {
        return tiny_http::Response::from_string("not found").with_status_code(404);
    };
    match std::fs::read(&file) {
        Ok(bytes) => {
            let header = tiny_http::Header::from_bytes("Content-Type", content_type(&file)).expect("static header");
            tiny_http::Response::from_data(bytes).with_header(header)
        }
        Err(_) => tiny_http::Response::from_string("not found").with_status_code(404),
    }
}

/// Maps a URL path to a file under `dir`, refusing anything that would leave it.
fn resolve(dir: &Path, url_path: &str) -> Option<PathBuf> {
    let relative = url_path.trim_start_matches('/');
    let mut file = dir.to_path_buf();
    for component in Path::new(relative).components() {
        match component {
            Component::Normal(part) => file.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    if file.is_dir() {
        file.push("index.html");
    }
    file.is_file().then_some(file)
}

fn content_type(file: &Path) -> &'static str {
    match file.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("wasm") => "application/wasm",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ts") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_cannot_escape_the_directory() {
        let dir = std::env::temp_dir().join(format!("stagger-web-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pkg")).unwrap();
        std::fs::write(dir.join("index.html"), "<html>").unwrap();
        std::fs::write(dir.join("pkg/x.wasm"), [0u8]).unwrap();
        assert_eq!(resolve(&dir, "/"), Some(dir.join("index.html")));
        assert_eq!(resolve(&dir, "/pkg/x.wasm"), Some(dir.join("pkg/x.wasm")));
        assert_eq!(resolve(&dir, "/../etc/passwd"), None);
        assert_eq!(resolve(&dir, "/pkg/../../x"), None);
        assert_eq!(resolve(&dir, "/missing.js"), None);
        assert_eq!(content_type(Path::new("a.wasm")), "application/wasm");
        std::fs::remove_dir_all(dir).ok();
    }
}
