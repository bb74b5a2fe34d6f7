//! The layer map of docs/architecture.md, enforced inside each crate: no module imports from a
//! layer above its own. Between the crates (`crates/support`, `crates/codex`, `crates/traffic`,
//! `crates/observe` and the main crate) Cargo enforces it, since a crate can only name the crates it depends on;
//! these checks read every crate's sources, so the layers inside one crate (`codex::protocol`
//! below `codex::client`) and the rules that are no imports (no bare spawn, no printing below
//! the face, no method name outside the table, no circles) hold everywhere.

use std::path::Path;

use crate::util::repo_root;

/// The layers, lowest first: (module path prefix, layer).
const LAYERS: &[(&str, usize)] = &[
    // The helpers and the typed errors (`support::error`).
    ("support", 0),
    // The Codex wire as data: it knows nothing of OpenClaw runs (the policy is in translate).
    ("codex::protocol", 0),
    ("config", 1),
    ("workspace", 2),
    ("skills", 2),
    ("routing", 3),
    ("render", 4),
    ("translate", 6),
    ("codex::client", 7),
    // The JSON Schema checks (they talk to no app-server).
    ("codex::schema", 7),
    // The model-traffic plane: the stub, the forwarder and capture (uses `error` and `support`).
    ("traffic", 7),
    ("artifacts", 8),
    // The service core both servers stand on (the durable state, the thread directory), and
    // the commands that read it (`doctor`, `client`).
    ("service", 9),
    ("app", 10),
    // The observation wing every face feeds (conformance, the live audit, the taps).
    ("observe", 10),
    ("server", 11),
    ("proxy", 11),
    // The command-line face both binaries share.
    ("face", 12),
];

/// The layer of a module path such as `codex::client::peer` or `skills`.
fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .filter(|(prefix, _)| module == *prefix || module.starts_with(&format!("{prefix}::")))
        .map(|(_, layer)| *layer)
        .next()
}

/// The module path of a source file (`src/codex/client/peer.rs` -> `codex::client::peer`).
fn module_of(file: &Path, src: &Path) -> String {
    let relative = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// The crates whose sources the checks read, each with the module path its `crate::` means
/// (the main crate's is the root; a crate below it names its folder).
const CRATES: &[(&str, &str)] = &[
    ("src", ""),
    ("crates/support/src", "support"),
    ("crates/codex/src", "codex"),
    ("crates/traffic/src", "traffic"),
    ("crates/observe/src", "observe"),
];

/// One source file of one crate: its path, its module path as the main crate names it
/// (`crates/codex/src/client/peer.rs` -> `codex::client::peer`) and its crate's namespace.
struct Source {
    file: std::path::PathBuf,
    module: String,
    namespace: &'static str,
}

/// Every Rust file of every crate in [`CRATES`], sorted.
fn sources() -> Vec<Source> {
    let mut out = Vec::new();
    for (dir, namespace) in CRATES {
        let src = repo_root().join(dir);
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        files.sort();
        for file in files {
            let inner = module_of(&file, &src);
            let module = match (*namespace, inner.as_str()) {
                ("", _) => inner,
                (namespace, "lib") => namespace.to_string(),
                (namespace, inner) => format!("{namespace}::{inner}"),
            };
            out.push(Source {
                file,
                module,
                namespace,
            });
        }
    }
    assert!(out.len() > 100, "the sources were read: {}", out.len());
    out
}

/// The module paths a source's code names, as the main crate names them: `crate::` paths
/// (a lower crate's put under its namespace), the lower crates by name (`clawbridge_codex::x`
/// is `codex::x`), and `super::` paths. The main crate's `crate::error` is `support::error`.
fn used_paths(code: &str, source: &Source) -> Vec<String> {
    let own = crate_paths(code).into_iter().map(|path| {
        if source.namespace.is_empty() {
            match path.strip_prefix("error") {
                Some(rest) if rest.is_empty() || rest.starts_with("::") => {
                    format!("support::error{rest}")
                }
                _ => path,
            }
        } else {
            format!("{}::{path}", source.namespace)
        }
    });
    let lower = CRATES
        .iter()
        .filter(|(_, namespace)| !namespace.is_empty())
        .flat_map(|(_, namespace)| {
            let marker = format!("clawbridge_{namespace}::");
            paths_after(code, &marker)
                .into_iter()
                .map(move |path| format!("{namespace}::{path}"))
        });
    let mut out: Vec<String> = own.chain(lower).collect();
    out.extend(super_paths(code, &source.module));
    out
}

/// Every `crate::a::b` path a source text names, grouped imports (`crate::{a, b::{c, d}}`)
/// expanded, cut to two segments.
fn crate_paths(text: &str) -> Vec<String> {
    paths_after(text, "crate::")
}

/// Every path after `marker` (`crate::`, `clawbridge_codex::`) in a source text, grouped
/// imports expanded, cut to two segments.
fn paths_after(text: &str, marker: &str) -> Vec<String> {
    let code = without_comments(text);
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find(marker) {
        // `clawbridge_codex::` is no `crate::` path, nor `$crate::` a module's.
        let before = rest[..at].chars().last();
        rest = &rest[at + marker.len()..];
        if before.is_some_and(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$') {
            continue;
        }
        let (paths, _) = use_tree(rest);
        out.extend(paths);
    }
    out.into_iter()
        .map(|path| {
            path.split("::")
                .filter(|segment| !segment.is_empty())
                .take(2)
                .collect::<Vec<_>>()
                .join("::")
        })
        .filter(|path| !path.is_empty())
        .collect()
}

/// A source text without its comment lines (doc comments name paths that are not imports).
fn without_comments(text: &str) -> String {
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parse `a::b::{c, d::{e}}` at the start of `text`: the expanded paths and the bytes read.
fn use_tree(text: &str) -> (Vec<String>, usize) {
    let trimmed = text.trim_start();
    let skipped = text.len() - trimmed.len();
    if let Some(group) = trimmed.strip_prefix('{') {
        let mut paths = Vec::new();
        let mut read = 1;
        loop {
            let (items, used) = use_tree(&group[read - 1..]);
            paths.extend(items);
            read += used;
            let after = group[read - 1..].trim_start();
            read += group[read - 1..].len() - after.len();
            match after.chars().next() {
                Some(',') => read += 1,
                Some('}') => return (paths, skipped + read + 1),
                _ => return (paths, skipped + read),
            }
        }
    }
    let path: String = trimmed
        .chars()
        .take_while(|ch| ch.is_alphanumeric() || *ch == '_' || *ch == ':')
        .collect();
    let read = skipped + path.len();
    if path.ends_with("::") && trimmed[path.len()..].starts_with('{') {
        let (inner, used) = use_tree(&trimmed[path.len()..]);
        let prefixed = inner
            .into_iter()
            .map(|item| format!("{path}{item}"))
            .collect();
        return (prefixed, read + used);
    }
    (vec![path], read)
}

/// The names `lib.rs` re-exports at the crate root (`pub use a::b::{C, D as E};`), each with
/// the module it comes from (`C` -> `a::b`), so `crate::C` counts as an import of `a::b`.
fn root_reexports(lib: &str) -> std::collections::HashMap<String, String> {
    let code: String = lib
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = std::collections::HashMap::new();
    for statement in code.split(';') {
        let Some(used) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let used: String = used.split_whitespace().collect::<Vec<_>>().join(" ");
        let (prefix, items) = match used.split_once('{') {
            Some((prefix, items)) => (prefix.to_string(), items.trim_end_matches('}').to_string()),
            None => match used.rsplit_once("::") {
                Some((prefix, item)) => (format!("{prefix}::"), item.to_string()),
                None => continue,
            },
        };
        for item in items.split(',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let (path, name) = match item.split_once(" as ") {
                Some((path, alias)) => (path.trim(), alias.trim()),
                None => (item, item.rsplit("::").next().unwrap_or(item)),
            };
            let full = format!("{prefix}{path}");
            let module = full.rsplit_once("::").map_or("", |(module, _)| module);
            out.insert(name.to_string(), module.trim_end_matches("::").to_string());
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_module_imports_from_a_layer_above_it() {
    let src = repo_root().join("src");
    let reexports = root_reexports(&std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs"));
    assert!(
        reexports.get("Endpoint").map(String::as_str) == Some("proxy::endpoint"),
        "the crate root's re-exports are read: {reexports:?}"
    );
    let mut violations = Vec::new();
    let mut checked = 0;
    for source in sources() {
        let module = &source.module;
        let Some(own) = layer_of(module) else {
            // lib.rs, the binaries (main.rs, bin/clawbridge-runtime.rs) are no layer, nor the
            // `codex` crate's root (its layers are its folders).
            assert!(
                ["lib", "main", "bin::clawbridge-runtime", "codex"].contains(&module.as_str()),
                "{module} is in no layer: add it to docs/architecture.md and LAYERS"
            );
            continue;
        };
        let text = std::fs::read_to_string(&source.file).expect("read");
        let code = code_of(&text);
        for path in used_paths(&code, &source) {
            // `crate::Name` through the main crate root's re-export is an import of its module.
            let first = path.split("::").next().unwrap_or_default();
            let path = match source.namespace {
                "" => reexports.get(first).cloned().unwrap_or(path),
                _ => path,
            };
            let Some(used) = layer_of(&path) else {
                continue;
            };
            checked += 1;
            if used > own {
                violations.push(format!("{module} (layer {own}) uses {path} (layer {used})"));
            }
        }
    }
    assert!(checked > 100, "the scan found the imports ({checked})");
    assert!(
        violations.is_empty(),
        "upward imports:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_scanner_sees_grouped_and_inline_paths() {
    let paths = crate_paths(
        "use crate::{app::state::WarningLedger, codex::{client::peer, protocol}};\nlet x = crate::server::codes::FORBIDDEN;\n// crate::app::ignored\n",
    );
    assert_eq!(
        paths,
        [
            "app::state",
            "codex::client",
            "codex::protocol",
            "server::codes"
        ]
    );
}

#[test]
fn root_reexports_name_their_modules() {
    let reexports = root_reexports(
        "//! doc\npub use proxy::endpoint::{\n    fetch_status, Endpoint,\n    MAX_MESSAGE_BYTES as ENDPOINT_MAX,\n};\npub use codex::client::pool::PoolConfig;\npub mod app;\n",
    );
    let get = |name: &str| reexports.get(name).map(String::as_str);
    assert_eq!(get("Endpoint"), Some("proxy::endpoint"));
    assert_eq!(get("fetch_status"), Some("proxy::endpoint"));
    assert_eq!(get("ENDPOINT_MAX"), Some("proxy::endpoint"));
    assert_eq!(get("PoolConfig"), Some("codex::client::pool"));
    assert_eq!(get("app"), None);
}

/// Every task has an owner (`support::task::Tasks`, or a tracker of the module's own): no
/// `tokio::spawn` in the library's code outside its tests.
#[test]
fn no_bare_spawn_outside_tests() {
    let files: Vec<_> = sources().into_iter().map(|source| source.file).collect();
    let mut bare = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        let code = code_of(&text);
        for (number, line) in code.lines().enumerate() {
            let line = line.trim_start();
            if line.starts_with("//") {
                continue;
            }
            if line.contains("tokio::spawn(") || line.contains("tokio::task::spawn(") {
                bare.push(format!("{}:{}", file.display(), number + 1));
            }
        }
    }
    assert!(files.len() > 50, "the sources were read");
    assert!(bare.is_empty(), "bare spawns: {bare:?}");
}

/// The layer table of docs/architecture.md says what `LAYERS` says: each folder (or file) of a
/// layer row, read as a module path, with the same number, and no layer missing from the page.
#[test]
fn the_architecture_page_numbers_the_layers_the_code_has() {
    let page = std::fs::read_to_string(repo_root().join("docs/architecture.md")).expect("page");
    let mut documented = std::collections::BTreeMap::new();
    for row in page.lines().filter(|line| line.starts_with("| ")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (Some(number), Some(folders)) = (cells.get(1), cells.get(3)) else {
            continue;
        };
        let Ok(number) = number.parse::<usize>() else {
            continue;
        };
        for path in folders.split('`').skip(1).step_by(2) {
            // `crates/codex/src/protocol/` is `codex::protocol`; `crates/support/` is `support`.
            let path = path.strip_prefix("crates/").unwrap_or(path);
            let module = path
                .trim_end_matches('/')
                .trim_end_matches(".rs")
                .replacen("/src", "", 1)
                .replace('/', "::");
            documented.insert(module, number);
        }
    }
    let expected: std::collections::BTreeMap<String, usize> = LAYERS
        .iter()
        .map(|(prefix, layer)| (prefix.to_string(), *layer))
        .collect();
    assert_eq!(
        documented, expected,
        "docs/architecture.md's layer table vs LAYERS"
    );
}

/// The Codex method table (`codex/protocol/table.rs`) is the one place a method name is spelled:
/// no other source file of `src/` writes one as a string outside its tests (`error` and
/// `warning` are left out: they are JSON keys and labels too).
#[test]
fn no_codex_method_is_spelled_outside_the_table() {
    let table = std::fs::read_to_string(repo_root().join("crates/codex/src/protocol/table.rs"))
        .expect("table");
    let flows = [
        "Request",
        "ClientNotification",
        "ServerRequest",
        "Notification",
    ];
    let names: Vec<String> = table
        .lines()
        .filter_map(|line| {
            let (_, rest) = line.split_once(" = \"")?;
            let (name, after) = rest.split_once("\", ")?;
            let flow = after.split(',').next()?;
            flows.contains(&flow).then(|| name.to_string())
        })
        .filter(|name| name != "error" && name != "warning")
        .collect();
    assert!(names.len() > 40, "the table was read: {names:?}");
    let files: Vec<_> = sources().into_iter().map(|source| source.file).collect();
    let mut spelled = Vec::new();
    for file in files
        .iter()
        .filter(|file| !file.ends_with("crates/codex/src/protocol/table.rs"))
    {
        let text = std::fs::read_to_string(file).expect("read");
        let code = code_of(&text);
        for (number, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for name in &names {
                if line.contains(&format!("\"{name}\"")) {
                    spelled.push(format!("{}:{}: {name}", file.display(), number + 1));
                }
            }
        }
    }
    assert!(
        spelled.is_empty(),
        "method names outside the table: {spelled:#?}"
    );
}

/// The library prints nothing itself: below the face (`src/face/`, the binaries), output goes
/// through what the face hands in (`support::console::Console`, callbacks), never straight to
/// stdout or stderr.
#[test]
fn only_the_face_prints() {
    let src = repo_root().join("src");
    let files: Vec<_> = sources().into_iter().map(|source| source.file).collect();
    let face = |file: &Path| {
        let Ok(relative) = file.strip_prefix(&src) else {
            return false;
        };
        relative.starts_with("face")
            || relative.starts_with("bin")
            || relative == Path::new("main.rs")
    };
    let mut printing = Vec::new();
    for file in files.iter().filter(|file| !face(file)) {
        let text = std::fs::read_to_string(file).expect("read");
        let code = code_of(&text);
        for (number, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let prints = [
                "println!(",
                "eprintln!(",
                "print!(",
                "eprint!(",
                "std::io::stdout()",
                "std::io::stderr()",
                "dbg!(",
            ]
            .iter()
            .any(|call| line.contains(call));
            if prints {
                printing.push(format!("{}:{}", file.display(), number + 1));
            }
        }
    }
    assert!(
        printing.is_empty(),
        "printing below the face: {printing:#?}"
    );
}

/// No two modules import each other (cut to two segments: `traffic::forward` and
/// `traffic::capture` once did).
#[test]
fn no_two_modules_import_each_other() {
    let cut = |path: &str| path.split("::").take(2).collect::<Vec<_>>().join("::");
    let mut edges = std::collections::BTreeSet::new();
    for source in sources() {
        let module = cut(&source.module);
        let text = std::fs::read_to_string(&source.file).expect("read");
        let code = code_of(&text);
        for path in used_paths(&code, &source) {
            let used = cut(&path);
            if used != module
                && !module.starts_with(&format!("{used}::"))
                && !used.starts_with(&format!("{module}::"))
            {
                edges.insert((module.clone(), used));
            }
        }
    }
    assert!(edges.len() > 100, "the imports were read: {}", edges.len());
    let circles: Vec<_> = edges
        .iter()
        .filter(|(a, b)| a < b && edges.contains(&(b.clone(), a.clone())))
        .collect();
    assert!(
        circles.is_empty(),
        "modules that import each other: {circles:?}"
    );
}

/// A source file without its test modules: each top-level `#[cfg(test)] mod NAME { ... }` (to
/// its closing brace at the start of a line) or `#[cfg(test)] mod NAME;` is left out, and what
/// follows one is read (production code after a mid-file test module is checked too).
fn code_of(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        let opens_test_module = line.trim_end() == "#[cfg(test)]"
            && lines.peek().is_some_and(|next| {
                next.starts_with("mod ")
                    || next.starts_with("pub(crate) mod ")
                    || next.starts_with("pub mod ")
            });
        // A `#[cfg(test)]` function (a helper the tests share) is test code too.
        let opens_test_function = line.trim_end() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.starts_with("pub fn ") || next.starts_with("fn "));
        if opens_test_function {
            for inner in lines.by_ref() {
                if inner.trim_end() == "}" {
                    break;
                }
            }
            continue;
        }
        if !opens_test_module {
            code.push_str(line);
            continue;
        }
        let Some(header) = lines.next() else { break };
        if header.trim_end().ends_with(';') {
            continue;
        }
        // Skip to the module's closing brace: the first line that is `}` at column 0.
        for inner in lines.by_ref() {
            if inner.trim_end() == "}" {
                break;
            }
        }
    }
    code
}

/// Every `super::a::b` path a source text names, made absolute from `module` (the file's own
/// module path: `super` of `proxy::endpoint::connection` is `proxy::endpoint`; a `mod.rs`
/// file is its folder's module, so `super` of `proxy::endpoint` is `proxy`).
fn super_paths(text: &str, module: &str) -> Vec<String> {
    let code = without_comments(text);
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("super::") {
        // `self::super::` or an identifier ending in `super` is not a path start.
        let before = &rest[..at];
        let starts = before
            .chars()
            .last()
            .is_none_or(|ch| !(ch.is_alphanumeric() || ch == '_' || ch == ':'));
        rest = &rest[at + "super::".len()..];
        if !starts {
            continue;
        }
        let mut base: Vec<&str> = module.split("::").collect();
        base.pop();
        while let Some(more) = rest.strip_prefix("super::") {
            base.pop();
            rest = more;
        }
        let (paths, _) = use_tree(rest);
        let prefix = base.join("::");
        out.extend(paths.into_iter().map(|path| {
            if prefix.is_empty() {
                path
            } else {
                format!("{prefix}::{path}")
            }
        }));
    }
    out
}

#[test]
fn test_modules_are_cut_and_what_follows_them_is_read() {
    let text = "use crate::a::b;\n#[cfg(test)]\nmod tests {\n    use crate::z::y;\n}\nfn after() { crate::c::d(); }\n#[cfg(test)]\nmod more;\nfn last() {}\n";
    let code = code_of(text);
    assert!(
        code.contains("crate::a::b") && code.contains("crate::c::d") && code.contains("fn last")
    );
    assert!(!code.contains("crate::z::y") && !code.contains("mod more"));
    // A test helper at the top level is cut to its closing brace; what follows is read.
    let helper = code_of(
        "#[cfg(test)]\npub fn token() -> String {\n    json!({}).to_string()\n}\nfn kept() {}\n",
    );
    assert!(
        !helper.contains("json!") && helper.contains("fn kept"),
        "{helper}"
    );
    assert_eq!(
        super_paths(
            "use super::feed::{Feed, Followed};\nlet x = super::super::stall::K;\n",
            "proxy::endpoint::connection"
        ),
        [
            "proxy::endpoint::feed::Feed",
            "proxy::endpoint::feed::Followed",
            "proxy::stall::K"
        ]
    );
}

/// docs/development.md's layout names paths that exist: each entry of its first column (a
/// file or folder, or several joined by commas) is in the repository, and every crate's
/// folder is named (the page once listed files long moved).
#[test]
fn the_development_page_lays_out_paths_that_exist() {
    let root = repo_root();
    let page = std::fs::read_to_string(root.join("docs/development.md")).expect("page");
    let (_, after) = page.split_once("## Layout").expect("a layout section");
    let block = after.split("```").nth(1).expect("a layout block");
    let mut named = Vec::new();
    let mut missing = Vec::new();
    for line in block
        .lines()
        .filter(|line| !line.starts_with(' ') && !line.is_empty())
    {
        let first = line.split("  ").next().unwrap_or_default().trim();
        for path in first.split(", ") {
            named.push(path.to_string());
            if !root.join(path).exists() {
                missing.push(path.to_string());
            }
        }
    }
    assert!(named.len() > 20, "the layout was read: {named:?}");
    assert!(
        missing.is_empty(),
        "docs/development.md names what is not there: {missing:?}"
    );
    for (dir, _) in CRATES {
        let folder = dir.trim_end_matches("/src").trim_end_matches("src");
        if !folder.is_empty() {
            assert!(
                named
                    .iter()
                    .any(|path| path.trim_end_matches('/') == folder),
                "docs/development.md's layout does not name {folder}"
            );
        }
    }
}

/// Every crate of the workspace takes its version from `[workspace.package]`: the codex crate's
/// `initialize` (`clientInfo.version`) and the traffic crate's exporter name clawbridge's
/// version through their own `CARGO_PKG_VERSION`, which must be `clawbridge --version`'s.
#[test]
fn every_crate_has_the_workspace_version() {
    let root = repo_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        manifest.contains("[workspace.package]\nversion = \""),
        "{manifest}"
    );
    for (dir, _) in CRATES {
        let folder = root.join(dir.trim_end_matches("src"));
        let text = std::fs::read_to_string(folder.join("Cargo.toml")).expect("a manifest");
        let (_, package) = text.split_once("[package]\n").expect("a [package] section");
        let package = package.split("\n[").next().unwrap_or_default();
        assert!(
            package.contains("\nversion.workspace = true\n"),
            "{}: the version is not the workspace's",
            folder.display()
        );
    }
}

/// What clawbridge writes on the Codex wire is typed (`codex::protocol::methods`, `answers`,
/// `wire::Outgoing`): no `json!` in the production code of the codex crate's wire and runtime,
/// nor of the endpoint's relay.
#[test]
fn the_codex_wire_is_written_from_types() {
    let allowed: [(&str, usize); 0] = [];
    let root = repo_root();
    let mut found = Vec::new();
    let mut files = Vec::new();
    for dir in [
        "crates/codex/src/protocol",
        "crates/codex/src/client",
        "src/proxy/endpoint",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 20, "the files were read: {}", files.len());
    for file in &files {
        let code = code_of(&std::fs::read_to_string(file).expect("read"));
        let count = code
            .lines()
            .filter(|line| !line.trim_start().starts_with("//") && line.contains("json!("))
            .count();
        let relative = file
            .strip_prefix(&root)
            .expect("in the repository")
            .to_string_lossy()
            .to_string();
        let allowance = allowed
            .iter()
            .find(|(path, _)| *path == relative)
            .map_or(0, |(_, count)| *count);
        if count > allowance {
            found.push(format!("{relative}: {count} json!"));
        }
    }
    assert!(found.is_empty(), "json! on the Codex wire: {found:#?}");
}

/// The lower crates export their modules whole, so the compiler's dead-code lint no longer sees
/// a public item of theirs that nothing uses. This check stands in for it: every public item a
/// lower crate defines (a function, type, trait, constant or static outside its tests) must be
/// named somewhere besides its definition, in any crate, test, bench or example.
#[test]
fn every_public_item_of_a_lower_crate_is_used() {
    let root = repo_root();
    let mut files = Vec::new();
    for dir in ["src", "crates", "tests", "benches", "examples"] {
        if root.join(dir).is_dir() {
            rust_files(&root.join(dir), &mut files);
        }
    }
    let mut uses: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read source");
        for word in identifiers(&without_comments(&text)) {
            *uses.entry(word.to_string()).or_default() += 1;
        }
    }
    let mut unused = Vec::new();
    for source in sources()
        .iter()
        .filter(|source| !source.namespace.is_empty())
    {
        let text = std::fs::read_to_string(&source.file).expect("read source");
        for name in public_items(&code_of(&text)) {
            if uses.get(&name).copied().unwrap_or(0) <= 1 {
                unused.push(format!("{} ({})", name, source.module));
            }
        }
    }
    assert!(
        unused.is_empty(),
        "public items of a lower crate that nothing names: {unused:?}"
    );
}

/// The identifiers of a source text, in order.
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
}

/// The names of the public items a source text defines (`pub fn`, `pub struct`, …, at any
/// indentation, so methods of an `impl` count).
fn public_items(code: &str) -> Vec<String> {
    const KINDS: [&str; 9] = [
        "fn ",
        "async fn ",
        "const fn ",
        "struct ",
        "enum ",
        "trait ",
        "type ",
        "const ",
        "static ",
    ];
    code.lines()
        .filter_map(|line| line.trim_start().strip_prefix("pub "))
        .filter_map(|rest| KINDS.iter().find_map(|kind| rest.strip_prefix(kind)))
        .filter_map(|rest| identifiers(rest).next())
        .map(str::to_string)
        .collect()
}

#[test]
fn public_items_are_read_at_any_indentation() {
    let code = "pub fn a() {}\nimpl X {\n    pub async fn b(&self) {}\n    pub(crate) fn c() {}\n    pub const D: u8 = 1;\n}\npub struct E<T>(T);\n";
    assert_eq!(public_items(code), ["a", "b", "D", "E"]);
}

/// What the observers read of Codex's messages goes through the lenient typed views
/// (`codex::protocol::observed`, the answer views of `inbound`): the span book, the
/// transcript's filing, the observer, the live audit and the capture's knowledge of a
/// conversation index no message, params or result by field name.
#[test]
fn the_observers_read_the_codex_wire_through_views() {
    let root = repo_root();
    let files = [
        "crates/traffic/src/trace/spans.rs",
        "crates/traffic/src/transcript.rs",
        "crates/traffic/src/capture/live.rs",
        "crates/observe/src/lib.rs",
        "crates/observe/src/audit.rs",
    ];
    let mut found = Vec::new();
    for file in files {
        let code = code_of(&std::fs::read_to_string(root.join(file)).expect("read"));
        for line in code.lines() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let indexes = ["message", "params", "result"].iter().any(|name| {
                line.contains(&format!("{name}[\"")) || line.contains(&format!("{name}.get(\""))
            });
            if indexes {
                found.push(format!("{file}: {}", line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "Codex messages read by field name: {found:#?}"
    );
}
