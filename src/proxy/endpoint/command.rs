//! The `app-server --listen ws://|unix://` command: the endpoint's wiring from its flags (the
//! token, the state dir, the model-traffic plane, the fleet's homes, the observer), then serve
//! until SIGTERM or SIGINT and drain.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Endpoint, EndpointSettings, ListenAddr};
use crate::observe::tap::{self, ObserverTap};
use crate::proxy::args::AppServerArgs;
use crate::proxy::stall;
use crate::proxy::{codex_binary, plane_settings, print_out, token_path, ProxyError, TrafficFlags};
use crate::support::console::Console;
use crate::support::task::Tasks;
use crate::traffic::capture::live::Known;
use crate::traffic::plane::{OfflineHomeAt, Plane};

/// The endpoint's state database in the state dir.
pub const STATE_DB: &str = "app-server.db";

/// The native Codex home's `config.toml`, which every account's home gets (a regular file of
/// at most 1 MiB, a link to one included); none when there is none, and a warning when it
/// cannot be read.
fn native_config(codex_home: &Path) -> Option<String> {
    use crate::support::fs::ReadRefusal;
    let path = codex_home.join("config.toml");
    match crate::support::fs::read_capped_anywhere(&path, None, 1 << 20) {
        Ok(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Err(ReadRefusal::NotFound) => None,
        Err(refusal) => {
            tracing::warn!(
                "{}: {refusal}; the accounts' Codex homes get no config.toml",
                path.display()
            );
            None
        }
    }
}

/// Refused before listening: a Codex home the app-servers cannot write (Codex writes its
/// sessions, logs and state there; every turn would fail).
fn writable_home(home: &Path) -> Result<(), ProxyError> {
    let refused = |why: String| {
        ProxyError::Setup(crate::error::Error::InvalidArgument {
            flag: "CODEX_HOME".into(),
            message: format!(
                "{}: {why}. Codex writes its sessions there: make it writable, or point CODEX_HOME \
                 at a folder that is (or use --offline, which uses a home of its own)",
                home.display()
            ),
        })
    };
    std::fs::create_dir_all(home).map_err(|error| refused(error.to_string()))?;
    crate::support::fs::can_write_in(home)
        .map_err(|error| refused(format!("not writable ({error})")))
}

/// The token clients of the endpoint send: from `--token-file`, else
/// `<state-dir>/app-server-token` (generated, 0600, on first start), read and made as `serve`'s
/// is ([`crate::service::token`]). It is never printed; its file is named on stderr.
pub(crate) fn endpoint_token(
    args: &AppServerArgs,
    console: &Console,
) -> Result<String, ProxyError> {
    let path = token_path(args.token_file.as_ref(), args.state_dir.as_ref())?;
    let file = crate::service::token::load_or_create(&path).map_err(token_error)?;
    console.note(&format!(
        "clawbridge app-server: {} bearer token in {}",
        if file.created {
            "generated a"
        } else {
            "using the"
        },
        file.path.display()
    ));
    Ok(file.token)
}

/// A token problem, as the endpoint's flag.
pub(crate) fn token_error(error: crate::service::token::TokenError) -> ProxyError {
    ProxyError::Setup(crate::error::Error::InvalidArgument {
        flag: "--token-file".into(),
        message: error.to_string(),
    })
}

/// The private view each app-server gets (`support::jail`): the state dir (every account's
/// Codex home, the tokens, the clients file), the token and clients files wherever they are,
/// the transcripts and captures, and `--member-hide` hidden; the workspace roots kept. When
/// this machine cannot make it, no jail, and why (the fleet then serves one account).
async fn member_jail(
    args: &AppServerArgs,
    state: &Path,
    clients: &Path,
    roots: Option<&crate::support::fs::Roots>,
    codex_home: &Path,
) -> (Option<crate::support::jail::Jail>, Option<String>) {
    let helper = match crate::support::process::own_executable() {
        Ok(helper) => helper,
        Err(error) => return (None, Some(format!("the jail's helper: {error}"))),
    };
    let mut hide = vec![state.to_path_buf(), clients.to_path_buf()];
    hide.extend(args.token_file.iter().cloned());
    // Named accounts decide whose threads a key reaches: kept from the models as the clients are.
    hide.extend(args.accounts.iter().cloned());
    hide.extend(args.transcript.iter().cloned());
    hide.extend(args.capture.iter().cloned());
    hide.extend(args.member_hide.iter().cloned());
    let jail = crate::support::jail::Jail {
        helper,
        hide,
        keep: roots
            .map(|roots| roots.folders().to_vec())
            .unwrap_or_default(),
    };
    match crate::service::isolation::check(jail, codex_home).await {
        Ok(jail) => (Some(jail), None),
        Err(why) => {
            tracing::warn!(
                "clawbridge app-server: the app-servers cannot get a private view of this machine \
                 ({why}); one account is served, every other login is refused"
            );
            (None, Some(why))
        }
    }
}

/// `--workspace-root`s, canonical: each must be a folder (`None` when none is given).
fn workspace_roots(roots: &[PathBuf]) -> Result<Option<crate::support::fs::Roots>, ProxyError> {
    if roots.is_empty() {
        return Ok(None);
    }
    let mut canonical = Vec::new();
    for root in roots {
        let refused = |message: String| {
            ProxyError::Setup(crate::error::Error::InvalidArgument {
                flag: "--workspace-root".into(),
                message: format!("{}: {message}", root.display()),
            })
        };
        let real = root
            .canonicalize()
            .map_err(|error| refused(error.to_string()))?;
        if !real.is_dir() {
            return Err(refused("not a folder".into()));
        }
        canonical.push(real);
    }
    Ok(Some(crate::support::fs::Roots::new(canonical)))
}

/// `--listen ws://IP:PORT` or `unix://PATH`: serve until SIGTERM or SIGINT (then drain); the
/// bound address is stdout's first line (`IP:PORT`, or the socket's path).
pub(crate) async fn run_endpoint(
    args: AppServerArgs,
    listen: ListenAddr,
    console: &Console,
) -> Result<i32, ProxyError> {
    use crate::codex::client::fleet::FleetConfig;
    use crate::codex::client::pool::PoolConfig;
    let token = endpoint_token(&args, console)?;
    let state = crate::app::commands::state_dir(args.state_dir.clone())?;
    // The fleet's durable state: who owns each thread, each account's tokens today, the pinned
    // `initialize` answer (refused, naming the file and the fix, when it cannot be used).
    let store = Arc::new(crate::service::store::Store::open_at(
        args.store.as_deref(),
        &state.join(STATE_DB),
    )?);
    console.note(&format!(
        "clawbridge app-server: the fleet's state is kept in {}",
        store.path().display()
    ));
    let remotes = crate::codex::client::remote::remote_endpoints(
        &args.pool.remote_app_servers,
        &args.pool.app_server_token_files,
        args.pool.app_server_ca.as_deref(),
    )?;
    // An endpoint that cannot start an app-server must not say it is listening: every turn
    // would fail. No Codex binary is refused here, naming the fix.
    let binary = if args.pool.app_servers > 0 {
        Ok(codex_binary(args.codex_bin.as_deref()).map_err(|error| {
            ProxyError::Setup(crate::error::Error::InvalidArgument {
                flag: "--codex-bin".into(),
                message: format!(
                    "{error} (the endpoint's app-servers need it; or serve remote app-servers \
                     only: --app-servers 0 --app-server URL)"
                ),
            })
        })?)
    } else {
        Err("no local app-servers (--app-servers 0)".to_string())
    };
    // What the schema check and the captures learn from the conversation.
    let known = Arc::new(Mutex::new(Known::default()));
    let tasks = Tasks::new();
    if let Some(dir) = &args.transcript {
        crate::support::fs::create_private_dir(dir).map_err(|source| ProxyError::Transcript {
            path: dir.display().to_string(),
            source,
        })?;
    }
    // The model-traffic plane, as `serve` has it: offline, the loopback stub, with its homes in
    // the state dir, private and apart from the live ones (the native one here, each logged-in
    // account's beside it); with a capture folder, the recording forwarder in front of the stub
    // or the real upstream.
    let plane = Plane::start(
        &plane_settings(
            TrafficFlags {
                offline: args.offline,
                stub_script: args.stub_script.as_deref(),
                capture: args.capture.as_deref(),
                transcript: args.transcript.as_deref(),
                upstream: args.upstream.as_deref(),
                upstream_ca: args.upstream_ca.as_deref(),
                no_websocket: args.no_websocket,
            },
            OfflineHomeAt::Private(state.join("app-server-offline").join("native")),
            Vec::new(),
        )?,
        Arc::clone(&known),
    )
    .await
    .map_err(ProxyError::Offline)?;
    let trace = tap::start_trace(
        &crate::traffic::trace::TraceSettings {
            sent_record: args
                .transcript
                .as_ref()
                .map(|dir| dir.join(crate::traffic::trace::sent::SENT_RECORD)),
            ..args.otel.settings()
        },
        plane.captures(),
        &known,
    )?;
    let codex_home = plane.codex_home().to_path_buf();
    if args.pool.app_servers > 0 {
        writable_home(&codex_home)?;
    }
    // Over WebSocket, OpenClaw's threads name Codex's `openai` provider: it is pointed at the
    // stub offline (after the home's own config, so it wins), at the forwarder with a live
    // capture.
    // The operator's own `-c` overrides first, the plane's after them (its provider wins).
    let mut config_overrides =
        crate::proxy::args::endpoint_config_overrides(&args.args).map_err(|message| {
            ProxyError::Setup(crate::error::Error::InvalidArgument {
                flag: "-c".into(),
                message,
            })
        })?;
    config_overrides.extend(plane.config_overrides().iter().cloned());
    // Each account a connection logs in with gets app-servers over a Codex home of its own,
    // in the state dir (kept across restarts: a resumed thread finds its rollout there), with
    // the native home's `config.toml` (or the offline one) and never its login.
    let (homes, home_config) = match plane.offline_url() {
        Some(url) => (
            state.join("app-server-offline"),
            Some(crate::traffic::stub::offline_account_config(
                &url, "gpt-5.5",
            )),
        ),
        None => (state.join("app-server-homes"), native_config(&codex_home)),
    };
    let total_locals = args.pool.app_servers.min(64);
    let roots = workspace_roots(&args.workspace_roots)?;
    let clients_path = args
        .clients
        .clone()
        .unwrap_or_else(|| crate::service::clients::clients_path(&state));
    let (jail, one_account) = match &binary {
        Ok(_) => member_jail(&args, &state, &clients_path, roots.as_ref(), &codex_home).await,
        Err(_) => (None, None),
    };
    let mut pool = PoolConfig {
        environment: Some(args.member_env.clone()),
        jail,
        reaper: crate::support::process::own_executable().ok(),
        locals: total_locals,
        remotes,
        isolate_environment: plane.offline_url().is_some(),
        config_overrides,
        recycle_after_threads: args.pool.recycle_after_threads.max(1),
        recycle_rss_bytes: args.pool.recycle_rss_mb.max(1).saturating_mul(1024 * 1024),
        // A member that is back becomes a `member restart` span of the live trace.
        on_restart: trace.clone().map(|trace| {
            crate::codex::client::pool::RestartHook(Arc::new(move |restart| {
                trace.member_restart(&restart.member, &restart.reason, restart.down_since);
            }))
        }),
        ..PoolConfig::new(binary, codex_home)
    };
    // The schema check of every client's thread and turn params, against the local Codex.
    let schema = match (&pool.binary, args.no_check) {
        (Ok(binary), false) => Some(tap::load_schema(&tasks, binary.clone(), None)),
        _ => None,
    };
    let log = args
        .transcript
        .as_ref()
        .map(|dir| dir.join("conformance.jsonl"));
    let audit = args.audit.then(|| {
        crate::observe::audit::LiveAudit::new(
            args.transcript.as_ref().map(|dir| dir.join("audit.jsonl")),
            console.clone(),
            crate::app::audit::live_auditor(),
        )
    });
    let observer = ObserverTap::start(&tasks, schema, log, Arc::clone(&known), audit);
    let clients = crate::service::clients::ClientsFile::load(&clients_path)?.clients;
    if !clients.is_empty() {
        console.note(&format!(
            "clawbridge app-server: {} named client(s) from {}",
            clients.len(),
            clients_path.display()
        ));
    }
    let accounts_path = args
        .accounts
        .clone()
        .unwrap_or_else(|| crate::service::accounts::accounts_path(&state));
    let accounts = crate::service::accounts::AccountBook::open(&accounts_path)?;
    let account_members = give_members(
        &args.app_server_accounts,
        &mut pool.remotes,
        &accounts.current(),
    )?;
    let named = accounts.current().accounts.len();
    if named > 0 {
        console.note(&format!(
            "clawbridge app-server: {named} named account(s) from {}{}",
            accounts_path.display(),
            if args.unnamed_accounts {
                ""
            } else {
                "; keys of no account are refused (--unnamed-accounts serves them)"
            }
        ));
    }
    let settings = EndpointSettings {
        accounts: Some(Arc::new(accounts)),
        unnamed_accounts: args.unnamed_accounts,
        route: args.route,
        listen,
        token,
        clients,
        fleet: FleetConfig {
            per_identity: args
                .pool
                .app_servers_per_identity
                .unwrap_or(total_locals)
                .clamp(1, total_locals.max(1)),
            native: pool,
            homes,
            home_config,
            total_locals,
            wait_for_room: FleetConfig::DEFAULT_WAIT_FOR_ROOM,
            one_account,
            account_members,
        },
        max_connections: 64,
        idle_timeout: Duration::from_secs(60),
        ping_interval: Duration::from_secs(20),
        handshake_timeout: Duration::from_secs(30),
        upgrade_timeout: Duration::from_secs(10),
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        transcript: args.transcript.clone(),
        observe: Some(observer.lines.clone()),
        trace: trace.clone(),
        first_tokens: known
            .lock()
            .ok()
            .map(|known| Arc::clone(&known.first_tokens)),
        stalls: stall::StallSettings {
            completion_grace: args
                .completion_grace
                .map_or(stall::StallSettings::default().completion_grace, |secs| {
                    Duration::from_secs(secs.max(1))
                }),
            recover: args.completion_grace.is_some(),
            silence: Duration::from_secs(args.stall_after.max(1)),
        },
        budget_tokens: args.budget_tokens,
        allow_hosts: args.allow_hosts.clone(),
        fresh_thread_grace: super::FRESH_THREAD_GRACE,
        store: Some(store),
        home: Some(crate::service::store::home_id(&state)?),
        max_threads_in_memory: crate::service::directory::DEFAULT_CAPACITY,
        lease_ttl: std::time::Duration::from_secs(args.lease_seconds.max(1)),
        new_runtime_identity: args.new_runtime_identity,
        home_retention: (args.home_retention_days > 0)
            .then(|| std::time::Duration::from_secs(args.home_retention_days * 86_400)),
        policy: super::Policy {
            ceiling: args
                .max_sandbox
                .unwrap_or(crate::codex::protocol::params::SandboxMode::WorkspaceWrite),
            roots,
        },
    };
    let running = Endpoint::start(settings, args.allow_remote).await?;
    // The stop signals are caught before the address is printed: a supervisor that stops the
    // endpoint as soon as it is up (systemd, a script's trap) gets the drain, not a kill.
    let mut signals =
        crate::support::signals::StopSignals::install().map_err(|source| ProxyError::Spawn {
            binary: "a SIGTERM handler".into(),
            source,
        })?;
    match &running.listen {
        ListenAddr::Tcp(addr) => print_out(console, &format!("{addr}\n"))?,
        ListenAddr::Unix(path) => print_out(console, &format!("{}\n", path.display()))?,
    }
    signals.next().await;
    console.note(
        "clawbridge app-server: shutting down (running turns interrupted, clients closed, app-servers stopped)",
    );
    running.stop().await;
    observer.finish().await;
    tasks.shutdown(Duration::from_secs(5)).await;
    plane.finish().await;
    if let Some(trace) = trace {
        trace.finish().await;
    }
    Ok(0)
}

/// `--app-server-account URL=ACCOUNT`: each named remote member taken out of the native pool
/// and given to the account (its name in the accounts file, or its fingerprint), by the
/// account's identity key. Errors name the flag and what is wrong.
fn give_members(
    given: &[String],
    remotes: &mut Vec<crate::codex::client::remote::RemoteEndpoint>,
    accounts: &crate::service::accounts::AccountsFile,
) -> Result<
    std::collections::HashMap<String, Vec<crate::codex::client::remote::RemoteEndpoint>>,
    ProxyError,
> {
    let refused = |message: String| {
        ProxyError::Setup(crate::error::Error::InvalidArgument {
            flag: "--app-server-account".into(),
            message,
        })
    };
    let mut members: std::collections::HashMap<String, Vec<_>> = Default::default();
    for entry in given {
        let (url, account) = entry
            .rsplit_once('=')
            .filter(|(url, account)| !url.is_empty() && !account.is_empty())
            .ok_or_else(|| refused(format!("{entry}: not URL=ACCOUNT")))?;
        let identity = match accounts.accounts.iter().find(|named| named.name == account) {
            Some(named) => named.identity.clone(),
            None if crate::codex::client::fleet::Identity::from_key(account).is_some() => {
                account.to_string()
            }
            None => {
                return Err(refused(format!(
                    "{entry}: {account} is no account named in the accounts file, nor a fingerprint (apiKey-1a2b...; `clawbridge account list`)"
                )))
            }
        };
        let at = remotes
            .iter()
            .position(|remote| remote.url == url)
            .ok_or_else(|| {
                refused(format!(
                    "{entry}: {url} is not one of the --app-server members (or is given to an account twice)"
                ))
            })?;
        members
            .entry(identity)
            .or_default()
            .push(remotes.remove(at));
    }
    Ok(members)
}
