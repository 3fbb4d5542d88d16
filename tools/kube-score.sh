#!/usr/bin/env bash
# Run the pinned kube-score, building it from the Go module proxy on first use (tools/go-binary.sh).
#
#   tools/kube-score.sh score rendered.yaml       # any kube-score arguments
#   tools/kube-score.sh --path                    # print the binary's path (building it if needed)
#
# The binary lives in ${EOS_BRIDGE_HOME:-~/.cache/eos-bridge}/bin/kube-score-<version>. Change
# KUBE_SCORE_VERSION here (not in the environment) to move the pin.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/go-binary.sh"

KUBE_SCORE_VERSION=v1.20.0

# The version stamp its release build (goreleaser) sets, so `kube-score version` names the pin.
ldflags() { echo "-s -w -X main.version=$KUBE_SCORE_VERSION"; }

go_binary_run kube-score "$KUBE_SCORE_VERSION" \
  "github.com/zegl/kube-score/cmd/kube-score" ldflags "$@"
