# shellcheck shell=bash
# The supported Codex CLI versions, read from the one table fixtures/codex-versions.tsv (which
# crates/codex/build.rs turns into the handshake's and doctor's constants).
# `codex_version pinned`: the pinned version; `codex_version newest`: the newest row;
# `codex_version tested`: every row that is not the pinned one, oldest first.
codex_version() {
  local table
  table="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/fixtures/codex-versions.tsv"
  case "$1" in
    pinned) awk -F'\t' '!/^#/ && $2 == "pinned" { print $1 }' "$table" ;;
    newest) awk -F'\t' '!/^#/ && NF >= 2 { print $1 }' "$table" | sort -V | tail -n 1 ;;
    tested) awk -F'\t' '!/^#/ && $2 == "tested" { print $1 }' "$table" | sort -V ;;
    *) echo "codex_version: pinned, newest or tested" >&2; return 2 ;;
  esac
}
