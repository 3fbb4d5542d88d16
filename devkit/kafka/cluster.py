"""Start, fault and stop real Kafka brokers (KRaft, combined broker+controller) on loopback.

One broker by default; three on request (replication factor 3, min ISR 2) so fault tests can
SIGKILL, SIGSTOP/SIGCONT or restart one chosen broker while the quorum survives. Readiness is
asked of the cluster through the AdminClient, never slept for.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import time
import uuid
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from devkit.kafka.jars import ensure_kafka_jars, require_java
from devkit.kafka.security import DevSecurity

_LOG4J = Path(__file__).with_name("log4j2.properties")
_STATE_FILE = "cluster.json"
_PR_SET_PDEATHSIG = 1


class LocalKafkaError(RuntimeError):
    """A local broker failed to start or stop; the message carries its last log lines."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports on 127.0.0.1 that are free right now (all bound at once, so
    no two are the same).

    They are drawn below the kernel's ephemeral range (``ip_local_port_range``), where no
    outgoing connection takes a port by itself: a port handed out here and bound a moment
    later by a broker, a bridge's HTTP server or Toxiproxy cannot be taken meanwhile by one of
    the many client connections a test opens. Another process binding explicitly can still
    take one: callers that bind later retry on a clash (see :meth:`LocalKafka.start`).
    """
    low = _ephemeral_low()
    rng = random.SystemRandom()
    sockets: list[socket.socket] = []
    try:
        while len(sockets) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("127.0.0.1", rng.randrange(_PORTS_FROM, low)))
            except OSError:  # in use: draw again
                s.close()
                continue
            sockets.append(s)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


_PORTS_FROM = 20000  # above the ports services usually listen on


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 when it cannot be read)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
    return low if low > _PORTS_FROM + 1000 else 32768


def die_with_parent() -> None:
    """``preexec_fn``: the kernel SIGKILLs the child when the thread that started it dies."""
    # Test brokers and bridges must not outlive a crashed pytest.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _tail(path: Path, lines: int = 25) -> str:
    if not path.exists():
        return f"(no {path.name})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@dataclass(slots=True)
class BrokerProcess:
    """One broker: its node id, ports, directory and (while running) its process."""

    node_id: int
    port: int
    controller_port: int
    directory: Path
    pid: int | None = None
    sasl_port: int | None = None  # secure clusters: SASL_SSL listener
    mtls_port: int | None = None  # secure clusters: mTLS listener
    # Optional second client listener for a proxy in front of the broker (chaos tests): the
    # broker listens on ``proxied_port`` and advertises ``advertised_proxy_port`` on it.
    proxied_port: int | None = None
    advertised_proxy_port: int | None = None
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and _pid_runs_in(self.pid, self.directory)

    def logs(self) -> str:
        return (
            f"--- broker {self.node_id} server.log ---\n{_tail(self.directory / 'server.log')}\n"
            f"--- broker {self.node_id} stdout ---\n{_tail(self.directory / 'stdout.log')}"
        )


def _pid_runs_in(pid: int, directory: Path) -> bool:
    """True when ``pid`` is a live java process started for ``directory`` (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return str(directory).encode() in cmdline


class LocalKafka:
    """A local KRaft cluster of 1 or 3 brokers living under ``directory``.

    Args:
        directory: where configs, data and logs go (wiped on :meth:`start` unless ``reuse``).
        brokers: 1 or 3.
        tied_to_parent: brokers die with this Python process (tests); False for the
            long-lived broker of ``python -m devkit.kafka``.
        first_port: fixed client port of broker 1 (others free); None picks free ports.
        heap: JVM max heap per broker.
        secure: add SASL_SSL (SCRAM) and mTLS listeners and ACLs (:mod:`devkit.kafka.security`).
        proxy_ports: one port per broker where a TCP proxy (Toxiproxy) will listen; each
            broker then gets a second client listener (``BrokerProcess.proxied_port``) that
            advertises its proxy's port, so clients bootstrapped through the proxies stay
            behind them. The brokers' own listener and replication are not proxied.
        overrides: extra ``server.properties`` settings for every broker.
    """

    def __init__(
        self,
        directory: Path,
        brokers: int = 1,
        *,
        tied_to_parent: bool = True,
        first_port: int | None = None,
        heap: str = "768m",
        secure: bool = False,
        proxy_ports: list[int] | None = None,
        overrides: dict[str, object] | None = None,
    ) -> None:
        if brokers not in (1, 3):
            raise ValueError(f"brokers must be 1 or 3, not {brokers}")
        self.directory = directory
        self.tied_to_parent = tied_to_parent
        self.heap = heap
        self._first_port = first_port
        self.security = DevSecurity(directory / "security") if secure else None
        if proxy_ports is not None and len(proxy_ports) != brokers:
            raise ValueError(f"proxy_ports needs one port per broker, got {proxy_ports}")
        self.proxy_ports = proxy_ports
        self.overrides = dict(overrides or {})
        self.brokers: list[BrokerProcess] = []
        self._pick_ports(brokers)
        self._classpath = ""

    def _pick_ports(self, brokers: int) -> None:
        proxied = self.proxy_ports is not None
        per = 2 + (2 if self.security else 0) + (1 if proxied else 0)
        ports = free_ports(per * brokers)
        if self._first_port:
            ports[0] = self._first_port
        self.brokers = []
        for i in range(brokers):
            mine = ports[per * i : per * (i + 1)]
            broker = BrokerProcess(i + 1, mine[0], mine[1], self.directory / f"broker-{i + 1}")
            extra = iter(mine[2:])
            if self.security:
                broker.sasl_port, broker.mtls_port = next(extra), next(extra)
            if self.proxy_ports is not None:
                broker.proxied_port = next(extra)
                broker.advertised_proxy_port = self.proxy_ports[i]
            self.brokers.append(broker)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def sasl_bootstrap(self) -> str:
        """Bootstrap of the SASL_SSL listeners (secure clusters)."""
        return ",".join(f"127.0.0.1:{b.sasl_port}" for b in self.brokers)

    @property
    def mtls_bootstrap(self) -> str:
        """Bootstrap of the mTLS listeners (secure clusters)."""
        return ",".join(f"127.0.0.1:{b.mtls_port}" for b in self.brokers)

    # ---- lifecycle -------------------------------------------------------------------------

    def start(
        self, timeout: float = 90.0, attempts: int = 3, cluster_id: str | None = None
    ) -> LocalKafka:
        """Format storage, start every broker and wait until all are registered.

        Free ports are picked before the brokers bind them; when another process took one in
        between, the start is retried on new ports (up to ``attempts`` times)."""
        cluster_id = cluster_id or base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[:22]
        for attempt in range(1, attempts + 1):
            try:
                return self._start_once(timeout, cluster_id)
            except LocalKafkaError as exc:
                if attempt == attempts or not _port_clash(str(exc)):
                    raise
                self._pick_ports(len(self.brokers))
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float, cluster_id: str) -> LocalKafka:
        java = require_java()
        self._classpath = str(ensure_kafka_jars() / "*")
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.security:
            self.security.make_certificates()
        for broker in self.brokers:
            broker.directory.mkdir(parents=True)
            (broker.directory / "server.properties").write_text(self._properties(broker))
            self._format(java, broker, cluster_id)
        for broker in self.brokers:
            self._launch(java, broker)
        self._save_state()
        try:
            self.wait_ready(timeout)
        except LocalKafkaError:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every broker, SIGKILL what is left after ``timeout``; idempotent."""
        for broker in self.brokers:
            self._signal(broker, signal.SIGCONT)  # a paused broker cannot shut down
            self._signal(broker, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for broker in self.brokers:
            self._reap(broker, max(0.1, deadline - time.monotonic()))
        (self.directory / _STATE_FILE).unlink(missing_ok=True)

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- faults ----------------------------------------------------------------------------

    def broker(self, node_id: int) -> BrokerProcess:
        return self.brokers[node_id - 1]

    def kill(self, node_id: int) -> None:
        """SIGKILL one broker (no controlled shutdown) and wait until it is gone."""
        broker = self.broker(node_id)
        self._signal(broker, signal.SIGKILL)
        self._reap(broker, 30.0)

    def pause(self, node_id: int) -> None:
        """SIGSTOP one broker: it keeps its sockets but answers nothing."""
        self._signal(self.broker(node_id), signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        self._signal(self.broker(node_id), signal.SIGCONT)

    def restart(self, node_id: int, timeout: float = 90.0) -> None:
        """Start a stopped or killed broker again on the same ports and data."""
        broker = self.broker(node_id)
        if broker.alive():
            self._signal(broker, signal.SIGTERM)
            self._reap(broker, 30.0)
        self._launch(require_java(), broker)
        self._save_state()
        self.wait_ready(timeout)

    # ---- readiness -------------------------------------------------------------------------

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Block until every running broker is registered with the cluster."""
        want = {b.node_id for b in self.brokers if b.alive()}
        deadline = time.monotonic() + timeout
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        seen: set[int] = set()
        while time.monotonic() < deadline:
            dead = [b for b in self.brokers if b.node_id in want and not b.alive()]
            if dead:
                raise LocalKafkaError(
                    f"broker {dead[0].node_id} exited during start-up\n{dead[0].logs()}"
                )
            try:
                nodes = admin.describe_cluster(request_timeout=5).result(timeout=10).nodes
                seen = {n.id for n in nodes}
                if want <= seen and all(self._answers(b) for b in self.brokers if b.alive()):
                    return
            except Exception:
                pass
            time.sleep(0.2)
        logs = "\n".join(b.logs() for b in self.brokers)
        raise LocalKafkaError(
            f"cluster not ready after {timeout:.0f}s: registered {sorted(seen)}, "
            f"want {sorted(want)}\n{logs}"
        )

    @staticmethod
    def _answers(broker: BrokerProcess) -> bool:
        """The broker answers a metadata request on its own client listener (registration
        with the controller alone does not say its listener is serving)."""
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        try:
            admin.list_topics(timeout=5)
            return True
        except Exception:
            return False

    # ---- internals -------------------------------------------------------------------------

    def _properties(self, broker: BrokerProcess) -> str:
        n = len(self.brokers)
        voters = ",".join(f"{b.node_id}@127.0.0.1:{b.controller_port}" for b in self.brokers)
        rf, isr = (1, 1) if n == 1 else (3, 2)
        settings = {
            "process.roles": "broker,controller",
            "node.id": broker.node_id,
            "controller.quorum.voters": voters,
            **self._listeners(broker),
            "log.dirs": broker.directory / "data",
            "num.partitions": 1,
            "default.replication.factor": rf,
            "min.insync.replicas": isr,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": 10,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": isr,
            "transaction.state.log.num.partitions": 10,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": isr,
            "group.initial.rebalance.delay.ms": 0,
            # Missing topics must be reported, not silently created (config validation).
            "auto.create.topics.enable": "false",
            "num.network.threads": 2,
            "num.io.threads": 4,
            "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
        }
        if self.security:
            settings.update(self.security.broker_properties())
        settings.update(self.overrides)
        return "".join(f"{k}={v}\n" for k, v in settings.items())

    def _listeners(self, broker: BrokerProcess) -> dict[str, str]:
        listen = {"PLAINTEXT": broker.port}
        protocols = {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT"}
        if self.security:
            assert broker.sasl_port and broker.mtls_port
            listen |= {"SASL_SSL": broker.sasl_port, "MTLS": broker.mtls_port}
            protocols |= {"SASL_SSL": "SASL_SSL", "MTLS": "SSL"}
        advertise = dict(listen)
        if broker.proxied_port is not None and broker.advertised_proxy_port is not None:
            # Listens on its own port, advertises the proxy's: clients stay behind the proxy.
            listen["PROXIED"] = broker.proxied_port
            advertise["PROXIED"] = broker.advertised_proxy_port
            protocols["PROXIED"] = "PLAINTEXT"

        def joined(ports: dict[str, int]) -> str:
            return ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())

        return {
            "listeners": f"{joined(listen)},CONTROLLER://127.0.0.1:{broker.controller_port}",
            "advertised.listeners": joined(advertise),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in protocols.items()),
        }

    def _jvm(self, java: str, broker: BrokerProcess) -> list[str]:
        return [
            java, f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={_LOG4J}", f"-Dkafka.logs.dir={broker.directory}",
            "-cp", self._classpath,
        ]  # fmt: skip

    def _format(self, java: str, broker: BrokerProcess, cluster_id: str) -> None:
        cmd = [
            *self._jvm(java, broker), "kafka.tools.StorageTool", "format",
            # "=": an id may start with "-", which as a separate argument reads as an option.
            f"--cluster-id={cluster_id}", "-c", str(broker.directory / "server.properties"),
            *(self.security.format_arguments() if self.security else []),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise LocalKafkaError(
                f"formatting storage for broker {broker.node_id} failed:\n"
                + "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            )

    def _launch(self, java: str, broker: BrokerProcess) -> None:
        if not self._classpath:
            self._classpath = str(ensure_kafka_jars() / "*")
        cmd = [*self._jvm(java, broker), "kafka.Kafka", str(broker.directory / "server.properties")]
        with open(broker.directory / "stdout.log", "ab") as out:
            broker._proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=not self.tied_to_parent,
                preexec_fn=die_with_parent if self.tied_to_parent else None,
            )
        broker.pid = broker._proc.pid

    def _signal(self, broker: BrokerProcess, sig: signal.Signals) -> None:
        if broker.pid is not None and broker.alive():
            with suppress(ProcessLookupError):
                os.kill(broker.pid, sig)

    def _reap(self, broker: BrokerProcess, timeout: float) -> None:
        if broker._proc is not None:
            try:
                broker._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                broker._proc.kill()
                broker._proc.wait()
        else:
            deadline = time.monotonic() + timeout
            while broker.alive() and time.monotonic() < deadline:
                time.sleep(0.1)
            self._signal(broker, signal.SIGKILL)
            while broker.alive():
                time.sleep(0.05)
        broker._proc = None
        broker.pid = None

    def _save_state(self) -> None:
        state = {
            "bootstrap": self.bootstrap,
            "brokers": [
                {
                    "node_id": b.node_id,
                    "pid": b.pid,
                    "port": b.port,
                    "controller_port": b.controller_port,
                    "sasl_port": b.sasl_port,
                    "mtls_port": b.mtls_port,
                    "directory": str(b.directory),
                }
                for b in self.brokers
            ],
        }
        (self.directory / _STATE_FILE).write_text(json.dumps(state, indent=2))

    @classmethod
    def attach(cls, directory: Path) -> LocalKafka | None:
        """The cluster recorded in ``directory`` (started by another process), if any."""
        path = directory / _STATE_FILE
        if not path.exists():
            return None
        state = json.loads(path.read_text())
        cluster = cls.__new__(cls)
        cluster.directory = directory
        cluster.tied_to_parent = False
        cluster.heap = "768m"
        cluster._first_port = None
        cluster.security = None
        cluster._classpath = ""
        cluster.proxy_ports = None
        cluster.overrides = {}
        cluster.brokers = [
            BrokerProcess(
                b["node_id"],
                b["port"],
                b["controller_port"],
                Path(b["directory"]),
                b["pid"],
                b.get("sasl_port"),
                b.get("mtls_port"),
            )
            for b in state["brokers"]
        ]
        return cluster


def _port_clash(error: str) -> bool:
    """A broker died at start-up because its port was taken (java.net.BindException)."""
    return "BindException" in error or "Address already in use" in error
