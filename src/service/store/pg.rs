//! The fleet's state in PostgreSQL (`--store postgres://...`), for several endpoints that serve
//! one fleet: the same tables as the embedded database, shared by every endpoint that names the
//! same database.
//!
//! Why a thread of its own: the `postgres` client drives its own small runtime, which must never
//! run inside one of the service's tokio workers; so one thread owns the connection and takes
//! jobs from a bounded queue: writes (committed in batches, one transaction each, as the
//! embedded writer does) and reads (a closure run on the connection, its answer sent back).
//! A connection that drops is made again at the next job (a failed write is logged with its
//! cause, as a full disk is for the embedded database).
//!
//! The connection string may carry a password: it is kept only in the connection's own
//! configuration; everything that names the store shows [`shown`] (the password replaced).
//! Schema: versioned in `clawbridge_schema`, migrated at open under an advisory lock (two
//! endpoints starting together migrate once); a database of a newer clawbridge is refused.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::Duration;

use super::{MemberRecord, StoreError, ThreadRecord, Write, BATCH, QUEUE};

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
    epoch BIGINT NOT NULL,
    gone BOOLEAN NOT NULL DEFAULT FALSE,
    last_used BIGINT NOT NULL
);
CREATE INDEX threads_by_use ON threads(last_used);
CREATE UNIQUE INDEX threads_by_session ON threads(session_key) WHERE session_key IS NOT NULL;
CREATE TABLE usage (
    identity TEXT NOT NULL,
    day BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    PRIMARY KEY (identity, day)
);
CREATE TABLE runtime (
    scope TEXT PRIMARY KEY,
    answer TEXT NOT NULL
);
CREATE TABLE members (
    name TEXT PRIMARY KEY,
    identity TEXT NOT NULL,
    codex_version TEXT,
    seen BIGINT NOT NULL
);
"#,
    r#"
CREATE TABLE leases (
    thread TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);
"#,
    // The state dir whose local member holds a thread (see [`ThreadRecord::home`]).
    "ALTER TABLE threads ADD COLUMN home TEXT;",
];

/// The schema this clawbridge writes in PostgreSQL (its own numbering: the shared store has
/// tables the embedded one does not need, such as the leases).
const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The database's own clock, in Unix milliseconds: every endpoint's leases are timed by it, so
/// no two endpoints' clocks need agree.
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// The advisory lock the migrations run under (any fixed number: "clawbridge" in ASCII).
const MIGRATION_LOCK: i64 = 0x636c_6177_6272_6964;
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a read waits for the database's answer: past it the reader gets none (logged) and
/// goes on, whatever the database is doing (paused, partitioned, overloaded). The server is also
/// asked to end a statement after it, and a TCP connection gives up on a silent peer after it.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// A read: run on the connection, its answer sent back by the closure itself.
type Read = Box<dyn FnOnce(&mut postgres::Client) + Send>;

/// A job for the connection's thread.
pub(super) enum Job {
    Write(Box<Write>),
    Read(Read),
}

/// The open store: its queue and its thread.
pub(super) struct Postgres {
    jobs: SyncSender<Job>,
    /// The URL as shown (no password).
    shown: String,
}

/// `url` with its password replaced, for every message and status that names the store.
pub fn shown(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("<redacted>"));
            }
            // A password may also come as a query parameter (`?password=...`).
            let pairs: Vec<(String, String)> = parsed
                .query_pairs()
                .map(|(key, value)| {
                    let value = if key.eq_ignore_ascii_case("password") {
                        "<redacted>".to_string()
                    } else {
                        value.into_owned()
                    };
                    (key.into_owned(), value)
                })
                .collect();
            if !pairs.is_empty() {
                parsed.query_pairs_mut().clear().extend_pairs(pairs);
            }
            parsed.to_string()
        }
        Err(_) => "postgres://<unreadable URL>".to_string(),
    }
}

/// Whether `url` names a PostgreSQL store.
pub fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

impl Postgres {
    /// Connect (on the store's own thread), migrate, and start taking jobs. Errors name the
    /// store as shown and the cause.
    pub(super) fn open(url: &str) -> Result<Postgres, StoreError> {
        let shown = shown(url);
        let failed = |message: String| StoreError::Other {
            path: shown.clone().into(),
            message,
        };
        let mut config: postgres::Config = url
            .parse()
            .map_err(|error| failed(format!("not a PostgreSQL URL: {error}")))?;
        config.connect_timeout(CONNECT_TIMEOUT);
        config.tcp_user_timeout(ANSWER_TIMEOUT);
        if config.get_options().is_none() {
            config.options(&format!(
                "-c statement_timeout={}",
                ANSWER_TIMEOUT.as_millis()
            ));
        }
        if config.get_application_name().is_none() {
            config.application_name("clawbridge");
        }
        // A Unix socket is the machine's own: TLS is for a database across the network.
        let local = config
            .get_hosts()
            .iter()
            .all(|host| matches!(host, postgres::config::Host::Unix(_)));
        let tls = match local {
            true => None,
            false => Some(tokio_postgres_rustls::MakeRustlsConnect::new(
                crate::support::tls::client_config(None, "--store")
                    .map_err(|error| failed(error.to_string()))?,
            )),
        };
        let (jobs, queue) = sync_channel(QUEUE);
        let (opened, outcome) = sync_channel(1);
        let name = shown.clone();
        std::thread::Builder::new()
            .name("clawbridge-store-pg".into())
            .spawn(move || {
                let client = connect(&config, tls.as_ref())
                    .map_err(|error| format!("cannot connect: {error}"))
                    .and_then(|mut client| migrate(&mut client).map(|()| client));
                match client {
                    Ok(client) => {
                        let _ = opened.send(Ok(()));
                        job_loop(&name, client, &config, tls.as_ref(), &queue);
                    }
                    Err(message) => {
                        let _ = opened.send(Err(message));
                    }
                }
            })
            .map_err(|error| failed(format!("cannot start its thread: {error}")))?;
        match outcome.recv() {
            Ok(Ok(())) => Ok(Postgres { jobs, shown }),
            Ok(Err(message)) if message.starts_with("newer:") => Err(StoreError::Newer {
                path: shown.into(),
                found: message
                    .trim_start_matches("newer:")
                    .parse()
                    .unwrap_or_default(),
                known: SCHEMA_VERSION,
            }),
            Ok(Err(message)) => Err(failed(message)),
            Err(_) => Err(failed("its thread ended".into())),
        }
    }

    pub(super) fn shown(&self) -> &str {
        &self.shown
    }

    pub(super) fn write(&self, write: Write) {
        if self.jobs.send(Job::Write(Box::new(write))).is_err() {
            tracing::error!(
                "{}: the state writer is gone; a change was not kept",
                self.shown
            );
        }
    }

    /// Run `query` on the connection and wait for its answer (`None`: it failed, logged).
    pub(super) fn read<T: Send + 'static>(
        &self,
        query: impl FnOnce(&mut postgres::Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Option<T> {
        let (answer, wait) = sync_channel(1);
        let shown = self.shown.clone();
        let job: Read = Box::new(move |client| {
            let outcome = query(client).map_err(|error| {
                tracing::warn!("{shown}: {error}");
            });
            let _ = answer.send(outcome.ok());
        });
        self.jobs.send(Job::Read(job)).ok()?;
        match wait.recv_timeout(ANSWER_TIMEOUT) {
            Ok(answer) => answer,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                tracing::warn!(
                    "{}: no answer within {ANSWER_TIMEOUT:?}; going on without it",
                    self.shown
                );
                None
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => None,
        }
    }
}

/// A connection: over TLS (as the URL's `sslmode` asks) to a host, in clear over a Unix socket.
fn connect(
    config: &postgres::Config,
    tls: Option<&tokio_postgres_rustls::MakeRustlsConnect>,
) -> Result<postgres::Client, postgres::Error> {
    match tls {
        Some(tls) => config.connect(tls.clone()),
        None => config.connect(postgres::NoTls),
    }
}

/// Bring the schema to [`SCHEMA_VERSION`] under the migration lock, refusing a newer one
/// (`newer:N`).
fn migrate(client: &mut postgres::Client) -> Result<(), String> {
    let mut transaction = client.transaction().map_err(|error| error.to_string())?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(|error| error.to_string())?;
    transaction
        .batch_execute("CREATE TABLE IF NOT EXISTS clawbridge_schema (version BIGINT NOT NULL)")
        .map_err(|error| error.to_string())?;
    let found: i64 = transaction
        .query_opt("SELECT version FROM clawbridge_schema", &[])
        .map_err(|error| error.to_string())?
        .map_or(0, |row| row.get(0));
    if found > SCHEMA_VERSION {
        return Err(format!("newer:{found}"));
    }
    for (from, migration) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        transaction
            .batch_execute(migration)
            .map_err(|error| format!("schema {from} -> {}: {error}", from + 1))?;
        tracing::info!("store: schema {} -> {}", from, from + 1);
    }
    transaction
        .execute("DELETE FROM clawbridge_schema", &[])
        .and_then(|_| {
            transaction.execute(
                "INSERT INTO clawbridge_schema (version) VALUES ($1)",
                &[&SCHEMA_VERSION],
            )
        })
        .map_err(|error| error.to_string())?;
    transaction.commit().map_err(|error| error.to_string())
}

/// The connection's thread: jobs until every sender is gone; writes in batches.
fn job_loop(
    shown: &str,
    mut client: postgres::Client,
    config: &postgres::Config,
    tls: Option<&tokio_postgres_rustls::MakeRustlsConnect>,
    queue: &Receiver<Job>,
) {
    let mut next = queue.recv().ok();
    while let Some(job) = next.take() {
        if client.is_closed() {
            match connect(config, tls) {
                Ok(again) => {
                    tracing::info!("{shown}: connected again");
                    client = again;
                }
                Err(error) => tracing::error!("{shown}: the connection is lost: {error}"),
            }
        }
        match job {
            Job::Read(read) => read(&mut client),
            Job::Write(first) => {
                let mut batch = vec![*first];
                while batch.len() < BATCH {
                    match queue.try_recv() {
                        Ok(Job::Write(write)) => batch.push(*write),
                        Ok(read) => {
                            next = Some(read);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                commit(shown, &mut client, batch);
            }
        }
        if next.is_none() {
            next = queue.recv().ok();
        }
    }
}

/// One batch in one transaction; its flushes and acknowledgements told the outcome.
fn commit(shown: &str, client: &mut postgres::Client, batch: Vec<Write>) {
    let mut flushed = Vec::new();
    let mut acks = Vec::new();
    let committed = (|| -> Result<(), postgres::Error> {
        let mut transaction = client.transaction()?;
        for write in batch {
            match write {
                Write::ThreadNow(thread, ack) => {
                    acks.push(ack);
                    apply(&mut transaction, Write::Thread(thread))?;
                }
                Write::Flush(done) => flushed.push(done),
                other => apply(&mut transaction, other)?,
            }
        }
        transaction.commit()
    })();
    let outcome = committed.map_err(|error| error.to_string());
    if let Err(error) = &outcome {
        tracing::error!("{shown}: changes not kept: {error}");
    }
    for done in flushed {
        let _ = done.send(());
    }
    for ack in acks {
        let _ = ack.send(outcome.clone());
    }
}

fn apply(transaction: &mut postgres::Transaction<'_>, write: Write) -> Result<(), postgres::Error> {
    match write {
        Write::Thread(thread) => {
            // A session moves to its new thread: the old one is no longer bound to it.
            if let Some(key) = &thread.session_key {
                transaction.execute(
                    "UPDATE threads SET session_key = NULL WHERE session_key = $1 AND id <> $2",
                    &[key, &thread.id],
                )?;
            }
            transaction.execute(
                "INSERT INTO threads (id, identity, member, owner, session_key, fingerprint, rollout, epoch, gone, last_used, home)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                 ON CONFLICT (id) DO UPDATE SET identity = EXCLUDED.identity, member = EXCLUDED.member,
                   owner = EXCLUDED.owner, session_key = EXCLUDED.session_key,
                   fingerprint = EXCLUDED.fingerprint, rollout = EXCLUDED.rollout,
                   epoch = EXCLUDED.epoch, gone = EXCLUDED.gone, last_used = EXCLUDED.last_used,
                   home = EXCLUDED.home",
                &[
                    &thread.id,
                    &thread.identity,
                    &thread.member,
                    &thread.owner,
                    &thread.session_key,
                    &thread.fingerprint,
                    &thread.rollout,
                    &(thread.epoch as i64),
                    &thread.gone,
                    &(thread.last_used as i64),
                    &thread.home,
                ],
            )?;
        }
        Write::ForgetThread(id) => {
            transaction.execute("DELETE FROM threads WHERE id = $1", &[&id])?;
        }
        Write::Unbind(key) => {
            transaction.execute(
                "UPDATE threads SET session_key = NULL WHERE session_key = $1",
                &[&key],
            )?;
        }
        Write::Usage {
            identity,
            day,
            tokens,
        } => {
            transaction.execute(
                "INSERT INTO usage (identity, day, tokens) VALUES ($1, $2, $3)
                 ON CONFLICT (identity, day) DO UPDATE SET tokens = EXCLUDED.tokens",
                &[&identity, &(day as i64), &(tokens as i64)],
            )?;
        }
        Write::Runtime { scope, answer } => {
            transaction.execute(
                "INSERT INTO runtime (scope, answer) VALUES ($1, $2)
                 ON CONFLICT (scope) DO UPDATE SET answer = EXCLUDED.answer",
                &[&scope, &answer],
            )?;
        }
        Write::Member(member) => {
            transaction.execute(
                "INSERT INTO members (name, identity, codex_version, seen) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (name) DO UPDATE SET identity = EXCLUDED.identity,
                   codex_version = EXCLUDED.codex_version, seen = EXCLUDED.seen",
                &[
                    &member.name,
                    &member.identity,
                    &member.codex_version,
                    &(member.seen as i64),
                ],
            )?;
        }
        Write::Flush(_) | Write::ThreadNow(..) => {}
    }
    Ok(())
}

/// Take (or keep) `thread`'s lease for `holder` for `ttl_ms`: held with its epoch (the same
/// while the holder keeps it, one more when it passes to a new holder), or another live
/// holder's with what is left of it. One statement: two endpoints asking together get one
/// answer each, never both the lease.
pub(super) fn take_lease(
    client: &mut postgres::Client,
    thread: &str,
    holder: &str,
    ttl_ms: i64,
) -> Result<super::LeaseTaken, postgres::Error> {
    let taken = client.query_opt(
        &format!(
            "INSERT INTO leases (thread, holder, epoch, expires_ms) VALUES ($1, $2, 1, {NOW_MS} + $3)
             ON CONFLICT (thread) DO UPDATE SET
               epoch = CASE WHEN leases.holder = EXCLUDED.holder THEN leases.epoch ELSE leases.epoch + 1 END,
               holder = EXCLUDED.holder, expires_ms = EXCLUDED.expires_ms
             WHERE leases.holder = EXCLUDED.holder OR leases.expires_ms < {NOW_MS}
             RETURNING epoch"
        ),
        &[&thread, &holder, &ttl_ms],
    )?;
    if let Some(row) = taken {
        return Ok(super::LeaseTaken::Held {
            epoch: row.get::<_, i64>(0).max(0) as u64,
        });
    }
    let row = client.query_one(
        &format!("SELECT holder, epoch, expires_ms - {NOW_MS} FROM leases WHERE thread = $1"),
        &[&thread],
    )?;
    Ok(super::LeaseTaken::Busy {
        holder: row.get(0),
        epoch: row.get::<_, i64>(1).max(0) as u64,
        left_ms: row.get::<_, i64>(2).max(0) as u64,
    })
}

/// Renew `holder`'s leases of `threads` for `ttl_ms`: the threads still its own (a lease
/// another endpoint took is not among them).
pub(super) fn renew_leases(
    client: &mut postgres::Client,
    holder: &str,
    threads: &[String],
    ttl_ms: i64,
) -> Result<Vec<String>, postgres::Error> {
    let rows = client.query(
        &format!(
            "UPDATE leases SET expires_ms = {NOW_MS} + $3 WHERE holder = $1 AND thread = ANY($2) RETURNING thread"
        ),
        &[&holder, &threads, &ttl_ms],
    )?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Let `holder`'s leases of `threads` go (it follows them no more): another endpoint may take
/// them at once.
pub(super) fn release_leases(
    client: &mut postgres::Client,
    holder: &str,
    threads: &[String],
) -> Result<u64, postgres::Error> {
    client.execute(
        "DELETE FROM leases WHERE holder = $1 AND thread = ANY($2)",
        &[&holder, &threads],
    )
}

/// Every endpoint holding a live lease, with how many.
pub(super) fn live_lease_holders(
    client: &mut postgres::Client,
) -> Result<Vec<(String, usize)>, postgres::Error> {
    let rows = client.query(
        &format!(
            "SELECT holder, COUNT(*) FROM leases WHERE expires_ms > {NOW_MS} GROUP BY holder ORDER BY holder"
        ),
        &[],
    )?;
    Ok(rows
        .iter()
        .map(|row| (row.get(0), row.get::<_, i64>(1).max(0) as usize))
        .collect())
}

/// The live leases of the fleet, at most `limit`, the ones ending soonest first: (thread,
/// holder, epoch, milliseconds left).
pub(super) fn live_leases(
    client: &mut postgres::Client,
    limit: i64,
) -> Result<Vec<(String, String, u64, i64)>, postgres::Error> {
    let rows = client.query(
        &format!(
            "SELECT thread, holder, epoch, expires_ms - {NOW_MS} FROM leases WHERE expires_ms > {NOW_MS} ORDER BY expires_ms, thread LIMIT $1"
        ),
        &[&limit],
    )?;
    Ok(rows
        .iter()
        .map(|row| {
            (
                row.get(0),
                row.get(1),
                row.get::<_, i64>(2).max(0) as u64,
                row.get(3),
            )
        })
        .collect())
}

pub(super) const THREAD_COLUMNS: &str =
    "id, identity, member, owner, session_key, fingerprint, rollout, epoch, gone, last_used, home";

pub(super) fn thread_of_row(row: &postgres::Row) -> ThreadRecord {
    ThreadRecord {
        id: row.get(0),
        identity: row.get(1),
        member: row.get(2),
        owner: row.get(3),
        session_key: row.get(4),
        fingerprint: row.get(5),
        rollout: row.get(6),
        epoch: row.get::<_, i64>(7).max(0) as u64,
        gone: row.get(8),
        last_used: row.get::<_, i64>(9).max(0) as u64,
        home: row.get(10),
    }
}

pub(super) fn member_of_row(row: &postgres::Row) -> MemberRecord {
    MemberRecord {
        name: row.get(0),
        identity: row.get(1),
        codex_version: row.get(2),
        seen: row.get::<_, i64>(3).max(0) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_never_shown() {
        assert_eq!(
            shown("postgres://fleet:s3cret@db.internal:5432/clawbridge"),
            "postgres://fleet:%3Credacted%3E@db.internal:5432/clawbridge"
        );
        let query = shown("postgresql:///clawbridge?host=/run/pg&password=s3cret");
        assert!(
            !query.contains("s3cret") && query.contains("host=%2Frun%2Fpg"),
            "{query}"
        );
        assert!(!shown("postgres://u:p@@@").contains("p@@"));
        assert!(is_postgres("postgresql://h/db") && !is_postgres("/var/lib/state.db"));
    }
}
