#!/usr/bin/env bash
# Run the pinned helm CLI, building it from the Go module proxy on first use (tools/go-binary.sh).
#
#   tools/helm.sh lint deploy/helm/eos-bridge     # any helm arguments
#   tools/helm.sh --path                          # print the binary's path (building it if needed)
#
# The binary lives in ${EOS_BRIDGE_HOME:-~/.cache/eos-bridge}/bin/helm-<version>; a second run
# finds it there and does not rebuild. Change HELM_VERSION here (not in the environment) to
# move the pin, so CI and every developer render the chart with the same helm.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/go-binary.sh"

HELM_VERSION=v3.21.4

# Stamp what helm's own release build (its Makefile) stamps: the version `helm version`
# prints, and the Kubernetes version of its client-go, which is the default
# .Capabilities.KubeVersion of `helm template` and the target of lint's deprecation checks.
# Left unstamped, both say v1.20.
ldflags() {
  local gomod k8s_minor flags pkg
  gomod="$(GOFLAGS=-mod=mod go mod download -json "helm.sh/helm/v3@$HELM_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
  k8s_minor="$(sed -n 's#^[[:space:]]*k8s.io/client-go v0\.\([0-9]*\)\..*#\1#p' "$gomod")"
  [[ -n "$k8s_minor" ]] || { echo "tools/helm.sh: no k8s.io/client-go in $gomod" >&2; exit 1; }
  flags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in pkg/chartutil pkg/lint/rules; do
    flags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
  done
  echo "$flags"
}

go_binary_run helm "$HELM_VERSION" "helm.sh/helm/v3/cmd/helm" ldflags "$@"
