//! The real services the replica tests and the replicas bench start on loopback or a Unix
//! socket: Debian's PostgreSQL and HAProxy, as `scripts/test` installs them. Self-contained (the
//! bench includes this file too).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Wait until `condition` holds, at most `limit` (then panic naming `what`).
fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !condition() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A real PostgreSQL server for a test (Debian's, as `scripts/test` installs it): a cluster made
/// by `initdb` in a temporary folder, listening only on a Unix socket in that folder, run as
/// `nobody` when the tests run as root (PostgreSQL refuses root), stopped on drop.
pub struct Postgres {
    child: std::process::Child,
    socket_dir: PathBuf,
    _dir: tempfile::TempDir,
}

/// The folder of Debian's PostgreSQL binaries: `CLAWBRIDGE_POSTGRES_BIN`, else the newest
/// `/usr/lib/postgresql/N/bin`.
pub fn postgres_bin() -> PathBuf {
    if let Some(dir) = std::env::var_os("CLAWBRIDGE_POSTGRES_BIN") {
        return PathBuf::from(dir);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    found.sort();
    found
        .pop()
        .expect("PostgreSQL: scripts/test installs it (or set CLAWBRIDGE_POSTGRES_BIN)")
}

impl Postgres {
    pub fn start() -> Postgres {
        use std::os::unix::fs::PermissionsExt;
        let bin = postgres_bin();
        let dir = tempfile::tempdir().expect("dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("mode");
        let data = dir.path().join("data");
        let socket_dir = dir.path().join("socket");
        std::fs::create_dir_all(&socket_dir).expect("socket dir");
        std::fs::set_permissions(&socket_dir, std::fs::Permissions::from_mode(0o777))
            .expect("mode");
        let root = rustix::process::geteuid().is_root();
        // As root the server runs as `nobody` (65534), which must own the cluster's folder.
        let as_server = |program: &Path| {
            let mut command = if root {
                let mut command = std::process::Command::new("setpriv");
                command
                    .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                    .arg(program);
                command
            } else {
                std::process::Command::new(program)
            };
            command.env_remove("PGDATA").env("LC_ALL", "C");
            command
        };
        if root {
            std::fs::create_dir_all(&data).expect("data");
            std::os::unix::fs::chown(&data, Some(65534), Some(65534)).expect("chown");
        }
        let initdb = as_server(&bin.join("initdb"))
            .args([
                "--auth=trust",
                "--username=clawbridge",
                "--no-sync",
                "-E",
                "UTF8",
                "-D",
            ])
            .arg(&data)
            .output()
            .expect("initdb");
        assert!(initdb.status.success(), "initdb: {initdb:?}");
        let child = as_server(&bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(&socket_dir)
            .args(["-c", "listen_addresses=", "-c", "fsync=off"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("postgres");
        // Ready, not only listening (a server starting up refuses connections on its socket).
        wait_until("PostgreSQL ready", Duration::from_secs(30), || {
            std::process::Command::new(bin.join("pg_isready"))
                .arg("-q")
                .arg("-h")
                .arg(&socket_dir)
                .status()
                .is_ok_and(|status| status.success())
        });
        Postgres {
            child,
            socket_dir,
            _dir: dir,
        }
    }

    /// Pause the server (SIGSTOP) or let it go on (SIGCONT), its backends with it: a database
    /// that stops answering.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let _ = std::process::Command::new("pkill")
            .args([signal, "-P", &pid])
            .status();
        let _ = std::process::Command::new("kill")
            .args([signal, &pid])
            .status();
    }

    /// The store URL of its `postgres` database, with a password (the server trusts the
    /// socket, so it is only there to be hidden).
    pub fn url(&self) -> String {
        let socket = self.socket_dir.display().to_string().replace('/', "%2F");
        format!("postgresql://clawbridge:pg-secret-4417@{socket}/postgres")
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Debian's HAProxy (as `scripts/test` installs it) in front of `backends`, TCP mode, every
/// connection to the first backend that is up (checked every 200 ms): its address.
pub struct Haproxy {
    child: std::process::Child,
    pub addr: String,
    _dir: tempfile::TempDir,
}

impl Haproxy {
    pub fn start_on(port: u16, backends: &[&str]) -> Haproxy {
        Haproxy::start_balanced(port, backends, "first")
    }

    /// [`Haproxy::start_on`] with another `balance` (`roundrobin`: connections spread).
    pub fn start_balanced(port: u16, backends: &[&str], balance: &str) -> Haproxy {
        // `CLAWBRIDGE_HAPROXY_BIN`, else scripts/install-haproxy's, else the system's.
        let installed = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/haproxy/haproxy");
        let bin = std::env::var_os("CLAWBRIDGE_HAPROXY_BIN")
            .map(PathBuf::from)
            .or_else(|| installed.is_file().then_some(installed))
            .unwrap_or_else(|| PathBuf::from("haproxy"));
        let dir = tempfile::tempdir().expect("dir");
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(index, addr)| {
                format!("  server endpoint-{index} {addr} check inter 200ms fall 1 rise 2\n")
            })
            .collect();
        let config = dir.path().join("haproxy.cfg");
        std::fs::write(
            &config,
            format!(
                "global\n  maxconn 256\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 120s\n  timeout server 120s\nfrontend agents\n  bind 127.0.0.1:{port}\n  default_backend endpoints\nbackend endpoints\n  balance {balance}\n{servers}"
            ),
        )
        .expect("config");
        let child = std::process::Command::new(&bin)
            .arg("-db")
            .arg("-f")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("{}: {error} (scripts/install-haproxy)", bin.display()));
        wait_until("HAProxy's listener", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Haproxy {
            child,
            addr: format!("127.0.0.1:{port}"),
            _dir: dir,
        }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
