# The tools cache is keyed by version and integrity: `scripts/lib/tool-pins.tsv` pins each npm
# package the tests install to npm's integrity hash of its tarball. Sourced by the install
# scripts.
#
# pinned_integrity PACKAGE VERSION: the pinned hash, or nothing when the version is not pinned.
pinned_integrity() {
  awk -F '\t' -v package="$1" -v version="$2" \
    '$1 == package && $2 == version { print $3; exit }' \
    "$(dirname "${BASH_SOURCE[0]}")/tool-pins.tsv"
}

# installed_integrity PREFIX PACKAGE VERSION: the integrity npm recorded for PACKAGE@VERSION in
# PREFIX's package-lock (`node_modules/.package-lock.json`), or nothing.
installed_integrity() {
  local lock="$1/node_modules/.package-lock.json"
  [ -f "$lock" ] || return 0
  awk -v key="\"node_modules/$2\": {" -v version="$3" '
    index($0, key) { inside = 1; next }
    inside && /^    }/ { exit }
    inside && /"version":/ { found = index($0, "\"" version "\"") > 0 }
    inside && /"integrity":/ { sub(/.*"integrity": "/, ""); sub(/".*/, ""); hash = $0 }
    END { if (found) print hash }
  ' "$lock"
}

# install_matches PREFIX PACKAGE VERSION: true when PREFIX holds PACKAGE@VERSION with the pinned
# integrity (or, for a version not pinned, any integrity).
install_matches() {
  local installed pinned
  installed="$(installed_integrity "$1" "$2" "$3")"
  [ -n "$installed" ] || return 1
  pinned="$(pinned_integrity "$2" "$3")"
  [ -z "$pinned" ] || [ "$installed" = "$pinned" ]
}

# check_install PREFIX PACKAGE VERSION: after an install, fail loudly when what npm installed is
# not the pinned package.
check_install() {
  if ! install_matches "$1" "$2" "$3"; then
    echo "$2@$3 in $1 is not the pinned package (integrity $(installed_integrity "$1" "$2" "$3" || true), pinned $(pinned_integrity "$2" "$3"))" >&2
    return 1
  fi
}
