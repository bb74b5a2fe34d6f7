//! Turns `codex-versions.tsv` (`fixtures/codex-versions.tsv` links to it), the one table of supported Codex CLI versions, into
//! constants (`codex::protocol`), so the handshake, `doctor` and the docs cannot disagree with the
//! scripts that read the same file.

use std::fmt::Write as _;

fn semver(text: &str) -> Option<(u64, u64, u64)> {
    let core = text.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|part| part.parse::<u64>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

fn run() -> Result<(), String> {
    let source = "codex-versions.tsv";
    println!("cargo:rerun-if-changed={source}");
    let text = std::fs::read_to_string(source).map_err(|error| format!("{source}: {error}"))?;
    let mut rows = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let [version, role, checked] = fields.as_slice() else {
            return Err(format!(
                "{source}:{}: want 3 tab-separated fields",
                number + 1
            ));
        };
        let parsed = semver(version)
            .ok_or_else(|| format!("{source}:{}: {version} is not a version", number + 1))?;
        if !matches!(*role, "pinned" | "tested") {
            return Err(format!(
                "{source}:{}: role {role} is not pinned or tested",
                number + 1
            ));
        }
        rows.push((
            parsed,
            version.to_string(),
            role.to_string(),
            checked.to_string(),
        ));
    }
    rows.sort();
    let pinned: Vec<&String> = rows
        .iter()
        .filter(|row| row.2 == "pinned")
        .map(|row| &row.1)
        .collect();
    let [pinned] = pinned.as_slice() else {
        return Err(format!(
            "{source}: want exactly one pinned row, found {}",
            pinned.len()
        ));
    };
    let (Some(oldest), Some(newest)) = (rows.first(), rows.last()) else {
        return Err(format!("{source}: no versions"));
    };
    let mut out = String::new();
    let _ = writeln!(out, "/// The Codex CLI version every test runs against.");
    let _ = writeln!(out, "pub const PINNED_CODEX_VERSION: &str = {pinned:?};");
    let _ = writeln!(out, "/// The newest supported (tested) Codex CLI version.");
    let _ = writeln!(
        out,
        "pub const NEWEST_TESTED_CODEX_VERSION: &str = {:?};",
        newest.1
    );
    let _ = writeln!(
        out,
        "/// The oldest supported Codex CLI version (older is refused)."
    );
    let _ = writeln!(
        out,
        "pub const OLDEST_SUPPORTED_CODEX_VERSION: &str = {:?};",
        oldest.1
    );
    let _ = writeln!(out, "/// [`OLDEST_SUPPORTED_CODEX_VERSION`] as numbers.");
    let _ = writeln!(
        out,
        "pub const OLDEST_SUPPORTED_SEMVER: (u64, u64, u64) = {:?};",
        oldest.0
    );
    let _ = writeln!(out, "/// Every row: version, role, what was checked.");
    let _ = writeln!(out, "pub const CODEX_VERSIONS: &[(&str, &str, &str)] = &[");
    for (_, version, role, checked) in &rows {
        let _ = writeln!(out, "    ({version:?}, {role:?}, {checked:?}),");
    }
    let _ = writeln!(out, "];");
    let dir = std::env::var("OUT_DIR").map_err(|error| format!("OUT_DIR: {error}"))?;
    let path = std::path::Path::new(&dir).join("codex_versions.rs");
    std::fs::write(&path, out).map_err(|error| format!("{}: {error}", path.display()))
}

fn main() {
    if let Err(message) = run() {
        eprintln!("build.rs: {message}");
        std::process::exit(1);
    }
}
