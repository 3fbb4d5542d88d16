"""The bridge's HTTP endpoints from a test: ``/metrics``, ``/livez``, ``/readyz``."""

from __future__ import annotations

import urllib.error
import urllib.request


def http_get(port: int, path: str) -> tuple[int, str]:
    """Status and body of ``GET path`` (0 and "" while nothing listens)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def metric(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` in a Prometheus exposition whose labels include
    ``labels`` (0 when there is none)."""
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    total = 0.0
    for line in text.splitlines():
        ours = line.startswith(name + " ") or line.startswith(name + "{")
        if ours and all(w in line for w in wanted):
            total += float(line.rsplit(" ", 1)[1])
    return total
