#!/usr/bin/env bash
# Run the pinned Toxiproxy server, building it from the Go module proxy on first use
# (tools/go-binary.sh).
#
#   tools/toxiproxy.sh -host 127.0.0.1 -port 8474    # any toxiproxy-server arguments
#   tools/toxiproxy.sh --path                         # print the binary's path (building it if needed)
#
# The chaos tests (tests/chaos/) put it between the bridge and the brokers to inject latency,
# black holes, bandwidth limits and connection resets. The binary lives in
# ${EOS_BRIDGE_HOME:-~/.cache/eos-bridge}/bin/toxiproxy-server-<version>; a second run finds it
# there and does not rebuild. Change TOXIPROXY_VERSION here to move the pin.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/go-binary.sh"

TOXIPROXY_VERSION=v2.5.0

# Stamped as its release build does, so `toxiproxy-server -version` names the pin.
ldflags() { echo "-s -w -X github.com/Shopify/toxiproxy/v2.Version=$TOXIPROXY_VERSION"; }

go_binary_run toxiproxy-server "$TOXIPROXY_VERSION" \
  "github.com/Shopify/toxiproxy/v2/cmd/server" ldflags "$@"
