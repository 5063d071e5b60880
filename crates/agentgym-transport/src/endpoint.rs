//! Endpoint checks shared by both peers.
use crate::error::{Result, TransportError};

/// The default bind address: loopback only, with a port chosen by the OS.
pub const DEFAULT_BIND: &str = "tcp://127.0.0.1:0";

fn invalid(endpoint: &str, detail: &str) -> TransportError {
    TransportError::InvalidEndpoint {
        endpoint: endpoint.to_owned(),
        detail: detail.to_owned(),
    }
}

/// Accept `tcp://host:port` and `ipc://path`; reject wildcards the socket layer cannot serve.
pub(crate) fn check(endpoint: &str, binding: bool) -> Result<()> {
    if let Some(rest) = endpoint.strip_prefix("tcp://") {
        if rest.starts_with("*:") {
            return Err(invalid(
                endpoint,
                "use an explicit address (tcp://127.0.0.1:PORT, or tcp://0.0.0.0:PORT to listen on every interface)",
            ));
        }
        if !binding && rest.ends_with(":0") {
            return Err(invalid(endpoint, "cannot connect to port 0"));
        }
        Ok(())
    } else if let Some(path) = endpoint.strip_prefix("ipc://") {
        if path.is_empty() || path.contains('*') {
            return Err(invalid(endpoint, "ipc endpoints need an explicit path"));
        }
        Ok(())
    } else {
        Err(invalid(endpoint, "expected tcp://HOST:PORT or ipc://PATH"))
    }
}

/// Remove an ipc socket file left by a dead process (nothing accepts connections on it).
pub(crate) fn remove_stale_ipc(endpoint: &str) {
    #[cfg(unix)]
    if let Some(path) = endpoint.strip_prefix("ipc://") {
        let p = std::path::Path::new(path);
        if p.exists() {
            if let Err(e) = std::os::unix::net::UnixStream::connect(p) {
                if e.kind() == std::io::ErrorKind::ConnectionRefused {
                    let _ = std::fs::remove_file(p);
                }
            }
        }
    }
}
