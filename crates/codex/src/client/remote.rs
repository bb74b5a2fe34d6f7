//! A remote app-server, reached over Codex's own WebSocket transport: `ws://HOST:PORT` of
//! `codex app-server --listen ws://IP:PORT --ws-auth capability-token --ws-token-file FILE` (the
//! capability token as `Authorization: Bearer` on the upgrade), `wss://HOST:PORT` of such a
//! listener behind a TLS terminator (the token then never crosses the network in clear), or
//! `unix://PATH` of `codex app-server --listen unix://PATH` (no token: the socket file's
//! permissions guard it). One JSON-RPC message per text frame on all three.
//!
//! [`connect`] turns that connection into the line-framed byte stream a local child speaks on
//! its stdio (one message per line), so the peer, the session and the hub above it are the same
//! for every kind of member. Two small tasks carry the frames across; they end with either side
//! and belong to the [`Connection`], which joins them.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream, ReadHalf,
    WriteHalf,
};
use tokio_util::compat::TokioAsyncReadCompatExt;
use tokio_util::task::TaskTracker;

use clawbridge_support::address::SocketUrl;

/// Largest message accepted from a remote app-server (the same cap as a local child's frames).
const MAX_MESSAGE_BYTES: usize = super::framing::DEFAULT_MAX_FRAME_BYTES;

/// Where a remote app-server listens, the token it wants and the TLS a `wss://` one is reached
/// with (its `Debug` never shows the token).
#[derive(Clone)]
pub struct RemoteEndpoint {
    /// The URL as the operator wrote it (it names the member).
    pub url: String,
    address: SocketUrl,
    /// The capability token (never logged); none for a `unix://` member.
    token: Option<String>,
    /// The TLS client configuration of a `wss://` member (the system's roots and
    /// `--app-server-ca`).
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl RemoteEndpoint {
    /// A member at `url` with its token (a `ws://` or `wss://` member needs one; a `unix://`
    /// member is sent none). A `wss://` member trusts the system's roots until
    /// [`RemoteEndpoint::with_tls`] says otherwise.
    pub fn new(url: &str, token: Option<String>) -> Result<RemoteEndpoint, String> {
        let address = SocketUrl::parse(url)?;
        let token = match address {
            SocketUrl::Unix(_) => None,
            _ => Some(token.ok_or_else(|| format!("{url}: no capability token for it"))?),
        };
        Ok(RemoteEndpoint {
            url: url.to_string(),
            address,
            token,
            tls: None,
        })
    }

    /// The TLS configuration a `wss://` member is reached with.
    pub fn with_tls(mut self, tls: Arc<rustls::ClientConfig>) -> RemoteEndpoint {
        self.tls = Some(tls);
        self
    }

    /// `ws`, `wss` or `unix`.
    pub fn scheme(&self) -> &'static str {
        self.address.scheme()
    }

    /// The capability token sent on the upgrade.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }
}

impl PartialEq for RemoteEndpoint {
    fn eq(&self, other: &RemoteEndpoint) -> bool {
        self.url == other.url && self.token == other.token
    }
}

impl Eq for RemoteEndpoint {}

impl std::fmt::Debug for RemoteEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteEndpoint")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Why a remote app-server could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("{url}: {message}")]
    BadUrl { url: String, message: String },
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
    #[error("{url}: TLS failed: {source}")]
    Tls {
        url: String,
        #[source]
        source: std::io::Error,
    },
}

/// The line-framed halves a peer reads and writes, and the tasks that carry them.
pub struct Connection {
    pub reader: ReadHalf<DuplexStream>,
    pub writer: WriteHalf<DuplexStream>,
    pub tasks: TaskTracker,
}

/// Largest token file read (Codex's capability tokens are short).
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The remote members of `--app-server URL`, `--app-server-token-file FILE` and
/// `--app-server-ca FILE`: each URL checked; the token files paired in order with the `ws://`
/// and `wss://` members (one file serves them all; a `unix://` member needs none), each token
/// read from a regular file with a byte cap, trimmed, and not empty; the CA, when given,
/// trusted by every `wss://` member besides the system's roots. Errors name the flag and the
/// file.
pub fn remote_endpoints(
    urls: &[String],
    token_files: &[std::path::PathBuf],
    extra_ca: Option<&std::path::Path>,
) -> clawbridge_support::Result<Vec<RemoteEndpoint>> {
    let flag_error = |flag: &str, message: String| clawbridge_support::Error::InvalidArgument {
        flag: flag.to_string(),
        message,
    };
    let mut addresses = Vec::new();
    for url in urls {
        let address =
            SocketUrl::parse(url).map_err(|message| flag_error("--app-server", message))?;
        if addresses
            .iter()
            .any(|(known, _): &(&String, SocketUrl)| *known == url)
        {
            return Err(flag_error("--app-server", format!("{url} is given twice")));
        }
        addresses.push((url, address));
    }
    let networked = addresses
        .iter()
        .filter(|(_, address)| !matches!(address, SocketUrl::Unix(_)))
        .count();
    if networked == 0 && !token_files.is_empty() {
        return Err(flag_error(
            "--app-server-token-file",
            match urls.is_empty() {
                true => "given without an --app-server".into(),
                false => "a unix:// --app-server is sent no token (its socket file's permissions guard it)".into(),
            },
        ));
    }
    if networked > 0 && token_files.len() != networked && token_files.len() != 1 {
        return Err(flag_error(
            "--app-server-token-file",
            format!(
                "{} token files for {networked} ws:// or wss:// --app-server addresses (give one per address, in order, or one for all; a unix:// one needs none)",
                token_files.len(),
            ),
        ));
    }
    if extra_ca.is_some()
        && !addresses
            .iter()
            .any(|(_, address)| matches!(address, SocketUrl::Wss { .. }))
    {
        return Err(flag_error(
            "--app-server-ca",
            "given without a wss:// --app-server".into(),
        ));
    }
    let tls = match addresses
        .iter()
        .any(|(_, address)| matches!(address, SocketUrl::Wss { .. }))
    {
        true => Some(Arc::new(clawbridge_support::tls::client_config(
            extra_ca,
            "--app-server-ca",
        )?)),
        false => None,
    };
    let mut endpoints = Vec::new();
    let mut paired = 0;
    for (url, address) in addresses {
        let token = if matches!(address, SocketUrl::Unix(_)) {
            None
        } else {
            let file = &token_files[paired.min(token_files.len() - 1)];
            paired += 1;
            let bytes = clawbridge_support::fs::read_file_capped(file, MAX_TOKEN_FILE_BYTES)?;
            let token = String::from_utf8_lossy(&bytes).trim().to_string();
            if token.is_empty() || token.chars().any(char::is_control) {
                return Err(flag_error(
                    "--app-server-token-file",
                    format!("{}: no token in it (one line of text)", file.display()),
                ));
            }
            Some(token)
        };
        let mut endpoint = RemoteEndpoint::new(url, token)
            .map_err(|message| flag_error("--app-server", message))?;
        if let (SocketUrl::Wss { .. }, Some(tls)) = (&address, &tls) {
            endpoint = endpoint.with_tls(Arc::clone(tls));
        }
        endpoints.push(endpoint);
    }
    Ok(endpoints)
}

/// The TLS configuration of a `wss://` member given none (the system's roots only): made once
/// for the process, not at every reconnection (it reads the system's certificates).
fn system_roots() -> Option<Arc<rustls::ClientConfig>> {
    static SYSTEM: std::sync::OnceLock<Option<Arc<rustls::ClientConfig>>> =
        std::sync::OnceLock::new();
    SYSTEM
        .get_or_init(|| {
            clawbridge_support::tls::client_config(None, "--app-server-ca")
                .map(Arc::new)
                .map_err(|error| tracing::warn!("TLS for wss:// members: {error}"))
                .ok()
        })
        .clone()
}

/// A connected socket of any of the three kinds.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Stream for S {}

/// Open the member's socket: TCP, TLS over TCP, or a Unix socket.
async fn open(endpoint: &RemoteEndpoint) -> Result<Box<dyn Stream>, RemoteError> {
    let url = &endpoint.url;
    let connect_error = |source| RemoteError::Connect {
        url: url.clone(),
        source,
    };
    match &endpoint.address {
        SocketUrl::Ws { authority, .. } => {
            let socket = tokio::net::TcpStream::connect(authority)
                .await
                .map_err(connect_error)?;
            let _ = socket.set_nodelay(true);
            Ok(Box::new(socket))
        }
        SocketUrl::Wss {
            authority, host, ..
        } => {
            let socket = tokio::net::TcpStream::connect(authority)
                .await
                .map_err(connect_error)?;
            let _ = socket.set_nodelay(true);
            let name =
                clawbridge_support::tls::server_name(host).ok_or_else(|| RemoteError::BadUrl {
                    url: url.clone(),
                    message: format!("`{host}` is not a name a TLS certificate can carry"),
                })?;
            let config = match &endpoint.tls {
                Some(config) => Arc::clone(config),
                None => system_roots().ok_or_else(|| RemoteError::Handshake {
                    url: url.clone(),
                    message: "no TLS configuration could be made".into(),
                })?,
            };
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, socket)
                .await
                .map_err(|source| RemoteError::Tls {
                    url: url.clone(),
                    source,
                })?;
            Ok(Box::new(stream))
        }
        SocketUrl::Unix(path) => {
            let socket = tokio::net::UnixStream::connect(path)
                .await
                .map_err(connect_error)?;
            Ok(Box::new(socket))
        }
    }
}

/// Connect, upgrade with the token, and start carrying frames.
pub async fn connect(
    endpoint: &RemoteEndpoint,
    timeout: Duration,
) -> Result<Connection, RemoteError> {
    let url = endpoint.url.clone();
    let handshake = async {
        let socket = open(endpoint).await?;
        let mut client = soketto::handshake::Client::new(
            socket.compat(),
            endpoint.address.host_header(),
            endpoint.address.request_path(),
        );
        let bearer = endpoint
            .token
            .as_ref()
            .map(|token| format!("Bearer {token}"));
        let headers: Vec<soketto::handshake::client::Header<'_>> = bearer
            .iter()
            .map(|value| soketto::handshake::client::Header {
                name: "Authorization",
                value: value.as_bytes(),
            })
            .collect();
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
    fn a_unix_member_is_sent_no_token_and_a_networked_one_needs_one() {
        let unix = RemoteEndpoint::new("unix:///run/codex.sock", Some("t".into())).expect("unix");
        assert_eq!((unix.scheme(), unix.token()), ("unix", None));
        assert!(RemoteEndpoint::new("ws://127.0.0.1:1", None).is_err());
        assert_eq!(
            RemoteEndpoint::new("wss://h:1", Some("t".into()))
                .expect("wss")
                .scheme(),
            "wss"
        );
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
            remote_endpoints(&urls(2), std::slice::from_ref(&good), None).expect("one for all");
        assert_eq!(one_for_all.len(), 2);
        assert_eq!(one_for_all[1].token(), Some("token-0123456789"));
        assert!(
            !format!("{one_for_all:?}").contains("token-0123456789"),
            "Debug hides the token"
        );
        let error = |urls: &[String], files: &[std::path::PathBuf]| {
            remote_endpoints(urls, files, None)
                .expect_err("refused")
                .to_string()
        };
        assert!(error(&urls(3), &[good.clone(), good.clone()]).contains("2 token files for 3"));
        assert!(error(&urls(1), std::slice::from_ref(&empty)).contains("no token in it"));
        assert!(error(&urls(1), std::slice::from_ref(&control)).contains("no token in it"));
        assert!(error(&[], std::slice::from_ref(&good)).contains("without an --app-server"));
        assert!(error(&["http://h:1".into()], std::slice::from_ref(&good))
            .contains("not ws://HOST:PORT"));
        let twice = vec!["ws://h:1".to_string(), "ws://h:1".to_string()];
        assert!(error(&twice, std::slice::from_ref(&good)).contains("given twice"));
        assert!(error(&urls(1), &[dir.path().join("missing")]).contains("missing"));
        // A unix:// member takes no token: the files pair with the networked ones in order.
        let other = dir.path().join("other");
        std::fs::write(&other, "other-token\n").expect("other");
        let mixed = vec![
            "ws://h:1".to_string(),
            "unix:///run/codex.sock".to_string(),
            "wss://h:2".to_string(),
        ];
        let members =
            remote_endpoints(&mixed, &[good.clone(), other.clone()], None).expect("mixed");
        let tokens: Vec<Option<&str>> = members.iter().map(RemoteEndpoint::token).collect();
        assert_eq!(
            tokens,
            [Some("token-0123456789"), None, Some("other-token")]
        );
        assert!(error(&mixed[1..2], std::slice::from_ref(&good)).contains("sent no token"));
        assert!(error(&mixed, &[good.clone(), good.clone(), good.clone()])
            .contains("3 token files for 2"));
        let ca_without_wss = remote_endpoints(&urls(1), std::slice::from_ref(&good), Some(&good))
            .expect_err("refused")
            .to_string();
        assert!(
            ca_without_wss.contains("--app-server-ca")
                && ca_without_wss.contains("without a wss://")
        );
        let bad_ca = remote_endpoints(&mixed, &[good.clone(), other], Some(&empty))
            .expect_err("refused")
            .to_string();
        assert!(bad_ca.contains("no PEM certificate"), "{bad_ca}");
    }
}
