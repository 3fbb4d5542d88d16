#!/usr/bin/env bash
# Run the pinned promtool (Prometheus' rule checker), building it from the Go module proxy on
# first use (like tools/helm.sh).
#
#   tools/promtool.sh test rules rules-test.yaml  # any promtool arguments
#   tools/promtool.sh --path                      # print the binary's path (building it if needed)
#
# The binary lives in ${EOS_BRIDGE_HOME:-~/.cache/eos-bridge}/bin/promtool-<version>. Change
# PROMETHEUS_VERSION here (not in the environment) to move the pin. Prometheus 3.x publishes
# its Go module as v0.3MM.P for release 3.MM.P.
set -euo pipefail

PROMETHEUS_VERSION=v0.316.0
cache="${EOS_BRIDGE_HOME:-$HOME/.cache/eos-bridge}"
bin="$cache/bin/promtool-$PROMETHEUS_VERSION"

if [[ ! -x "$bin" ]]; then
  command -v go >/dev/null || { echo "tools/promtool.sh: 'go' is needed to build promtool $PROMETHEUS_VERSION" >&2; exit 1; }
  mkdir -p "$cache/bin"
  staging="$(mktemp -d "$cache/bin/.promtool-build.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  echo "tools/promtool.sh: building promtool $PROMETHEUS_VERSION (once) into $bin" >&2
  # Stamp the release version that `promtool --version` prints, as Prometheus' own build does
  # (v0.316.0 is release 3.16.0).
  release="$(sed 's/^v0\.3\([0-9]*\)\.\([0-9]*\)$/3.\1.\2/; s/^3\.0*\([0-9]\)/3.\1/' <<<"$PROMETHEUS_VERSION")"
  # -mod=mod: resolve Prometheus' own go.mod through GOPROXY. remove_all_sd (Prometheus' own
  # build tag) leaves out the service-discovery plugins (cloud SDKs, Kubernetes client): rule
  # checks and tests do not use them, and the first build compiles far fewer packages.
  GOBIN="$staging" GOFLAGS="-mod=mod" CGO_ENABLED=0 \
    go install -trimpath -tags remove_all_sd \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release" \
    "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"
  mv "$staging/promtool" "$bin"
fi

if [[ "${1:-}" == "--path" ]]; then
  echo "$bin"
  exit 0
fi
exec "$bin" "$@"
