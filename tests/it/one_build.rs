//! One build for the tests and the product: `cargo test` compiles every dependency, and the
//! workspace's crates, with the features `cargo build` and `cargo install` compile them with, so
//! the product's binaries (the README's `scripts/demo`, the install checks) reuse the test
//! build's artifacts instead of compiling tokio and everything above it a second time (on a fresh
//! machine, twice for every dependency above it). A dev-dependency may add crates, never a
//! feature to a crate the product compiles (docs/development.md, "One build").

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use crate::util::repo_root;

/// Each package of the build (name and version, and its source when not the registry) with the
/// features it is compiled with, as `cargo tree` resolves them for `edges`.
fn features(edges: &str) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args([
            "tree", "--frozen", "--prefix", "none", "--format", "{p}|{f}",
        ])
        .args(["--edges", edges])
        .current_dir(repo_root())
        .output()
        .expect("cargo tree");
    assert!(
        output.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Some((package, features)) = line.split_once('|') else {
            continue;
        };
        let features = features.trim_end_matches(" (*)");
        packages
            .entry(package.trim_end_matches(" (proc-macro)").to_string())
            .or_default()
            .insert(features.trim().to_string());
    }
    packages
}

/// Protection: a dev-dependency that turns on a feature of a crate the product compiles (tokio's
/// `test-util`, jsonrpsee's clients on the server's core, `opentelemetry_sdk`'s `testing`, a
/// workspace crate's `testing`) fails here, naming the crate and both feature lists.
#[test]
fn the_tests_add_no_feature_to_a_crate_the_product_compiles() {
    let product = features("normal,build");
    let tests = features("normal,build,dev");
    assert!(
        product.keys().any(|package| package.starts_with("tokio v"))
            && product.len() > 100
            && tests.len() > product.len(),
        "cargo tree was read: {} packages for the product, {} with the tests'",
        product.len(),
        tests.len()
    );
    let differing: Vec<String> = product
        .iter()
        .filter_map(|(package, built)| {
            let tested = tests.get(package)?;
            (tested != built)
                .then(|| format!("{package}: {built:?} for the product, {tested:?} with the tests"))
        })
        .collect();
    assert!(
        differing.is_empty(),
        "the tests' build differs from the product's (give the product the feature, or the tests \
         another way):\n{}",
        differing.join("\n")
    );
}
