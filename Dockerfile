# syntax=docker/dockerfile:1
# eos-bridge service image.
#
#   docker build -t eos-bridge .                       # or: buildah bud -t eos-bridge .
#   docker run --rm -e BRIDGE_BOOTSTRAP_SERVERS=kafka:9092 ... eos-bridge        # = eos-bridge run
#   docker run --rm --env-file bridge.env eos-bridge check-config   # validate settings, no broker
#
# BASE_IMAGE: any glibc Debian-family image with python3 >= 3.11, `python3 -m venv`, pip >= 22.3
# (for `pip --python`) and useradd (python:3.11-slim-bookworm, or Debian bookworm + python3
# python3-venv python3-pip, as the image test builds it locally). Every stage uses the same
# base, so the venv's interpreter path, glibc and Python ABI match between where wheels are
# installed and where they run.
ARG BASE_IMAGE=python:3.11-slim-bookworm

# --- deps: third-party dependencies, in their own layer --------------------------------------
# Exactly the versions and files of requirements/runtime.lock (`make lock`): pip refuses any
# file whose sha256 is not listed. Every runtime dependency ships glibc (manylinux) wheels, so
# no compiler is needed. The venv is made without pip and filled by the base's pip (--python),
# so the service's environment never holds pip, setuptools or wheel.
FROM ${BASE_IMAGE} AS deps
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv --without-pip /opt/venv
COPY requirements/runtime.lock /tmp/runtime.lock
RUN python3 -m pip --python /opt/venv/bin/python install --require-hashes --no-deps \
      --only-binary=:all: -r /tmp/runtime.lock \
 && /opt/venv/bin/python -m compileall -q -j 0 /opt/venv/lib

# --- wheel: the project itself, built by locked build tools --------------------------------
FROM ${BASE_IMAGE} AS wheel
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
COPY requirements/build.lock /tmp/build.lock
RUN python3 -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes --no-deps --only-binary=:all: -r /tmp/build.lock
COPY . /src
RUN /opt/build/bin/python -m build --wheel --no-isolation --outdir /dist /src

# --- runtime -------------------------------------------------------------------------------
FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="eos-bridge" \
      org.opencontainers.image.description="Exactly-once Kafka to Kafka bridge" \
      org.opencontainers.image.licenses="Apache-2.0"
# MALLOC_ARENA_MAX: glibc gives each thread that allocates an arena of its own (up to 8 per
# core); librdkafka's and RocksDB's threads then fragment memory that reads as RSS growth over
# hours. Two arenas is what the soak runs with (tests/chaos/soak.py, docs/operations.md).
# MALLOC_MMAP_THRESHOLD_: a fixed 1 MiB, so librdkafka's multi-MiB fetch buffers (a restore's
# above all) are mapped and unmapped whole; with glibc's moving threshold they land in the heap
# after the first one is freed, and small long-lived allocations then pin the heap they grew.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=1048576 \
    BRIDGE_STATE_DIR=/var/lib/eos-bridge/state \
    BRIDGE_HTTP_PORT=9000
# A fixed numeric uid/gid so Kubernetes' runAsNonRoot can verify it and a volume's fsGroup matches.
RUN groupadd --gid 10001 eos-bridge \
 && useradd --uid 10001 --gid 10001 --no-create-home --no-log-init --home-dir /var/lib/eos-bridge \
      --shell /usr/sbin/nologin eos-bridge \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/eos-bridge /var/lib/eos-bridge/state
COPY --from=deps /opt/venv /opt/venv
# The project's own layer: the wheel (a few hundred kB, copied because buildah cannot bind-mount
# a stage it took from its layer cache) installed by the base's pip into the pip-less venv,
# byte-compiled. Its dependencies are already there (--no-deps), so nothing is fetched.
COPY --from=wheel /dist /opt/dist
RUN python3 -m pip --python /opt/venv/bin/python install --no-deps --no-index --no-cache-dir \
      --disable-pip-version-check /opt/dist/*.whl
# Only now: python3 above must be the base's interpreter, which has pip.
ENV PATH=/opt/venv/bin:$PATH
USER 10001:10001
WORKDIR /var/lib/eos-bridge
EXPOSE 9000
ENTRYPOINT ["eos-bridge"]
# The supervisor restarts the bridge at once when it exits 3 (no kubelet back-off).
CMD ["supervise", "--", "run"]
