#!/usr/bin/env bash
# Run the pinned promtool (Prometheus' rule checker), building it from the Go module proxy on
# first use (tools/go-binary.sh).
#
#   tools/promtool.sh test rules rules-test.yaml  # any promtool arguments
#   tools/promtool.sh --path                      # print the binary's path (building it if needed)
#
# The binary lives in ${EOS_BRIDGE_HOME:-~/.cache/eos-bridge}/bin/promtool-<version>. Change
# PROMETHEUS_VERSION here (not in the environment) to move the pin. Prometheus 3.x publishes
# its Go module as v0.3MM.P for release 3.MM.P.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/go-binary.sh"

PROMETHEUS_VERSION=v0.316.0

# remove_all_sd (Prometheus' own build tag) leaves out the service-discovery plugins (cloud
# SDKs, Kubernetes client): rule checks and tests do not use them, and the first build
# compiles far fewer packages.
GO_BINARY_TAGS=remove_all_sd

# Stamp the release version `promtool --version` prints, as Prometheus' own build does.
ldflags() {
  local release
  release="$(sed 's/^v0\.3\([0-9]*\)\.\([0-9]*\)$/3.\1.\2/; s/^3\.0*\([0-9]\)/3.\1/' <<<"$PROMETHEUS_VERSION")"
  echo "-s -w -X github.com/prometheus/common/version.Version=$release"
}

go_binary_run promtool "$PROMETHEUS_VERSION" \
  "github.com/prometheus/prometheus/cmd/promtool" ldflags "$@"
