//! The private view both services give their app-servers (`support::jail`), checked once at
//! start: a machine that cannot make it gets a warning and the services go on without it (the
//! endpoint then serves one account only; see `codex::client::fleet`).

use std::path::Path;
use std::time::Duration;

use crate::support::jail::Jail;

/// How long the check may take (two process starts, a few mounts).
const PROBE_LIMIT: Duration = Duration::from_secs(10);

/// The variable that turns the private view off (`CLAWBRIDGE_JAIL=off`): for a machine whose
/// sandbox already gives each service one account, and for the tests of the fallback.
pub const SWITCH: &str = "CLAWBRIDGE_JAIL";

/// `jail` if this machine can make it (checked with `home` kept), else why not.
pub async fn check(jail: Jail, home: &Path) -> Result<Jail, String> {
    if std::env::var_os(SWITCH).is_some_and(|value| value == "off") {
        return Err(format!("turned off by {SWITCH}=off"));
    }
    let probe = jail.clone();
    let home = home.to_path_buf();
    tokio::task::spawn_blocking(move || probe.probe(&home, PROBE_LIMIT))
        .await
        .unwrap_or_else(|error| Err(error.to_string()))
        .map(|()| jail)
}

/// [`check`], with the warning when the jail cannot be made: `None` then.
pub async fn probed(jail: Jail, home: &Path) -> Option<Jail> {
    match check(jail, home).await {
        Ok(jail) => Some(jail),
        Err(why) => {
            tracing::warn!(
                "the app-servers cannot get a private view of this machine ({why}); their models can read what this user can"
            );
            None
        }
    }
}
