//! The one URL type of clawbridge's WebSocket sockets, for what it listens on (`--listen`) and
//! what it connects to (`--app-server`): `ws://HOST:PORT[/PATH]`, `wss://HOST:PORT[/PATH]`
//! (TLS) and `unix://PATH` (a WebSocket over a Unix socket, as Codex's own
//! `app-server --listen unix://PATH` serves it). Each user then says which kinds it takes: the
//! endpoint listens on `ws://IP:PORT` and `unix://`; a member may be any of the three.

use std::path::PathBuf;

/// A parsed socket URL (its `Display` is the URL as given, normalised).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SocketUrl {
    /// `ws://HOST:PORT[/PATH]`: plain WebSocket over TCP.
    Ws { authority: String, path: String },
    /// `wss://HOST:PORT[/PATH]`: WebSocket over TLS (the certificate must name `host`).
    Wss {
        authority: String,
        host: String,
        path: String,
    },
    /// `unix://PATH`: WebSocket over a Unix socket (the file's permissions are its guard).
    Unix(PathBuf),
}

impl SocketUrl {
    /// Read a URL; the error says which forms are taken.
    pub fn parse(url: &str) -> Result<SocketUrl, String> {
        let bad = || format!("{url}: not ws://HOST:PORT, wss://HOST:PORT or unix://PATH");
        if let Some(path) = url.strip_prefix("unix://") {
            if path.is_empty() || path.contains('\0') {
                return Err(format!("{url}: not unix://PATH"));
            }
            return Ok(SocketUrl::Unix(PathBuf::from(path)));
        }
        let (tls, rest) = match (url.strip_prefix("ws://"), url.strip_prefix("wss://")) {
            (Some(rest), _) => (false, rest),
            (_, Some(rest)) => (true, rest),
            _ => return Err(bad()),
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        let (host, port) = authority.rsplit_once(':').ok_or_else(bad)?;
        if host.is_empty()
            || port.parse::<u16>().is_err()
            || authority.contains('@')
            || path.chars().any(char::is_control)
        {
            return Err(bad());
        }
        let (authority, path) = (authority.to_string(), path.to_string());
        Ok(if tls {
            SocketUrl::Wss {
                authority,
                host: host.to_string(),
                path,
            }
        } else {
            SocketUrl::Ws { authority, path }
        })
    }

    /// The scheme: `ws`, `wss` or `unix`.
    pub fn scheme(&self) -> &'static str {
        match self {
            SocketUrl::Ws { .. } => "ws",
            SocketUrl::Wss { .. } => "wss",
            SocketUrl::Unix(_) => "unix",
        }
    }

    /// The `Host` of the WebSocket upgrade (a Unix socket has none: `localhost`).
    pub fn host_header(&self) -> &str {
        match self {
            SocketUrl::Ws { authority, .. } | SocketUrl::Wss { authority, .. } => authority,
            SocketUrl::Unix(_) => "localhost",
        }
    }

    /// The request path of the upgrade.
    pub fn request_path(&self) -> &str {
        match self {
            SocketUrl::Ws { path, .. } | SocketUrl::Wss { path, .. } => path,
            SocketUrl::Unix(_) => "/",
        }
    }
}

impl std::fmt::Display for SocketUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SocketUrl::Ws { authority, path } => write!(f, "ws://{authority}{}", shown(path)),
            SocketUrl::Wss {
                authority, path, ..
            } => write!(f, "wss://{authority}{}", shown(path)),
            SocketUrl::Unix(path) => write!(f, "unix://{}", path.display()),
        }
    }
}

/// A root path is left out of the shown URL (`ws://h:1`, not `ws://h:1/`).
fn shown(path: &str) -> &str {
    if path == "/" {
        ""
    } else {
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_schemes_and_nothing_else() {
        assert_eq!(
            SocketUrl::parse("ws://127.0.0.1:19175"),
            Ok(SocketUrl::Ws {
                authority: "127.0.0.1:19175".into(),
                path: "/".into()
            })
        );
        assert_eq!(
            SocketUrl::parse("wss://[::1]:4000/rpc"),
            Ok(SocketUrl::Wss {
                authority: "[::1]:4000".into(),
                host: "[::1]".into(),
                path: "/rpc".into()
            })
        );
        assert_eq!(
            SocketUrl::parse("unix:///run/codex.sock"),
            Ok(SocketUrl::Unix("/run/codex.sock".into()))
        );
        for bad in [
            "ws://h",
            "ws://:80",
            "http://h:80",
            "wss://user:pw@h:1",
            "unix://",
            "ws://h:99999",
        ] {
            assert!(SocketUrl::parse(bad).is_err(), "{bad}");
        }
        for url in ["ws://h:1", "wss://h:1/x", "unix:///s"] {
            assert_eq!(SocketUrl::parse(url).expect(url).to_string(), url);
        }
    }
}
