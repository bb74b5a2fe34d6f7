# The pinned tools the tests need (Codex, Node, OpenClaw, Phoenix, Prometheus) live in a
# per-user cache outside the clone, as cargo keeps crates in ~/.cargo: a fresh machine installs
# them once, and every later clone on it (a CI run is a clean clone) reuses them. `.tools/` in the
# clone is a link to the cache:
#   $CLAWBRIDGE_TOOLS_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/clawbridge/tools.
# Each install is keyed by its version in its folder's name (codex-0.171.0, node-24.16.0,
# openclaw-2026.9.6, ...) and by the integrity hash pinned for it (scripts/lib/tool-pins.tsv,
# checked by scripts/lib/pins.sh against the install's package-lock before it is reused, and
# after a fresh install); one Node.js serves every tool (scripts/lib/node.sh).
# A `.tools/` that is already a folder (a clone from before the cache) is used as it is;
# CLAWBRIDGE_TOOLS_IN_CLONE=1 makes a new one a folder too.
#
# tools_dir ROOT: make sure ROOT/.tools exists, and print its real path. The installs work under
# the real path, so what records absolute paths (OpenClaw's plugin install, Python's venv) names
# the cache, which outlives the clone.
tools_dir() {
  local root="$1" link="$1/.tools"
  if [ ! -e "$link" ] && [ ! -L "$link" ] && [ -z "${CLAWBRIDGE_TOOLS_IN_CLONE:-}" ]; then
    local cache="${CLAWBRIDGE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clawbridge/tools}"
    mkdir -p "$cache"
    # Another install script may link it at the same moment: either link is the same.
    ln -s "$cache" "$link" 2>/dev/null || true
  fi
  # A link whose cache was removed (a cleaned ~/.cache) gets its folder back.
  if [ -L "$link" ] && [ ! -e "$link" ]; then
    mkdir -p "$(readlink "$link")"
  fi
  mkdir -p "$link"
  (cd "$link" && pwd -P)
}

# tool_lock TOOLS NAME: hold the cache's lock for the tool NAME until this script exits. Two
# scripts on one machine (two CI runs, a test running scripts/demo beside scripts/test) may ask
# for the same tool at once: the second waits while the first checks or installs, then finds the
# install made, instead of removing it under the first's feet to make its own.
tool_lock() {
  local fd
  exec {fd}>"$1/.$2.lock"
  flock "$fd"
}
