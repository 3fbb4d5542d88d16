#!/usr/bin/env bash
# The one builder of pinned Go tools (helm, kube-score, Toxiproxy, promtool): sourced by their wrappers.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/go-binary.sh"
#   go_binary_run NAME VERSION PACKAGE LDFLAGS_FUNCTION "$@"
#
# On first use `go install PACKAGE@VERSION` (through GOPROXY, -mod=mod so the tool's own go.mod
# decides its dependencies, static, -trimpath) builds the binary into
# ${EOS_BRIDGE_HOME:-~/.cache/eos-bridge}/bin/NAME-VERSION; later runs find it there and never
# call go. LDFLAGS_FUNCTION (a shell function of the wrapper) prints the -ldflags; it runs only
# when building, so it may ask go for the tool's go.mod. Then `--path` as the only argument
# prints the binary's path; anything else runs the binary with those arguments. A wrapper may
# set GO_BINARY_TAGS (a shell variable) to build with those Go build tags.

go_binary_run() {
  local name="$1" version="$2" package="$3" ldflags_function="$4"
  shift 4
  local who="tools/$(basename "$0")"
  local cache="${EOS_BRIDGE_HOME:-$HOME/.cache/eos-bridge}"
  local bin="$cache/bin/$name-$version" lock=""
  if [[ ! -x "$bin" ]]; then
    mkdir -p "$cache/bin"
    # One build at a time per tool (tools/prefetch.sh may be building it already): wait for
    # the lock, then look again.
    exec {lock}>"$cache/bin/.$name-$version.lock"
    flock "$lock"
  fi
  if [[ ! -x "$bin" ]]; then
    command -v go >/dev/null || {
      echo "$who: 'go' is needed to build $name $version (https://go.dev/doc/install)" >&2
      exit 1
    }
    mkdir -p "$cache/bin"
    # Built aside and moved in whole: a concurrent or interrupted build never leaves half a binary.
    local staging
    staging="$(mktemp -d "$cache/bin/.$name-build.XXXXXX")"
    trap 'rm -rf "$staging"' EXIT
    echo "$who: building $name $version (once) into $bin" >&2
    local ldflags
    ldflags="$("$ldflags_function")"
    GOBIN="$staging" GOFLAGS="-mod=mod" CGO_ENABLED=0 \
      go install -trimpath ${GO_BINARY_TAGS:+-tags "$GO_BINARY_TAGS"} -ldflags "$ldflags" \
      "$package@$version"
    mv "$staging/$(basename "$package")" "$bin"
  fi
  if [[ -n "${lock:-}" ]]; then exec {lock}>&-; fi  # the tool itself must not hold the lock
  if [[ "${1:-}" == "--path" ]]; then
    echo "$bin"
    exit 0
  fi
  exec "$bin" "$@"
}
