#!/usr/bin/env bash
# Make a local Debian bookworm + python3 base image with debootstrap and load it into buildah.
#
#   tools/image/build_base.sh            # prints the image name, e.g. localhost/eos-bridge-base:bookworm-<key>
#
# Then: buildah bud --isolation=chroot --build-arg BASE_IMAGE=<that name> -t eos-bridge .
#
# This stands in for python:3.11-slim-bookworm on machines that reach Debian's and PyPI's
# package servers but no container registry. It holds Debian's python3 (3.11 on bookworm),
# python3-venv and python3-pip; the Dockerfile works on both bases because every stage uses the
# same one. The CA certificates this machine added to its own trust store
# (/usr/local/share/ca-certificates) are added to the base too, so pip and apt inside a build go
# out through the same network path as the host does.
#
# Cached: the rootfs tarball under ${EOS_BRIDGE_HOME:-~/.cache/eos-bridge}/images/, keyed by
# this recipe and the host's extra CAs. A second run finds the image in buildah's storage (or
# re-imports the tarball) and does not run debootstrap again.
set -euo pipefail

SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES=python3,python3-venv,python3-pip,ca-certificates
RECIPE_REVISION=1   # bump when the recipe below changes

log() { echo "build_base: $*" >&2; }

ensure_tools() {
  local missing=()
  command -v buildah >/dev/null || missing+=(buildah)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  ((${#missing[@]} == 0)) && return 0
  if [[ $(id -u) -ne 0 ]]; then
    log "missing ${missing[*]}: install them with 'sudo apt-get install ${missing[*]}'"
    exit 1
  fi
  log "installing ${missing[*]} (apt-get)"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
}

host_cas() { find /usr/local/share/ca-certificates -type f -name '*.crt' 2>/dev/null | sort; }

cache_key() {
  {
    echo "$SUITE $PACKAGES $RECIPE_REVISION"
    host_cas | while read -r f; do sha256sum "$f" | cut -d' ' -f1; done
  } | sha256sum | cut -c1-12
}

make_rootfs_tarball() {
  local tarball="$1" work
  work="$(mktemp -d "${TMPDIR:-/tmp}/eos-bridge-base.XXXXXX")"
  # debootstrap leaves mounts behind on failure; unmount before removing anything.
  trap "umount -R '$work/rootfs/proc' '$work/rootfs/sys' 2>/dev/null || true; rm -rf --one-file-system '$work'; trap - RETURN" RETURN
  log "debootstrap $SUITE (minbase + $PACKAGES) — a few minutes, once"
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/rootfs" "$MIRROR" \
    >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; return 1; }
  local ca
  while read -r ca; do
    [[ -n "$ca" ]] && cp "$ca" "$work/rootfs/usr/local/share/ca-certificates/"
  done < <(host_cas)
  chroot "$work/rootfs" update-ca-certificates >/dev/null
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"* \
    "$work/rootfs/var/log/"*.log "$work/rootfs/var/log/apt/"*
  # /dev, /proc, /sys and /run are provided by the container runtime.
  tar --numeric-owner --xattrs -C "$work/rootfs" \
    --exclude=./dev/* --exclude=./proc/* --exclude=./sys/* --exclude=./run/* \
    -czf "$tarball.partial" .
  mv "$tarball.partial" "$tarball"
}

import_tarball() {
  local tarball="$1" image="$2" ctr
  ctr="$(buildah from scratch)"
  trap "buildah rm '$ctr' >/dev/null 2>&1 || true; trap - RETURN" RETURN
  buildah add --quiet "$ctr" "$tarball" / >/dev/null
  buildah config \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 \
    --cmd '["python3"]' \
    --label org.opencontainers.image.description="Debian $SUITE + python3 (debootstrap, local)" \
    "$ctr"
  buildah commit --quiet "$ctr" "$image" >/dev/null
}

main() {
  local cache="${EOS_BRIDGE_HOME:-$HOME/.cache/eos-bridge}/images"
  mkdir -p "$cache"
  # One build at a time (tools/prefetch.sh may be building already; apt-get and debootstrap
  # do not share): wait for the lock, then find the image or build it.
  exec {lock}>"$cache/.build_base.lock"
  flock "$lock"
  ensure_tools
  local key image tarball
  key="$(cache_key)"
  image="localhost/eos-bridge-base:$SUITE-$key"
  tarball="$cache/debian-$SUITE-python3-$key.tar.gz"
  mkdir -p "$cache"
  if buildah inspect --type image "$image" >/dev/null 2>&1; then
    log "using $image (already in buildah storage)"
  else
    [[ -f "$tarball" ]] || make_rootfs_tarball "$tarball"
    log "importing $tarball as $image"
    import_tarball "$tarball" "$image"
  fi
  echo "$image"
}

main "$@"
