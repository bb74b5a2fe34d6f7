# shellcheck shell=bash
# `with_progress LABEL COMMAND...`: run COMMAND; on an interactive terminal (stderr is one, and
# not CI), show LABEL with the seconds elapsed while it runs and the total when it ends. Anywhere
# else it just runs COMMAND (logs stay free of carriage returns). The command's exit status is
# kept.
with_progress() {
  local label="$1"
  shift
  if [ ! -t 2 ] || [ -n "${CI:-}" ]; then
    "$@"
    return
  fi
  local started=$SECONDS status=0
  "$@" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    printf '\r\033[K%s · %d s' "$label" "$((SECONDS - started))" >&2
    sleep 0.5
  done
  wait "$pid" || status=$?
  printf '\r\033[K%s · %d s%s\n' "$label" "$((SECONDS - started))" "$([ "$status" -eq 0 ] || echo " (failed)")" >&2
  return "$status"
}
