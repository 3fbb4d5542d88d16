#!/usr/bin/env bash
# Run the pinned Toxiproxy server, building it from the Go module proxy on first use.
#
#   tools/toxiproxy.sh -host 127.0.0.1 -port 8474    # any toxiproxy-server arguments
#   tools/toxiproxy.sh --path                         # print the binary's path (building it if needed)
#
# The chaos tests (tests/chaos/) put it between the bridge and the brokers to inject latency,
# black holes, bandwidth limits and connection resets. The binary lives in
# ${EOS_BRIDGE_HOME:-~/.cache/eos-bridge}/bin/toxiproxy-server-<version>; a second run finds it
# there and does not rebuild. Change TOXIPROXY_VERSION here to move the pin.
set -euo pipefail

TOXIPROXY_VERSION=v2.5.0
cache="${EOS_BRIDGE_HOME:-$HOME/.cache/eos-bridge}"
bin="$cache/bin/toxiproxy-server-$TOXIPROXY_VERSION"

if [[ ! -x "$bin" ]]; then
  command -v go >/dev/null || { echo "tools/toxiproxy.sh: 'go' is needed to build toxiproxy $TOXIPROXY_VERSION" >&2; exit 1; }
  mkdir -p "$cache/bin"
  staging="$(mktemp -d "$cache/bin/.toxiproxy-build.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  echo "tools/toxiproxy.sh: building toxiproxy $TOXIPROXY_VERSION (once) into $bin" >&2
  # -mod=mod: resolve toxiproxy's own go.mod through GOPROXY; the version is stamped as its
  # release build does, so `toxiproxy-server -version` names the pin.
  GOBIN="$staging" GOFLAGS="-mod=mod" CGO_ENABLED=0 \
    go install -trimpath -ldflags "-s -w -X github.com/Shopify/toxiproxy/v2.Version=$TOXIPROXY_VERSION" \
    "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
  mv "$staging/server" "$bin"
fi

if [[ "${1:-}" == "--path" ]]; then
  echo "$bin"
  exit 0
fi
exec "$bin" "$@"
