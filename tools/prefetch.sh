#!/usr/bin/env bash
# Build the pinned tools the deployment and fault tests need (helm, kube-score, Toxiproxy,
# promtool, checkov, the image test's base image) before those tests ask for them. `make test`
# starts this in the background (tests/conftest.py) so the builds of a fresh machine overlap
# the tests that wait on brokers; each tool's own script takes a lock, so a test that needs a
# tool first waits for the build in progress instead of starting a second one. Safe to run by
# hand; a no-op once all are built.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
status=0
for tool in helm.sh kube-score.sh toxiproxy.sh promtool.sh checkov.sh; do
  if ! "$here/$tool" --path >/dev/null; then
    echo "tools/prefetch.sh: $tool failed (the test that needs it will say why)" >&2
    status=1
  fi
done
# The image test's Debian base (apt-get installs buildah and debootstrap when missing: root).
if [[ $(id -u) -eq 0 ]] && ! "$here/image/build_base.sh" >/dev/null; then
  echo "tools/prefetch.sh: image/build_base.sh failed (the image test will say why)" >&2
  status=1
fi
exit "$status"
