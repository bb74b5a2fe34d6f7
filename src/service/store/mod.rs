//! The fleet's durable state: an embedded SQLite database in the state dir.
//!
//! Why: a service that runs agents for weeks must come back from a restart, a crash or an
//! upgrade with everything an agent or an operator can see unchanged: who owns each thread and
//! on which account it lives, each account's tokens today, the `initialize` answer clients bind
//! their threads to. OpenClaw keeps its own bindings as SQLite rows; so does this.
//!
//! How: one database per service and state dir (`app-server.db`, `serve.db`), 0600, WAL, its
//! schema versioned (`PRAGMA user_version`, migrations applied in order at open; a database of a
//! newer clawbridge is refused, never rewritten). One process holds it at a time (an exclusive
//! lock file beside it, with the holder's pid). Writes go through a bounded queue to a thread
//! of their own that commits them in batches, so no forwarding path waits for the disk;
//! reads (start-up, a thread not in memory) share the one connection. Every failure to open is
//! an error that names the file and the fix: locked, corrupt, read-only, newer.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use rusqlite::{params, Connection, OptionalExtension};

use crate::support::sync::lock;

mod pg;
pub use pg::{is_postgres, shown as shown_store};

/// The schema this clawbridge writes; a database of a higher version is refused.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The migrations, in order: `MIGRATIONS[n]` takes a database from version `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE threads (
    id TEXT PRIMARY KEY,
    identity TEXT NOT NULL,
    member TEXT NOT NULL,
    owner TEXT NOT NULL,
    session_key TEXT,
    fingerprint TEXT,
    rollout TEXT,
    epoch INTEGER NOT NULL,
    gone INTEGER NOT NULL DEFAULT 0,
    last_used INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX threads_by_use ON threads(last_used);
CREATE UNIQUE INDEX threads_by_session ON threads(session_key) WHERE session_key IS NOT NULL;
CREATE TABLE usage (
    identity TEXT NOT NULL,
    day INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (identity, day)
) WITHOUT ROWID;
CREATE TABLE runtime (
    scope TEXT PRIMARY KEY,
    answer TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE members (
    name TEXT PRIMARY KEY,
    identity TEXT NOT NULL,
    codex_version TEXT,
    seen INTEGER NOT NULL
) WITHOUT ROWID;
"#,
    // The state dir whose local member holds a thread (see [`ThreadRecord::home`]).
    "ALTER TABLE threads ADD COLUMN home TEXT;",
];

/// Writes waiting for the writer at most; past it a writer waits (the disk is that far
/// behind), it never drops one.
pub(super) const QUEUE: usize = 16 * 1024;
/// Writes committed in one transaction at most.
pub(super) const BATCH: usize = 1024;

/// Why the state database cannot be used. Each names the file and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("{}: another clawbridge{} uses this state; stop it, or give this one another --state-dir", path.display(), holder.map(|pid| format!(" (pid {pid})")).unwrap_or_default())]
    Locked { path: PathBuf, holder: Option<u32> },
    #[error("{}: not a readable clawbridge state database ({message}); restore it from a backup, or move it aside to start with no record of the fleet's threads, owners and budgets", path.display())]
    Corrupt { path: PathBuf, message: String },
    #[error("{}: cannot be written ({message}); the state dir must be on a writable disk (or give --state-dir another folder)", path.display())]
    ReadOnly { path: PathBuf, message: String },
    #[error("{}: written by a newer clawbridge (schema {found}; this one knows up to {known}); run that clawbridge, or move the file aside", path.display())]
    Newer {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("{}: {message}", path.display())]
    Other { path: PathBuf, message: String },
}

impl StoreError {
    fn of(path: &Path, error: rusqlite::Error) -> StoreError {
        use rusqlite::ErrorCode;
        let path = path.to_path_buf();
        let message = error.to_string();
        match error.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
                StoreError::Locked { path, holder: None }
            }
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
                StoreError::Corrupt { path, message }
            }
            Some(
                ErrorCode::ReadOnly
                | ErrorCode::CannotOpen
                | ErrorCode::PermissionDenied
                | ErrorCode::DiskFull
                | ErrorCode::SystemIoFailure,
            ) => StoreError::ReadOnly { path, message },
            _ => StoreError::Other { path, message },
        }
    }
}

/// One thread as the directory keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadRecord {
    pub id: String,
    /// The account it runs under (`native`, `apiKey-1a2b...`).
    pub identity: String,
    /// The member it was last placed on.
    pub member: String,
    /// The client that opened it (`operator` for the operator's token).
    pub owner: String,
    /// `serve`'s session bound to it, if any.
    pub session_key: Option<String>,
    /// `serve`'s binding fingerprint, if any.
    pub fingerprint: Option<String>,
    /// Its rollout file, as Codex named it when the thread started.
    pub rollout: Option<String>,
    /// Rises each time the thread is placed on a member (a fencing token).
    pub epoch: u64,
    /// Its rollout is gone: a resume gets a clear error, never a new thread.
    pub gone: bool,
    /// Unix seconds of its last use.
    pub last_used: u64,
    /// The state dir ([`home_id`]) whose local member holds it (its rollout is in that state
    /// dir's Codex home); `None` on a remote member, which every endpoint reaches.
    pub home: Option<String>,
}

/// This machine's name as the ids of a shared store carry it (a state dir's, an endpoint's
/// lease holder): letters, digits, `-` and `.`, at most 64; `host` when it has none.
pub fn host_name() -> String {
    let name: String = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
        .take(64)
        .collect();
    if name.is_empty() {
        "host".into()
    } else {
        name
    }
}

/// The file in a state dir that names it among the endpoints of a shared store.
pub const HOME_ID_FILE: &str = "home-id";

/// This state dir's id among the endpoints of a shared store, made once and kept in
/// `<state-dir>/home-id`. Local members keep their threads in the state dir's Codex homes, so a
/// thread on a local member can be served only by an endpoint on the same state dir; its
/// record names the state dir by this id, and an endpoint on another state dir says so instead
/// of resuming it from nothing.
pub fn home_id(state: &Path) -> Result<String, StoreError> {
    let path = state.join(HOME_ID_FILE);
    let failed = |message: String| StoreError::Other {
        path: path.clone(),
        message,
    };
    match crate::support::fs::read_file_capped(&path, 256) {
        Ok(bytes) => {
            let id = String::from_utf8_lossy(&bytes).trim().to_string();
            let valid = !id.is_empty()
                && id.len() <= 128
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
            if valid {
                Ok(id)
            } else {
                Err(failed(
                    "not a state dir id (letters, digits, `-`, `.`, `_`); remove the file to make a new one, \
                     and the threads of this state dir's local app-servers are no longer found here"
                        .into(),
                ))
            }
        }
        Err(_) if !path.exists() => {
            let mut random = [0u8; 6];
            getrandom::fill(&mut random).map_err(|error| failed(error.to_string()))?;
            let id = format!("{}-{}", host_name(), crate::support::hex::encode(&random));
            crate::support::fs::create_private_dir(state)
                .map_err(|error| failed(error.to_string()))?;
            // Written whole beside it, then linked into place only if no other endpoint
            // starting on this state dir at the same moment made one first (then its id is
            // this one's too).
            let temp = state.join(format!("{HOME_ID_FILE}.{}.tmp", std::process::id()));
            crate::support::fs::write_private(&temp, format!("{id}\n").as_bytes())
                .map_err(|error| failed(format!("{error:#}")))?;
            let linked = std::fs::hard_link(&temp, &path);
            let _ = std::fs::remove_file(&temp);
            match linked {
                Ok(()) => Ok(id),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => home_id(state),
                Err(error) => Err(failed(error.to_string())),
            }
        }
        Err(error) => Err(failed(format!("{error:#}"))),
    }
}

/// What asking for a thread's lease gave (a store several endpoints share).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseTaken {
    /// This endpoint holds it, at `epoch` (a fencing token: it rises each time the thread passes
    /// to another endpoint).
    Held { epoch: u64 },
    /// Another endpoint holds it, for `left_ms` more.
    Busy {
        holder: String,
        epoch: u64,
        left_ms: u64,
    },
}

/// One member as the registry keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRecord {
    pub name: String,
    pub identity: String,
    pub codex_version: Option<String>,
    pub seen: u64,
}

/// A write for the writer thread.
pub(super) enum Write {
    Thread(ThreadRecord),
    /// A thread kept before its writer goes on: the commit's outcome is sent back.
    ThreadNow(ThreadRecord, SyncSender<Result<(), String>>),
    ForgetThread(String),
    Unbind(String),
    Usage {
        identity: String,
        day: u64,
        tokens: u64,
    },
    Runtime {
        scope: String,
        answer: String,
    },
    Member(MemberRecord),
    Flush(SyncSender<()>),
}

/// The open database: the embedded one (its writer and its one connection) or a PostgreSQL
/// one several endpoints share ([`pg`]).
pub struct Store {
    /// The file, or the PostgreSQL URL as shown (no password).
    path: PathBuf,
    backend: Backend,
    /// The embedded database is one process's at a time; a shared one is every endpoint's.
    _lock: Option<crate::service::lock::LockFile>,
}

enum Backend {
    Sqlite {
        connection: Arc<Mutex<Connection>>,
        writes: SyncSender<Write>,
        writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    },
    Postgres(pg::Postgres),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let connection = Connection::open(path).map_err(|error| StoreError::of(path, error))?;
    connection
        .busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|error| StoreError::of(path, error))?;
    // The first read of the file: a file that is not a database fails here.
    let mode: String = connection
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(|error| StoreError::of(path, error))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!("{}: journal mode {mode}, not WAL", path.display());
    }
    connection
        .execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
        .map_err(|error| StoreError::of(path, error))?;
    Ok(connection)
}

/// Bring the schema to [`SCHEMA_VERSION`], refusing a newer one.
fn migrate(path: &Path, connection: &mut Connection) -> Result<(), StoreError> {
    let found: i64 = connection
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|error| StoreError::of(path, error))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::Newer {
            path: path.to_path_buf(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    for (from, migration) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        let transaction = connection
            .transaction()
            .map_err(|error| StoreError::of(path, error))?;
        transaction
            .execute_batch(migration)
            .and_then(|()| transaction.pragma_update(None, "user_version", (from + 1) as i64))
            .and_then(|()| transaction.commit())
            .map_err(|error| StoreError::of(path, error))?;
        tracing::info!("{}: schema {} -> {}", path.display(), from, from + 1);
    }
    Ok(())
}

impl Store {
    /// Open (or create) the database at `path`: 0600, its folder private, locked for this
    /// process, migrated.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let folder = path.parent().unwrap_or(Path::new("."));
        crate::support::fs::create_private_dir(folder).map_err(|error| StoreError::ReadOnly {
            path: path.to_path_buf(),
            message: error.to_string(),
        })?;
        let lock_path = PathBuf::from(format!("{}.lock", path.display()));
        let lock =
            crate::service::lock::LockFile::take(&lock_path).map_err(|error| match error {
                crate::service::lock::LockError::Held(holder) => StoreError::Locked {
                    path: path.to_path_buf(),
                    holder,
                },
                crate::service::lock::LockError::Io(error) => StoreError::ReadOnly {
                    path: lock_path.clone(),
                    message: error.to_string(),
                },
            })?;
        if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink()) {
            return Err(StoreError::Other {
                path: path.to_path_buf(),
                message: "is a symbolic link; refusing to follow it".into(),
            });
        }
        let mut connection = open_connection(path)?;
        for file in [
            path.to_path_buf(),
            PathBuf::from(format!("{}-wal", path.display())),
        ] {
            if file.exists() {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600));
            }
        }
        migrate(path, &mut connection)?;
        let connection = Arc::new(Mutex::new(connection));
        let (writes, queue) = sync_channel(QUEUE);
        let writer = {
            let connection = Arc::clone(&connection);
            let file = path.to_path_buf();
            std::thread::Builder::new()
                .name("clawbridge-store".into())
                .spawn(move || write_loop(&file, &connection, &queue))
                .map_err(|error| StoreError::Other {
                    path: path.to_path_buf(),
                    message: format!("cannot start its writer: {error}"),
                })?
        };
        Ok(Store {
            path: path.to_path_buf(),
            backend: Backend::Sqlite {
                connection,
                writes,
                writer: Mutex::new(Some(writer)),
            },
            _lock: Some(lock),
        })
    }

    /// Open the PostgreSQL store at `url` (`postgres://...`; TLS as its `sslmode` asks, with the
    /// system's roots): connected, migrated. Its errors and [`Store::path`] show the URL
    /// without its password.
    pub fn open_postgres(url: &str) -> Result<Store, StoreError> {
        let backend = pg::Postgres::open(url)?;
        Ok(Store {
            path: PathBuf::from(backend.shown()),
            backend: Backend::Postgres(backend),
            _lock: None,
        })
    }

    /// `--store`'s value: a PostgreSQL URL, else the embedded database at `default`.
    pub fn open_at(store: Option<&str>, default: &Path) -> Result<Store, StoreError> {
        match store {
            Some(url) if is_postgres(url) => Store::open_postgres(url),
            Some(other) => Err(StoreError::Other {
                path: PathBuf::from("--store"),
                message: format!(
                    "{}: not a postgres:// URL (without --store the state is kept in {})",
                    shown_store(other),
                    default.display()
                ),
            }),
            None => Store::open(default),
        }
    }

    /// Whether the state is shared with other endpoints (PostgreSQL).
    pub fn is_shared(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    /// Where it lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write(&self, write: Write) {
        match &self.backend {
            Backend::Sqlite { writes, .. } => {
                if writes.send(write).is_err() {
                    tracing::error!(
                        "{}: the state writer is gone; a change was not kept",
                        self.path.display()
                    );
                }
            }
            Backend::Postgres(store) => store.write(write),
        }
    }

    /// Keep `thread` (inserted or replaced).
    pub fn put_thread(&self, thread: ThreadRecord) {
        self.write(Write::Thread(thread));
    }

    /// Keep `thread` now: returns once it is on disk, or why it could not be written (what
    /// must not be lost, such as `serve`'s session binding before its run goes on).
    pub fn put_thread_now(&self, thread: ThreadRecord) -> Result<(), StoreError> {
        let (done, wait) = sync_channel(1);
        self.write(Write::ThreadNow(thread, done));
        let outcome = wait
            .recv()
            .unwrap_or_else(|_| Err("the state writer is gone".into()));
        outcome.map_err(|message| StoreError::Other {
            path: self.path.clone(),
            message,
        })
    }

    /// Forget a thread (evicted by age).
    pub fn forget_thread(&self, id: &str) {
        self.write(Write::ForgetThread(id.to_string()));
    }

    /// `serve`'s session `key` is bound to no thread any more.
    pub fn unbind_session(&self, key: &str) {
        self.write(Write::Unbind(key.to_string()));
    }

    /// `identity` used `tokens` in all on `day` (days since the epoch, UTC).
    pub fn put_usage(&self, identity: &str, day: u64, tokens: u64) {
        self.write(Write::Usage {
            identity: identity.to_string(),
            day,
            tokens,
        });
    }

    /// Add `tokens` to what `identity` used on `day` in a store several endpoints share, at
    /// once (one statement, so endpoints counting together lose nothing): the account's total
    /// across every endpoint. `None` for the embedded store (one endpoint's own count is the
    /// figure; [`Store::put_usage`] keeps it) or when the database could not be reached.
    pub fn add_usage(&self, identity: &str, day: u64, tokens: u64) -> Option<u64> {
        if !self.is_shared() {
            return None;
        }
        let identity = identity.to_string();
        self.read_pg(move |client| {
            client.query_one(
                "INSERT INTO usage (identity, day, tokens) VALUES ($1, $2, $3)
                 ON CONFLICT (identity, day) DO UPDATE SET tokens = usage.tokens + EXCLUDED.tokens
                 RETURNING tokens",
                &[&identity, &(day as i64), &(tokens as i64)],
            )
        })
        .map(|row| row.get::<_, i64>(0).max(0) as u64)
    }

    /// What `identity` used on `day` across every endpoint of a shared store (`None` for the
    /// embedded store, or when the database could not be reached).
    pub fn usage_of(&self, identity: &str, day: u64) -> Option<u64> {
        if !self.is_shared() {
            return None;
        }
        let identity = identity.to_string();
        self.read_pg(move |client| {
            client.query_opt(
                "SELECT tokens FROM usage WHERE identity = $1 AND day = $2",
                &[&identity, &(day as i64)],
            )
        })
        .map(|row| row.map_or(0, |row| row.get::<_, i64>(0).max(0) as u64))
    }

    /// Take or keep `thread`'s lease for `holder` (a store several endpoints share; `None` for
    /// the embedded store, whose one endpoint needs none, or when the database could not be
    /// reached).
    pub fn take_lease(
        &self,
        thread: &str,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Option<LeaseTaken> {
        if !self.is_shared() {
            return None;
        }
        let (thread, holder) = (thread.to_string(), holder.to_string());
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.read_pg(move |client| pg::take_lease(client, &thread, &holder, ttl_ms))
    }

    /// Renew `holder`'s leases of `threads`: the ones still its own (`None`: the database could
    /// not be reached, or the store is the embedded one).
    pub fn renew_leases(
        &self,
        holder: &str,
        threads: Vec<String>,
        ttl: std::time::Duration,
    ) -> Option<Vec<String>> {
        if !self.is_shared() {
            return None;
        }
        let holder = holder.to_string();
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.read_pg(move |client| pg::renew_leases(client, &holder, &threads, ttl_ms))
    }

    /// Every endpoint holding a live lease, with how many.
    pub fn live_lease_holders(&self) -> Vec<(String, usize)> {
        if !self.is_shared() {
            return Vec::new();
        }
        self.read_pg(pg::live_lease_holders).unwrap_or_default()
    }

    /// The fleet's live leases, at most `limit`: (thread, holder, epoch, milliseconds left).
    pub fn live_leases(&self, limit: usize) -> Vec<(String, String, u64, i64)> {
        if !self.is_shared() {
            return Vec::new();
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read_pg(move |client| pg::live_leases(client, limit))
            .unwrap_or_default()
    }

    /// Let `holder`'s leases of `threads` go.
    pub fn release_leases(&self, holder: &str, threads: Vec<String>) {
        if !self.is_shared() {
            return;
        }
        let holder = holder.to_string();
        let _ = self.read_pg(move |client| pg::release_leases(client, &holder, &threads));
    }

    /// Pin the `initialize` answer of `scope`.
    pub fn put_runtime(&self, scope: &str, answer: &str) {
        self.write(Write::Runtime {
            scope: scope.to_string(),
            answer: answer.to_string(),
        });
    }

    pub fn put_member(&self, member: MemberRecord) {
        self.write(Write::Member(member));
    }

    /// Wait until every write queued before now is on disk.
    pub fn flush(&self) {
        let (done, wait) = sync_channel(1);
        self.write(Write::Flush(done));
        let _ = wait.recv();
    }

    /// Flush and stop the writer (the database stays consistent without it: a kill -9 loses
    /// at most the writes still queued).
    pub fn close(&self) {
        self.flush();
        if let Backend::Sqlite { writer, .. } = &self.backend {
            if let Some(writer) = lock(writer).take() {
                // The writer ends when every sender is gone; this one stays until drop, so it is
                // left to finish on its own (it holds no lock between batches).
                drop(writer);
            }
        }
    }

    /// A read of the embedded database (`None` for a PostgreSQL store: each reader asks
    /// [`Store::read_pg`] then).
    fn read<T>(&self, query: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Option<T> {
        let Backend::Sqlite { connection, .. } = &self.backend else {
            return None;
        };
        let connection = lock(connection);
        match query(&connection) {
            Ok(value) => Some(value),
            Err(error) => {
                tracing::warn!("{}: {error}", self.path.display());
                None
            }
        }
    }

    /// A read of the PostgreSQL store (`None` for the embedded one, or when it failed).
    fn read_pg<T: Send + 'static>(
        &self,
        query: impl FnOnce(&mut ::postgres::Client) -> Result<T, ::postgres::Error> + Send + 'static,
    ) -> Option<T> {
        match &self.backend {
            Backend::Postgres(store) => store.read(query),
            Backend::Sqlite { .. } => None,
        }
    }

    /// The thread whose `column` (`id`, `session_key`) is `value`, in PostgreSQL.
    fn pg_thread_where(&self, column: &'static str, value: &str) -> Option<ThreadRecord> {
        let value = value.to_string();
        self.read_pg(move |client| {
            client.query_opt(
                &format!(
                    "SELECT {} FROM threads WHERE {column} = $1",
                    pg::THREAD_COLUMNS
                ),
                &[&value],
            )
        })
        .flatten()
        .map(|row| pg::thread_of_row(&row))
    }

    /// A thread by id.
    pub fn thread(&self, id: &str) -> Option<ThreadRecord> {
        if self.is_shared() {
            return self.pg_thread_where("id", id);
        }
        self.read(|connection| {
            connection
                .query_row(
                    &format!("SELECT {THREAD_COLUMNS} FROM threads WHERE id = ?1"),
                    [id],
                    thread_of_row,
                )
                .optional()
        })
        .flatten()
    }

    /// The thread bound to `serve`'s session `key`.
    pub fn session(&self, key: &str) -> Option<ThreadRecord> {
        if self.is_shared() {
            return self.pg_thread_where("session_key", key);
        }
        self.read(|connection| {
            connection
                .query_row(
                    &format!("SELECT {THREAD_COLUMNS} FROM threads WHERE session_key = ?1"),
                    [key],
                    thread_of_row,
                )
                .optional()
        })
        .flatten()
    }

    /// The `limit` threads used last, newest first (what the directory holds in memory at
    /// start).
    pub fn recent_threads(&self, limit: usize) -> Vec<ThreadRecord> {
        if self.is_shared() {
            return self
                .read_pg(move |client| {
                    client.query(
                        &format!(
                            "SELECT {} FROM threads ORDER BY last_used DESC LIMIT $1",
                            pg::THREAD_COLUMNS
                        ),
                        &[&(limit as i64)],
                    )
                })
                .unwrap_or_default()
                .iter()
                .map(pg::thread_of_row)
                .collect();
        }
        self.read(|connection| {
            let mut statement = connection.prepare(&format!(
                "SELECT {THREAD_COLUMNS} FROM threads ORDER BY last_used DESC LIMIT ?1"
            ))?;
            let rows = statement.query_map([limit as i64], thread_of_row)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })
        .unwrap_or_default()
    }

    /// Every session binding of `serve` (session key, thread).
    pub fn sessions(&self) -> Vec<ThreadRecord> {
        if self.is_shared() {
            return self
                .read_pg(|client| {
                    client.query(
                        &format!(
                            "SELECT {} FROM threads WHERE session_key IS NOT NULL",
                            pg::THREAD_COLUMNS
                        ),
                        &[],
                    )
                })
                .unwrap_or_default()
                .iter()
                .map(pg::thread_of_row)
                .collect();
        }
        self.read(|connection| {
            let mut statement = connection.prepare(&format!(
                "SELECT {THREAD_COLUMNS} FROM threads WHERE session_key IS NOT NULL"
            ))?;
            let rows = statement.query_map([], thread_of_row)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })
        .unwrap_or_default()
    }

    /// Threads kept.
    pub fn thread_count(&self) -> u64 {
        if self.is_shared() {
            return self
                .read_pg(|client| client.query_one("SELECT COUNT(*) FROM threads", &[]))
                .map_or(0, |row| row.get::<_, i64>(0).max(0) as u64);
        }
        self.read(|connection| {
            connection.query_row("SELECT COUNT(*) FROM threads", [], |row| {
                row.get::<_, i64>(0)
            })
        })
        .map_or(0, |count| count.max(0) as u64)
    }

    /// Every account's tokens on `day`.
    pub fn usage_on(&self, day: u64) -> Vec<(String, u64)> {
        if self.is_shared() {
            return self
                .read_pg(move |client| {
                    client.query(
                        "SELECT identity, tokens FROM usage WHERE day = $1",
                        &[&(day as i64)],
                    )
                })
                .unwrap_or_default()
                .iter()
                .map(|row| (row.get(0), row.get::<_, i64>(1).max(0) as u64))
                .collect();
        }
        self.read(|connection| {
            let mut statement =
                connection.prepare("SELECT identity, tokens FROM usage WHERE day = ?1")?;
            let rows = statement.query_map([day as i64], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, i64>(1)?.max(0) as u64,
                ))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })
        .unwrap_or_default()
    }

    /// Pin `answer` under `scope` unless an answer is pinned there already (another endpoint of
    /// a shared store pinned first): the answer pinned, whichever it is. `None`: the database
    /// did not answer (the caller keeps its own for now).
    pub fn pin_runtime(&self, scope: &str, answer: &str) -> Option<String> {
        if !self.is_shared() {
            if let Some(pinned) = self.runtime(scope) {
                return Some(pinned);
            }
            self.put_runtime(scope, answer);
            return Some(answer.to_string());
        }
        let (scope, answer) = (scope.to_string(), answer.to_string());
        self.read_pg(move |client| {
            client.execute(
                "INSERT INTO runtime (scope, answer) VALUES ($1, $2) ON CONFLICT (scope) DO NOTHING",
                &[&scope, &answer],
            )?;
            client
                .query_one("SELECT answer FROM runtime WHERE scope = $1", &[&scope])
                .map(|row| row.get(0))
        })
    }

    /// The pinned `initialize` answer of `scope`.
    pub fn runtime(&self, scope: &str) -> Option<String> {
        if self.is_shared() {
            let scope = scope.to_string();
            return self
                .read_pg(move |client| {
                    client.query_opt("SELECT answer FROM runtime WHERE scope = $1", &[&scope])
                })
                .flatten()
                .map(|row| row.get(0));
        }
        self.read(|connection| {
            connection
                .query_row(
                    "SELECT answer FROM runtime WHERE scope = ?1",
                    [scope],
                    |row| row.get(0),
                )
                .optional()
        })
        .flatten()
    }

    /// Every member the fleet has run.
    pub fn members(&self) -> Vec<MemberRecord> {
        if self.is_shared() {
            return self
                .read_pg(|client| {
                    client.query(
                        "SELECT name, identity, codex_version, seen FROM members ORDER BY name",
                        &[],
                    )
                })
                .unwrap_or_default()
                .iter()
                .map(pg::member_of_row)
                .collect();
        }
        self.read(|connection| {
            let mut statement = connection
                .prepare("SELECT name, identity, codex_version, seen FROM members ORDER BY name")?;
            let rows = statement.query_map([], |row| {
                Ok(MemberRecord {
                    name: row.get(0)?,
                    identity: row.get(1)?,
                    codex_version: row.get(2)?,
                    seen: row.get::<_, i64>(3)?.max(0) as u64,
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })
        .unwrap_or_default()
    }

    /// The accounts that have a thread whose conversation is still there (not `gone`).
    pub fn identities_with_threads(&self) -> std::collections::HashSet<String> {
        if self.is_shared() {
            return self
                .read_pg(|client| {
                    client.query("SELECT DISTINCT identity FROM threads WHERE NOT gone", &[])
                })
                .unwrap_or_default()
                .iter()
                .map(|row| row.get(0))
                .collect();
        }
        self.read(|connection| {
            let mut statement =
                connection.prepare("SELECT DISTINCT identity FROM threads WHERE gone = 0")?;
            let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
            rows.collect::<rusqlite::Result<std::collections::HashSet<_>>>()
        })
        .unwrap_or_default()
    }

    /// Forget threads unused since `before` (unix seconds), at most `limit`: how many.
    pub fn prune_threads(&self, before: u64, limit: usize) -> usize {
        if self.is_shared() {
            return self
                .read_pg(move |client| {
                    client.execute(
                        "DELETE FROM threads WHERE id IN (SELECT id FROM threads WHERE last_used < $1 AND session_key IS NULL ORDER BY last_used LIMIT $2)",
                        &[&(before as i64), &(limit as i64)],
                    )
                })
                .map_or(0, |count| count as usize);
        }
        self.read(|connection| {
            connection.execute(
                "DELETE FROM threads WHERE id IN (SELECT id FROM threads WHERE last_used < ?1 AND session_key IS NULL ORDER BY last_used LIMIT ?2)",
                params![before as i64, limit as i64],
            )
        })
        .unwrap_or(0)
    }
}

/// What `doctor` says of a state database: its schema and how many threads it keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    pub schema: i64,
    pub threads: u64,
}

/// Look at the database at `path` without taking it (a running service holds it): read-only,
/// its schema checked against this clawbridge and its pages checked (`PRAGMA quick_check`).
pub fn inspect(path: &Path) -> Result<Summary, StoreError> {
    let connection = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|error| StoreError::of(path, error))?;
    let _ = connection.busy_timeout(std::time::Duration::from_secs(2));
    let schema: i64 = connection
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|error| StoreError::of(path, error))?;
    if schema > SCHEMA_VERSION {
        return Err(StoreError::Newer {
            path: path.to_path_buf(),
            found: schema,
            known: SCHEMA_VERSION,
        });
    }
    let check: String = connection
        .query_row("PRAGMA quick_check", [], |row| row.get(0))
        .map_err(|error| StoreError::of(path, error))?;
    if check != "ok" {
        return Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            message: check,
        });
    }
    let threads = if schema >= 1 {
        connection
            .query_row("SELECT COUNT(*) FROM threads", [], |row| {
                row.get::<_, i64>(0)
            })
            .map_err(|error| StoreError::of(path, error))?
            .max(0) as u64
    } else {
        0
    };
    Ok(Summary { schema, threads })
}

impl Drop for Store {
    fn drop(&mut self) {
        self.flush();
    }
}

const THREAD_COLUMNS: &str =
    "id, identity, member, owner, session_key, fingerprint, rollout, epoch, gone, last_used, home";

fn thread_of_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ThreadRecord> {
    Ok(ThreadRecord {
        id: row.get(0)?,
        identity: row.get(1)?,
        member: row.get(2)?,
        owner: row.get(3)?,
        session_key: row.get(4)?,
        fingerprint: row.get(5)?,
        rollout: row.get(6)?,
        epoch: row.get::<_, i64>(7)?.max(0) as u64,
        gone: row.get::<_, i64>(8)? != 0,
        last_used: row.get::<_, i64>(9)?.max(0) as u64,
        home: row.get(10)?,
    })
}

/// The writer: each batch of queued writes in one transaction, until every sender is gone.
fn write_loop(path: &Path, connection: &Mutex<Connection>, queue: &Receiver<Write>) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match queue.try_recv() {
                Ok(write) => batch.push(write),
                Err(_) => break,
            }
        }
        let mut flushed = Vec::new();
        let mut acks = Vec::new();
        let mut connection = lock(connection);
        let committed = (|| -> rusqlite::Result<()> {
            let transaction = connection.transaction()?;
            for write in batch {
                let write = match write {
                    Write::ThreadNow(thread, ack) => {
                        acks.push(ack);
                        Write::Thread(thread)
                    }
                    other => other,
                };
                apply(&transaction, write, &mut flushed)?;
            }
            transaction.commit()
        })();
        drop(connection);
        let outcome = committed.map_err(|error| error.to_string());
        if let Err(error) = &outcome {
            tracing::error!("{}: changes not kept: {error}", path.display());
        }
        for done in flushed {
            let _ = done.send(());
        }
        for ack in acks {
            let _ = ack.send(outcome.clone());
        }
    }
}

fn apply(
    transaction: &rusqlite::Transaction<'_>,
    write: Write,
    flushed: &mut Vec<SyncSender<()>>,
) -> rusqlite::Result<()> {
    match write {
        Write::Thread(thread) => {
            // A session moves to its new thread: the old one is no longer bound to it.
            if let Some(key) = &thread.session_key {
                transaction.execute(
                    "UPDATE threads SET session_key = NULL WHERE session_key = ?1 AND id <> ?2",
                    params![key, thread.id],
                )?;
            }
            transaction.execute(
                &format!(
                    "INSERT OR REPLACE INTO threads ({THREAD_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
                ),
                params![
                    thread.id,
                    thread.identity,
                    thread.member,
                    thread.owner,
                    thread.session_key,
                    thread.fingerprint,
                    thread.rollout,
                    thread.epoch as i64,
                    i64::from(thread.gone),
                    thread.last_used as i64,
                    thread.home,
                ],
            )?;
        }
        Write::ForgetThread(id) => {
            transaction.execute("DELETE FROM threads WHERE id = ?1", [id])?;
        }
        Write::Unbind(key) => {
            transaction.execute(
                "UPDATE threads SET session_key = NULL WHERE session_key = ?1",
                [key],
            )?;
        }
        Write::Usage {
            identity,
            day,
            tokens,
        } => {
            transaction.execute(
                "INSERT OR REPLACE INTO usage (identity, day, tokens) VALUES (?1, ?2, ?3)",
                params![identity, day as i64, tokens as i64],
            )?;
        }
        Write::Runtime { scope, answer } => {
            transaction.execute(
                "INSERT OR REPLACE INTO runtime (scope, answer) VALUES (?1, ?2)",
                params![scope, answer],
            )?;
        }
        Write::Member(member) => {
            transaction.execute(
                "INSERT OR REPLACE INTO members (name, identity, codex_version, seen) VALUES (?1, ?2, ?3, ?4)",
                params![member.name, member.identity, member.codex_version, member.seen as i64],
            )?;
        }
        Write::Flush(done) => flushed.push(done),
        // Turned into `Thread` by the writer before it is applied.
        Write::ThreadNow(thread, _) => {
            return apply(transaction, Write::Thread(thread), flushed);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(id: &str, owner: &str) -> ThreadRecord {
        ThreadRecord {
            id: id.into(),
            identity: "apiKey-1".into(),
            member: "local-0".into(),
            owner: owner.into(),
            session_key: None,
            fingerprint: None,
            rollout: None,
            epoch: 1,
            gone: false,
            last_used: 100,
            home: None,
        }
    }

    #[test]
    fn what_is_written_is_read_back_after_a_reopen() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("state").join("app-server.db");
        {
            let store = Store::open(&path).expect("open");
            store.put_thread(ThreadRecord {
                home: Some("host-0a1b2c".into()),
                ..thread("t1", "alice")
            });
            store.put_thread(ThreadRecord {
                session_key: Some("s".into()),
                ..thread("t2", "bob")
            });
            store.put_usage("apiKey-1", 20_000, 45);
            store.put_runtime("endpoint", r#"{"userAgent":"x"}"#);
            store.flush();
        }
        let store = Store::open(&path).expect("reopen");
        assert_eq!(
            store.thread("t1"),
            Some(ThreadRecord {
                home: Some("host-0a1b2c".into()),
                ..thread("t1", "alice")
            })
        );
        assert_eq!(
            store.session("s").map(|thread| thread.id),
            Some("t2".into())
        );
        assert_eq!(store.usage_on(20_000), vec![("apiKey-1".to_string(), 45)]);
        assert_eq!(
            store.runtime("endpoint").as_deref(),
            Some(r#"{"userAgent":"x"}"#)
        );
        assert_eq!(store.thread_count(), 2);
        // Rebinding a session moves it.
        store.put_thread(ThreadRecord {
            session_key: Some("s".into()),
            ..thread("t3", "bob")
        });
        store.flush();
        assert_eq!(
            store.session("s").map(|thread| thread.id),
            Some("t3".into())
        );
        assert_eq!(
            store.thread("t2").and_then(|thread| thread.session_key),
            None
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_database_of_the_first_schema_is_migrated_and_keeps_its_threads() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("app-server.db");
        {
            let mut connection = Connection::open(&path).expect("open");
            let transaction = connection.transaction().expect("transaction");
            transaction.execute_batch(MIGRATIONS[0]).expect("schema 1");
            transaction
                .execute(
                    "INSERT INTO threads (id, identity, member, owner, epoch, last_used) VALUES ('t1', 'apiKey-1', 'local-0', 'alice', 1, 100)",
                    [],
                )
                .expect("row");
            transaction
                .pragma_update(None, "user_version", 1)
                .expect("version");
            transaction.commit().expect("commit");
        }
        let store = Store::open(&path).expect("migrated");
        assert_eq!(store.thread("t1"), Some(thread("t1", "alice")));
        let version: i64 = store
            .read(|connection| connection.query_row("PRAGMA user_version", [], |row| row.get(0)))
            .expect("version");
        assert_eq!(version, SCHEMA_VERSION);
        const { assert!(SCHEMA_VERSION >= 2) };
    }

    #[test]
    fn a_state_dir_keeps_one_id_and_a_broken_one_is_named() {
        let dir = tempfile::tempdir().expect("dir");
        let first = home_id(dir.path()).expect("made");
        assert_eq!(home_id(dir.path()).expect("read"), first);
        let other = tempfile::tempdir().expect("dir");
        assert_ne!(home_id(other.path()).expect("made"), first);
        std::fs::write(dir.path().join(HOME_ID_FILE), "a b\n").expect("write");
        let error = home_id(dir.path()).expect_err("refused").to_string();
        assert!(error.contains("home-id"), "{error}");
    }

    #[test]
    fn doctor_reads_a_held_database_and_names_a_broken_one() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("app-server.db");
        let store = Store::open(&path).expect("open");
        store.put_thread(thread("t1", "alice"));
        store.flush();
        // Held by a running service: read all the same.
        assert_eq!(
            inspect(&path).expect("inspect"),
            Summary {
                schema: SCHEMA_VERSION,
                threads: 1
            }
        );
        drop(store);
        let corrupt = dir.path().join("serve.db");
        std::fs::write(&corrupt, vec![b'x'; 8192]).expect("write");
        let error = inspect(&corrupt).expect_err("corrupt").to_string();
        assert!(error.contains("serve.db"), "{error}");
    }

    #[test]
    fn a_held_corrupt_or_newer_database_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("app-server.db");
        let held = Store::open(&path).expect("open");
        let error = Store::open(&path).expect_err("held").to_string();
        assert!(
            error.contains("app-server.db")
                && error.contains(&format!("pid {}", std::process::id())),
            "{error}"
        );
        drop(held);
        // Newer.
        {
            let connection = Connection::open(&path).expect("raw");
            connection
                .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
                .expect("bump");
        }
        let error = Store::open(&path).expect_err("newer").to_string();
        assert!(error.contains("newer clawbridge"), "{error}");
        // Corrupt.
        let corrupt = dir.path().join("corrupt.db");
        std::fs::write(&corrupt, vec![b'x'; 8192]).expect("write");
        let error = Store::open(&corrupt).expect_err("corrupt").to_string();
        assert!(
            error.contains("corrupt.db") && error.contains("not a readable"),
            "{error}"
        );
    }
}
