#!/usr/bin/env bash
# Run the pinned checkov from its own virtualenv, created from PyPI on first use.
#
#   tools/checkov.sh -f rendered.yaml --framework kubernetes     # any checkov arguments
#   tools/checkov.sh --path                                      # print the executable's path
#
# Not in the project's dev extra: checkov pins packaging<24 and pytest needs packaging>=24, so
# the two cannot share one environment. The venv lives in
# ${EOS_BRIDGE_HOME:-~/.cache/eos-bridge}/checkov-<version>; change CHECKOV_VERSION here to move
# the pin.
set -euo pipefail

CHECKOV_VERSION=3.3.30
cache="${EOS_BRIDGE_HOME:-$HOME/.cache/eos-bridge}"
venv="$cache/checkov-$CHECKOV_VERSION"
bin="$venv/bin/checkov"

# A venv's scripts name their interpreter by absolute path, so it is built in place; the
# marker file says the install finished (a half-built venv is removed and built again).
if [[ ! -e "$venv/.complete" ]]; then
  # One install at a time (tools/prefetch.sh may be installing it already): wait, look again.
  mkdir -p "$cache"
  exec {lock}>"$cache/.checkov-$CHECKOV_VERSION.lock"
  flock "$lock"
fi
if [[ ! -e "$venv/.complete" ]]; then
  python="$(command -v python3.11 || command -v python3)"
  echo "tools/checkov.sh: installing checkov $CHECKOV_VERSION (once) into $venv" >&2
  rm -rf "$venv"
  mkdir -p "$cache"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "checkov==$CHECKOV_VERSION" >&2
  touch "$venv/.complete"
fi
if [[ -n "${lock:-}" ]]; then exec {lock}>&-; fi  # checkov itself must not hold the lock

if [[ "${1:-}" == "--path" ]]; then
  echo "$bin"
  exit 0
fi
exec "$bin" "$@"
