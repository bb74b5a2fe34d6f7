//! How OpenClaw calls the Codex slot, and how clawbridge tells its own flags from Codex's.
//!
//! OpenClaw starts `appServer.command` with `appServer.args` (default `app-server --listen
//! stdio://`) after moving every `-c key=value` in front of the last `app-server` and, when it
//! manages the login, adding `-c cli_auth_credentials_store="ephemeral"` there. So with
//! `command: "clawbridge"` and `args: ["app-server", "--transcript", DIR]`, clawbridge is run as
//!
//! ```text
//! clawbridge -c cli_auth_credentials_store="ephemeral" app-server --transcript DIR
//! ```
//!
//! and with a user-scoped Codex home OpenClaw also runs `clawbridge [-c ...] login status`.
//! [`slot_invocation`] reads both shapes: the proxy's own flags are taken from wherever they
//! stand after `app-server`; everything else goes to Codex in OpenClaw's order; a call that is
//! not `app-server` at all is handed to the real Codex unchanged.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// Codex's global options that take a value (the ones OpenClaw puts before `app-server`).
const CODEX_VALUE_OPTIONS: [&str; 6] =
    ["-c", "--config", "-p", "--profile", "--enable", "--disable"];

/// The proxy's own flags: (name, takes a value).
const OWN_FLAGS: [(&str, bool); 6] = [
    ("--codex-bin", true),
    ("--transcript", true),
    ("--offline", false),
    ("--capture", true),
    ("--stub-script", true),
    ("--no-check", false),
];

/// What a command line in the Codex slot asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotInvocation {
    /// Run the proxy: the proxy's flags, and what Codex gets (with `app-server` in it).
    Proxy(ProxyArgs),
    /// Not an app-server start (e.g. `login status`): run the real Codex with these arguments.
    Passthrough(Vec<OsString>),
}

/// The proxy's flags, read from the slot's command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyArgs {
    pub codex_bin: Option<PathBuf>,
    pub transcript: Option<PathBuf>,
    pub offline: bool,
    pub capture: Option<PathBuf>,
    pub stub_script: Option<PathBuf>,
    pub no_check: bool,
    /// Codex's arguments, in order.
    pub codex: Vec<OsString>,
}

/// Why a slot command line cannot be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{flag} needs a value")]
pub struct MissingValue {
    pub flag: String,
}

fn is_codex_option(arg: &OsStr) -> bool {
    let Some(text) = arg.to_str() else {
        return false;
    };
    CODEX_VALUE_OPTIONS.contains(&text)
        || text.starts_with("--config=")
        || text.starts_with("--profile=")
        || (text.starts_with("-c") && text.len() > 2 && !text.starts_with("--"))
}

/// Index just past a Codex global option starting at `at` (its value included).
fn skip_option(args: &[OsString], at: usize) -> usize {
    let attached = args[at].to_str().is_some_and(|text| {
        text.contains('=') && text.starts_with("--")
            || (text.starts_with("-c") && text.len() > 2 && !text.starts_with("--"))
    });
    if attached {
        at + 1
    } else {
        (at + 2).min(args.len())
    }
}

/// The index of the `app-server` subcommand: the first non-option word after the leading
/// global options (an option's value, such as `-c app-server=1`, is never taken for it).
fn subcommand_index(args: &[OsString]) -> Option<usize> {
    let mut at = 0;
    while at < args.len() {
        if is_codex_option(&args[at]) {
            at = skip_option(args, at);
            continue;
        }
        return (args[at] == "app-server").then_some(at);
    }
    None
}

/// Read a command line (without the program name) given to clawbridge in the Codex slot.
/// `None` when it is not one: it starts with neither a Codex global option nor `app-server`,
/// or it asks `app-server` for help (then clap answers).
pub fn slot_invocation(args: &[OsString]) -> Result<Option<SlotInvocation>, MissingValue> {
    let Some(first) = args.first() else {
        return Ok(None);
    };
    let codex_form = is_codex_option(first);
    if !codex_form && first != "app-server" {
        return Ok(None);
    }
    let Some(subcommand) = subcommand_index(args) else {
        return Ok(codex_form.then(|| SlotInvocation::Passthrough(args.to_vec())));
    };
    let rest = &args[subcommand + 1..];
    if rest.iter().any(|arg| arg == "--help" || arg == "-h") {
        return Ok(None);
    }
    // `clawbridge -c k=v app-server ...`: Codex gets the prefix and `app-server`; with
    // `clawbridge app-server ...` the rest may be a whole Codex command line of its own.
    let mut parsed = ProxyArgs {
        codex: if codex_form {
            args[..=subcommand].to_vec()
        } else {
            Vec::new()
        },
        ..ProxyArgs::default()
    };
    let mut at = 0;
    while at < rest.len() {
        let arg = &rest[at];
        let text = arg.to_str().unwrap_or_default();
        if text == "--" {
            parsed.codex.extend_from_slice(&rest[at..]);
            break;
        }
        let (name, attached) = match text.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value)),
            _ => (text, None),
        };
        let Some((flag, takes_value)) = OWN_FLAGS.iter().find(|(flag, _)| *flag == name) else {
            parsed.codex.push(arg.clone());
            at += 1;
            continue;
        };
        let value = if !takes_value {
            None
        } else if let Some(value) = attached {
            Some(OsString::from(value))
        } else {
            at += 1;
            Some(rest.get(at).cloned().ok_or_else(|| MissingValue {
                flag: (*flag).to_string(),
            })?)
        };
        let path = value.map(PathBuf::from);
        match *flag {
            "--codex-bin" => parsed.codex_bin = path,
            "--transcript" => parsed.transcript = path,
            "--capture" => parsed.capture = path,
            "--stub-script" => parsed.stub_script = path,
            "--offline" => parsed.offline = true,
            _ => parsed.no_check = true,
        }
        at += 1;
    }
    if !codex_form {
        parsed.codex = codex_args(&parsed.codex);
    }
    Ok(Some(SlotInvocation::Proxy(parsed)))
}

/// What Codex gets from arguments given after `clawbridge app-server`'s own flags: as they are
/// when they name `app-server`; else `app-server` is put after the leading global options.
pub fn codex_args(args: &[OsString]) -> Vec<OsString> {
    if subcommand_index(args).is_some() {
        return args.to_vec();
    }
    let mut at = 0;
    while at < args.len() && is_codex_option(&args[at]) {
        at = skip_option(args, at);
    }
    let mut out = args[..at].to_vec();
    out.push("app-server".into());
    out.extend_from_slice(&args[at..]);
    out
}

/// `args` with `-c override` added just before `app-server` (so it wins over OpenClaw's own
/// `-c` of the same key, which Codex applies first).
pub fn with_override(args: &[OsString], override_: &str) -> Vec<OsString> {
    let at = subcommand_index(args).unwrap_or(args.len());
    let mut out = args[..at].to_vec();
    out.push("-c".into());
    out.push(override_.into());
    out.extend_from_slice(&args[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn openclaw_shapes_are_read() {
        let line = os(&[
            "-c",
            "cli_auth_credentials_store=\"ephemeral\"",
            "app-server",
            "--transcript",
            "/t",
            "--listen",
            "stdio://",
            "--offline",
        ]);
        let Ok(Some(SlotInvocation::Proxy(parsed))) = slot_invocation(&line) else {
            panic!("a proxy start");
        };
        assert_eq!(parsed.transcript, Some(PathBuf::from("/t")));
        assert!(parsed.offline && !parsed.no_check);
        assert_eq!(
            parsed.codex,
            os(&[
                "-c",
                "cli_auth_credentials_store=\"ephemeral\"",
                "app-server",
                "--listen",
                "stdio://"
            ])
        );
        let plain = os(&["app-server", "--transcript=/t", "--no-check"]);
        let Ok(Some(SlotInvocation::Proxy(parsed))) = slot_invocation(&plain) else {
            panic!("a proxy start");
        };
        assert_eq!(parsed.codex, os(&["app-server"]));
        assert!(parsed.no_check);
        let whole = os(&[
            "app-server",
            "--offline",
            "-c",
            "x=1",
            "app-server",
            "--listen",
            "stdio://",
        ]);
        let Ok(Some(SlotInvocation::Proxy(parsed))) = slot_invocation(&whole) else {
            panic!("a proxy start");
        };
        assert_eq!(
            parsed.codex,
            os(&["-c", "x=1", "app-server", "--listen", "stdio://"])
        );
        assert_eq!(
            slot_invocation(&os(&["-c", "x=1", "login", "status"])),
            Ok(Some(SlotInvocation::Passthrough(os(&[
                "-c", "x=1", "login", "status"
            ]))))
        );
        assert_eq!(slot_invocation(&os(&["run", "x.json"])), Ok(None));
        assert_eq!(slot_invocation(&os(&["app-server", "--help"])), Ok(None));
        assert_eq!(
            slot_invocation(&os(&["app-server", "--transcript"])),
            Err(MissingValue {
                flag: "--transcript".into()
            })
        );
        // A value that reads `app-server` is not the subcommand.
        assert_eq!(
            slot_invocation(&os(&["-c", "app-server", "login"])),
            Ok(Some(SlotInvocation::Passthrough(os(&[
                "-c",
                "app-server",
                "login"
            ]))))
        );
    }

    #[test]
    fn app_server_is_added_after_the_global_options() {
        let given = os(&["-c", "x=1", "app-server", "--listen", "stdio://"]);
        assert_eq!(codex_args(&given), given);
        assert_eq!(codex_args(&[]), os(&["app-server"]));
        assert_eq!(
            codex_args(&os(&["-c", "x=1", "--listen", "stdio://"])),
            os(&["-c", "x=1", "app-server", "--listen", "stdio://"])
        );
        assert_eq!(
            with_override(&given, "openai_base_url=\"u\""),
            os(&[
                "-c",
                "x=1",
                "-c",
                "openai_base_url=\"u\"",
                "app-server",
                "--listen",
                "stdio://"
            ])
        );
    }
}
