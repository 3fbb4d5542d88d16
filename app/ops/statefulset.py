"""Is this pod going away for good? A StatefulSet scale-down, told from a rolling restart.

A StatefulSet names its pods ``<statefulset>-<ordinal>`` (their hostname) and, scaling down,
first lowers ``spec.replicas``, then stops the pods from the highest ordinal down. So a pod
stopped while its ordinal is at or above the desired replica count will not come back: it is
scale-in. A pod stopped while its ordinal is below it (a rolling update, an eviction, a
``kubectl delete pod``) comes back with the same name within seconds, and should keep its
static group membership so that nothing moves.

The replica count is read from the Kubernetes API with the pod's service-account token
(``GET /apis/apps/v1/namespaces/{ns}/statefulsets/{name}``: the chart's Role grants ``get`` on
that one StatefulSet). Anything that cannot be read means "stay": the broker's session timeout
then moves the partitions, as it would without this check.
"""

from __future__ import annotations

import json
import os
import re
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_ORDINAL = re.compile(r"^(?P<name>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)-(?P<ordinal>\d+)$")


@dataclass(frozen=True)
class Verdict:
    """Whether to leave the group for good, why (one line for the log), and whether the
    answer is a guess because something could not be read (logged as a warning)."""

    leave: bool
    why: str
    unsure: bool = False


@dataclass(frozen=True)
class Pod:
    """Where the pod is and how it reaches the API (defaults: the in-cluster ones)."""

    hostname: str
    api_url: str | None  # None: not running in Kubernetes
    namespace: str | None
    token: str | None
    ca_file: Path | None

    @classmethod
    def here(cls, env: Mapping[str, str] = os.environ, account: Path = SERVICE_ACCOUNT) -> Pod:
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
        api = f"https://{_bracketed(host)}:{port or 443}" if host else None
        return cls(
            hostname=socket.gethostname(),
            api_url=api,
            namespace=_read(account / "namespace"),
            token=_read(account / "token"),
            ca_file=account / "ca.crt" if (account / "ca.crt").exists() else None,
        )


def scale_in_verdict(pod: Pod, timeout_s: float = 5.0) -> Verdict:
    """Leave iff the pod's ordinal is at or above its StatefulSet's ``spec.replicas`` (or the
    StatefulSet is gone or being deleted)."""
    if pod.api_url is None:
        return Verdict(False, "not running in Kubernetes (no KUBERNETES_SERVICE_HOST)")
    match = _ORDINAL.match(pod.hostname)
    if match is None:
        return Verdict(
            False, f"hostname {pod.hostname!r} is not a StatefulSet pod's <name>-<ordinal>", True
        )
    name, ordinal = match["name"], int(match["ordinal"])
    if not pod.namespace or not pod.token:
        return Verdict(False, f"no service-account token or namespace in {SERVICE_ACCOUNT}", True)
    url = f"{pod.api_url}/apis/apps/v1/namespaces/{pod.namespace}/statefulsets/{name}"
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {pod.token}", "Accept": "application/json"}
    )
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context(cafile=str(pod.ca_file) if pod.ca_file else None)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return Verdict(True, f"statefulset {pod.namespace}/{name} no longer exists")
        return Verdict(
            False,
            f"GET statefulset {pod.namespace}/{name}: HTTP {exc.code} "
            f"{exc.reason} (does the pod's Role grant get on it?)",
            True,
        )
    except (OSError, ValueError) as exc:  # unreachable, TLS, timeout, not JSON
        return Verdict(False, f"GET statefulset {pod.namespace}/{name}: {_one_line(exc)}", True)
    try:
        replicas = int(body.get("spec", {}).get("replicas", 1))
        deleting = bool(body.get("metadata", {}).get("deletionTimestamp"))
    except (AttributeError, TypeError, ValueError):
        return Verdict(False, f"statefulset {pod.namespace}/{name}: no spec.replicas", True)
    where = f"statefulset {pod.namespace}/{name}"
    if deleting:
        return Verdict(True, f"{where} is being deleted")
    if ordinal >= replicas:
        return Verdict(True, f"ordinal {ordinal} >= {where}'s desired replicas {replicas}")
    return Verdict(False, f"ordinal {ordinal} < {where}'s desired replicas {replicas}: a restart")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
