#!/usr/bin/env bash
# Run the pinned kube-score, building it from the Go module proxy on first use (like tools/helm.sh).
#
#   tools/kube-score.sh score rendered.yaml       # any kube-score arguments
#   tools/kube-score.sh --path                    # print the binary's path (building it if needed)
#
# The binary lives in ${EOS_BRIDGE_HOME:-~/.cache/eos-bridge}/bin/kube-score-<version>. Change
# KUBE_SCORE_VERSION here (not in the environment) to move the pin.
set -euo pipefail

KUBE_SCORE_VERSION=v1.20.0
cache="${EOS_BRIDGE_HOME:-$HOME/.cache/eos-bridge}"
bin="$cache/bin/kube-score-$KUBE_SCORE_VERSION"

if [[ ! -x "$bin" ]]; then
  command -v go >/dev/null || { echo "tools/kube-score.sh: 'go' is needed to build kube-score $KUBE_SCORE_VERSION" >&2; exit 1; }
  mkdir -p "$cache/bin"
  staging="$(mktemp -d "$cache/bin/.kube-score-build.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  echo "tools/kube-score.sh: building kube-score $KUBE_SCORE_VERSION (once) into $bin" >&2
  # -mod=mod: resolve kube-score's own go.mod through GOPROXY. The version stamp is what its
  # release build (goreleaser) sets, so `kube-score version` names the pin.
  GOBIN="$staging" GOFLAGS="-mod=mod" CGO_ENABLED=0 \
    go install -trimpath -ldflags "-s -w -X main.version=$KUBE_SCORE_VERSION" \
    "github.com/zegl/kube-score/cmd/kube-score@$KUBE_SCORE_VERSION"
  mv "$staging/kube-score" "$bin"
fi

if [[ "${1:-}" == "--path" ]]; then
  echo "$bin"
  exit 0
fi
exec "$bin" "$@"
