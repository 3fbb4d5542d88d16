# syntax=docker/dockerfile:1
# eos-bridge service image.
#
#   docker build -t eos-bridge .                       # or: buildah bud -t eos-bridge .
#   docker run --rm -e BRIDGE_BOOTSTRAP_SERVERS=kafka:9092 ... eos-bridge        # = eos-bridge run
#   docker run --rm --env-file bridge.env eos-bridge check-config   # validate settings, no broker
#
# BASE_IMAGE: any glibc Debian-family image with python3 >= 3.11, `python3 -m venv` and useradd
# (python:3.11-slim-bookworm, or Debian bookworm + python3 python3-venv, as the image test
# builds it locally). Every stage uses the same base, so the venv's interpreter path, glibc and
# Python ABI match between where wheels are installed and where they run.
ARG BASE_IMAGE=python:3.11-slim-bookworm

# --- deps: third-party dependencies, in their own layer --------------------------------------
# Only pyproject.toml is copied, so editing the code reuses this layer; only a dependency change
# rebuilds it. Every runtime dependency ships glibc (manylinux) wheels, so no compiler is needed.
FROM ${BASE_IMAGE} AS deps
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml ./
RUN python3 -c "import tomllib; deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; print('\n'.join(deps))" > requirements.txt \
 && /opt/venv/bin/pip install --only-binary=:all: -r requirements.txt \
 && /opt/venv/bin/python -m compileall -q -j 0 /opt/venv/lib

# --- wheel: the project itself -------------------------------------------------------------
FROM deps AS wheel
COPY . /src
RUN /opt/venv/bin/pip wheel --no-deps --wheel-dir /dist /src

# --- runtime -------------------------------------------------------------------------------
FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="eos-bridge" \
      org.opencontainers.image.description="Exactly-once Kafka to Kafka bridge" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    BRIDGE_STATE_DIR=/var/lib/eos-bridge/state \
    BRIDGE_HTTP_PORT=9000
# A fixed numeric uid/gid so Kubernetes' runAsNonRoot can verify it and a volume's fsGroup matches.
RUN groupadd --gid 10001 eos-bridge \
 && useradd --uid 10001 --gid 10001 --no-create-home --no-log-init --home-dir /var/lib/eos-bridge \
      --shell /usr/sbin/nologin eos-bridge \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/eos-bridge /var/lib/eos-bridge/state
COPY --from=deps /opt/venv /opt/venv
# The project's own layer: the wheel is bind-mounted from its stage (never stored in a layer)
# and pip byte-compiles what it installs.
RUN --mount=type=bind,from=wheel,source=/dist,target=/tmp/dist \
    pip install --no-deps --no-index --no-cache-dir /tmp/dist/*.whl
USER 10001:10001
WORKDIR /var/lib/eos-bridge
EXPOSE 9000
ENTRYPOINT ["eos-bridge"]
CMD ["run"]
