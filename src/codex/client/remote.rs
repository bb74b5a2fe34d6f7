//! A remote app-server, reached over Codex's own WebSocket transport (`codex app-server --listen
//! ws://IP:PORT --ws-auth capability-token --ws-token-file FILE`): one JSON-RPC message per text
//! frame, the capability token as `Authorization: Bearer` on the upgrade.
//!
//! [`connect`] turns that connection into the line-framed byte stream a local child speaks on
//! its stdio (one message per line), so the peer, the session and the hub above it are the same
//! for both kinds of member. Two small tasks carry the frames across; they end with either side
//! and belong to the [`Connection`], which joins them.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use tokio_util::compat::TokioAsyncReadCompatExt;
use tokio_util::task::TaskTracker;

/// Largest message accepted from a remote app-server (the same cap as a local child's frames).
const MAX_MESSAGE_BYTES: usize = super::framing::DEFAULT_MAX_FRAME_BYTES;

/// Where a remote app-server listens and the token it wants (its `Debug` never shows the
/// token).
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteEndpoint {
    /// `ws://HOST:PORT[/PATH]`, as the operator wrote it (it names the member).
    pub url: String,
    /// The capability token (never logged).
    pub token: String,
}

impl std::fmt::Debug for RemoteEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteEndpoint")
            .field("url", &self.url)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// Why a remote app-server could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error(
        "{url}: not a ws://HOST:PORT address (Codex's app-server listener speaks plain ws://)"
    )]
    BadUrl { url: String },
    #[error("{url}: cannot connect: {source}")]
    Connect {
        url: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{url}: no WebSocket handshake within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    #[error("{url}: the app-server refused the connection (HTTP {status}{hint})")]
    Refused {
        url: String,
        status: u16,
        hint: &'static str,
    },
    #[error("{url}: WebSocket handshake failed: {message}")]
    Handshake { url: String, message: String },
}

/// The line-framed halves a peer reads and writes, and the tasks that carry them.
pub struct Connection {
    pub reader: ReadHalf<DuplexStream>,
    pub writer: WriteHalf<DuplexStream>,
    pub tasks: TaskTracker,
}

/// Largest token file read (Codex's capability tokens are short).
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The remote members of `--app-server URL` and `--app-server-token-file FILE` (paired in
/// order; one file serves every URL): each URL checked, each token read from a regular file
/// with a byte cap, trimmed, and not empty. Errors name the flag and the file.
pub fn remote_endpoints(
    urls: &[String],
    token_files: &[std::path::PathBuf],
) -> crate::Result<Vec<RemoteEndpoint>> {
    let flag_error = |flag: &str, message: String| crate::Error::InvalidArgument {
        flag: flag.to_string(),
        message,
    };
    if urls.is_empty() {
        if !token_files.is_empty() {
            return Err(flag_error(
                "--app-server-token-file",
                "given without an --app-server".into(),
            ));
        }
        return Ok(Vec::new());
    }
    if token_files.len() != urls.len() && token_files.len() != 1 {
        return Err(flag_error(
            "--app-server-token-file",
            format!(
                "{} token files for {} --app-server addresses (give one per address, or one for all)",
                token_files.len(),
                urls.len()
            ),
        ));
    }
    let mut endpoints = Vec::new();
    for (index, url) in urls.iter().enumerate() {
        if parse(url).is_none() {
            return Err(flag_error(
                "--app-server",
                format!("{url}: not a ws://HOST:PORT address"),
            ));
        }
        if endpoints
            .iter()
            .any(|known: &RemoteEndpoint| known.url == *url)
        {
            return Err(flag_error("--app-server", format!("{url} is given twice")));
        }
        let file = &token_files[index.min(token_files.len() - 1)];
        let bytes = crate::support::fs::read_file_capped(file, MAX_TOKEN_FILE_BYTES)?;
        let token = String::from_utf8_lossy(&bytes).trim().to_string();
        if token.is_empty() || token.chars().any(char::is_control) {
            return Err(flag_error(
                "--app-server-token-file",
                format!("{}: no token in it (one line of text)", file.display()),
            ));
        }
        endpoints.push(RemoteEndpoint {
            url: url.clone(),
            token,
        });
    }
    Ok(endpoints)
}

/// `(host:port, path)` of a `ws://` URL.
fn parse(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("ws://")?;
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    let (host, port) = authority.rsplit_once(':')?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return None;
    }
    Some((authority.to_string(), path.to_string()))
}

/// Connect, upgrade with the token, and start carrying frames.
pub async fn connect(
    endpoint: &RemoteEndpoint,
    timeout: Duration,
) -> Result<Connection, RemoteError> {
    let url = endpoint.url.clone();
    let (authority, path) = parse(&url).ok_or_else(|| RemoteError::BadUrl { url: url.clone() })?;
    let handshake = async {
        let socket = tokio::net::TcpStream::connect(&authority)
            .await
            .map_err(|source| RemoteError::Connect {
                url: url.clone(),
                source,
            })?;
        let _ = socket.set_nodelay(true);
        let mut client = soketto::handshake::Client::new(socket.compat(), &authority, &path);
        let bearer = format!("Bearer {}", endpoint.token);
        let headers = [soketto::handshake::client::Header {
            name: "Authorization",
            value: bearer.as_bytes(),
        }];
        client.set_headers(&headers);
        let response = client
            .handshake()
            .await
            .map_err(|error| RemoteError::Handshake {
                url: url.clone(),
                message: error.to_string(),
            })?;
        match response {
            soketto::handshake::ServerResponse::Accepted { .. } => Ok(client.into_builder()),
            soketto::handshake::ServerResponse::Rejected { status_code } => {
                Err(RemoteError::Refused {
                    url: url.clone(),
                    status: status_code,
                    hint: match status_code {
                        401 => ": wrong or missing token",
                        403 => ": an Origin header, or not allowed",
                        _ => "",
                    },
                })
            }
            soketto::handshake::ServerResponse::Redirect { status_code, .. } => {
                Err(RemoteError::Refused {
                    url: url.clone(),
                    status: status_code,
                    hint: ": a redirect (not followed)",
                })
            }
        }
    };
    let mut builder = tokio::time::timeout(timeout, handshake)
        .await
        .map_err(|_| RemoteError::Timeout {
            url: url.clone(),
            timeout,
        })??;
    builder.set_max_message_size(MAX_MESSAGE_BYTES);
    builder.set_max_frame_size(MAX_MESSAGE_BYTES);
    let (mut sender, mut receiver) = builder.finish();
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (ours_read, mut ours_write) = tokio::io::split(ours);
    let (reader, writer) = tokio::io::split(theirs);
    let tasks = TaskTracker::new();
    // Frames in: each message becomes one line.
    tasks.spawn(async move {
        let mut data = Vec::new();
        loop {
            data.clear();
            match receiver.receive_data(&mut data).await {
                Ok(_) => {
                    // A message is JSON: a raw newline inside it cannot be part of it.
                    // (Most messages hold none: looked for first, at memchr's speed.)
                    if memchr::memchr(b'\n', &data).is_some() {
                        data.retain(|byte| *byte != b'\n');
                    }
                    data.push(b'\n');
                    if ours_write.write_all(&data).await.is_err() {
                        break;
                    }
                }
                Err(error) => {
                    tracing::debug!("remote app-server connection ended: {error}");
                    break;
                }
            }
        }
        let _ = ours_write.shutdown().await;
    });
    // Lines out: each line becomes one text frame.
    tasks.spawn(async move {
        let mut lines = BufReader::new(ours_read);
        let mut line = Vec::new();
        loop {
            line.clear();
            match lines.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line);
                    let text = text.trim_end_matches(['\n', '\r']);
                    if text.is_empty() {
                        continue;
                    }
                    if sender.send_text(text).await.is_err() || sender.flush().await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = sender.close().await;
    });
    tasks.close();
    Ok(Connection {
        reader,
        writer,
        tasks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_ws_host_port_urls_are_taken() {
        assert_eq!(
            parse("ws://127.0.0.1:39175"),
            Some(("127.0.0.1:39175".into(), "/".into()))
        );
        assert_eq!(
            parse("ws://[::1]:4000/rpc"),
            Some(("[::1]:4000".into(), "/rpc".into()))
        );
        assert_eq!(parse("wss://h:1"), None);
        assert_eq!(parse("ws://h"), None);
        assert_eq!(parse("ws://:80"), None);
        assert_eq!(parse("http://h:80"), None);
    }
}

#[cfg(test)]
mod endpoint_flag_tests {
    use super::*;

    #[test]
    fn token_files_are_paired_read_and_checked_naming_the_flag() {
        let dir = tempfile::tempdir().expect("dir");
        let good = dir.path().join("good");
        let empty = dir.path().join("empty");
        let control = dir.path().join("control");
        std::fs::write(&good, "token-0123456789\n").expect("good");
        std::fs::write(&empty, "  \n").expect("empty");
        std::fs::write(&control, "tok\u{7}en").expect("control");
        let urls = |n: usize| -> Vec<String> {
            (0..n)
                .map(|i| format!("ws://127.0.0.1:{}", 4000 + i))
                .collect()
        };
        let one_for_all =
            remote_endpoints(&urls(2), std::slice::from_ref(&good)).expect("one for all");
        assert_eq!(one_for_all.len(), 2);
        assert_eq!(one_for_all[1].token, "token-0123456789");
        assert!(
            !format!("{one_for_all:?}").contains("token-0123456789"),
            "Debug hides the token"
        );
        let error = |urls: &[String], files: &[std::path::PathBuf]| {
            remote_endpoints(urls, files)
                .expect_err("refused")
                .to_string()
        };
        assert!(error(&urls(3), &[good.clone(), good.clone()]).contains("2 token files for 3"));
        assert!(error(&urls(1), std::slice::from_ref(&empty)).contains("no token in it"));
        assert!(error(&urls(1), std::slice::from_ref(&control)).contains("no token in it"));
        assert!(error(&[], std::slice::from_ref(&good)).contains("without an --app-server"));
        assert!(error(&["http://h:1".into()], std::slice::from_ref(&good)).contains("not a ws://"));
        let twice = vec!["ws://h:1".to_string(), "ws://h:1".to_string()];
        assert!(error(&twice, std::slice::from_ref(&good)).contains("given twice"));
        assert!(error(&urls(1), &[dir.path().join("missing")]).contains("missing"));
    }
}
