"""A secured local broker: certificates made at start, SASL_SSL/SCRAM, mTLS and ACLs.

Listeners of a secure :class:`~devkit.kafka.cluster.LocalKafka`:

=============  =================================================  ===========================
listener       security                                           principal
=============  =================================================  ===========================
``PLAINTEXT``  none; the admin's door (create topics and ACLs)    ``User:ANONYMOUS`` (super)
``SASL_SSL``   TLS + SCRAM-SHA-512, users made at format time     ``User:<SCRAM user>``
``MTLS``       TLS with ``ssl.client.auth=required``              ``User:<client cert CN>``
=============  =================================================  ===========================

``StandardAuthorizer`` is on and nothing is allowed without an ACL, so a client on a secure
listener can do exactly what the ACLs grant. Certificates (a CA, a broker certificate with
SANs for ``localhost`` and ``127.0.0.1``, a client certificate whose key is encrypted) are
made with the ``openssl`` command at start; every password is random per cluster.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from devkit.kafka.jars import EnvironmentProblem

if TYPE_CHECKING:
    from devkit.kafka.cluster import LocalKafka

SCRAM_MECHANISM = "SCRAM-SHA-512"
MTLS_CLIENT_CN = "bridge-mtls"
_DAYS = "3650"


def _password() -> str:
    return secrets.token_urlsafe(18)


@dataclass
class DevSecurity:
    """Key material and users of one secure dev cluster, kept under ``directory``."""

    directory: Path
    users: dict[str, str] = field(
        default_factory=lambda: {"admin": _password(), "bridge": _password()}
    )
    store_password: str = field(default_factory=_password)
    client_key_password: str = field(default_factory=_password)

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def client_cert(self) -> Path:
        return self.directory / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.directory / "client.key"

    @property
    def keystore(self) -> Path:
        return self.directory / "broker.p12"

    # ---- key material ----------------------------------------------------------------------

    def make_certificates(self) -> None:
        """CA, broker keystore (PKCS12) and an mTLS client certificate with an encrypted key."""
        if shutil.which("openssl") is None:
            raise EnvironmentProblem(
                "a secure dev broker needs the 'openssl' command: apt-get install -y openssl"
            )
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", _DAYS,
            "-subj", "/CN=eos-bridge dev CA", "-keyout", d / "ca.key", "-out", self.ca,
        )  # fmt: skip
        self._signed("broker", "/CN=localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1")
        _openssl(
            "pkcs12", "-export", "-in", d / "broker.pem", "-inkey", d / "broker.key",
            "-certfile", self.ca, "-name", "broker", "-out", self.keystore,
            "-passout", f"pass:{self.store_password}",
        )  # fmt: skip
        self._signed("client-plain", f"/CN={MTLS_CLIENT_CN}", "extendedKeyUsage=clientAuth")
        (d / "client-plain.pem").rename(self.client_cert)
        _openssl(
            "pkey", "-in", d / "client-plain.key", "-aes256", "-out", self.client_key,
            "-passout", f"pass:{self.client_key_password}",
        )  # fmt: skip
        (d / "client-plain.key").unlink()

    def _signed(self, name: str, subject: str, extension: str) -> None:
        d = self.directory
        ext = d / f"{name}.ext"
        ext.write_text(extension + "\n")
        _openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-subj", subject,
            "-keyout", d / f"{name}.key", "-out", d / f"{name}.csr",
        )  # fmt: skip
        _openssl(
            "x509", "-req", "-in", d / f"{name}.csr", "-CA", self.ca, "-CAkey", d / "ca.key",
            "-CAcreateserial", "-days", _DAYS, "-sha256", "-extfile", ext,
            "-out", d / f"{name}.pem",
        )  # fmt: skip

    # ---- broker side -----------------------------------------------------------------------

    def broker_properties(self) -> dict[str, object]:
        """Listener, TLS, SASL and authorizer settings (merged into server.properties)."""
        return {
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "listener.name.mtls.ssl.client.auth": "required",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": self.keystore,
            "ssl.keystore.password": self.store_password,
            "ssl.key.password": self.store_password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.ca,
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # The PLAINTEXT and CONTROLLER listeners are the cluster's own (and the admin's).
            "super.users": "User:ANONYMOUS;User:admin",
            "allow.everyone.if.no.acl.found": "false",
        }

    def format_arguments(self) -> list[str]:
        """``StorageTool format`` arguments that create the SCRAM users."""
        args: list[str] = []
        for user, password in self.users.items():
            args += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]
        return args

    # ---- client side -----------------------------------------------------------------------

    def sasl_ssl_client(self, user: str = "bridge") -> dict[str, str]:
        """librdkafka settings of a SCRAM user on the SASL_SSL listener."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.username": user,
            "sasl.password": self.users[user],
            "ssl.ca.location": str(self.ca),
        }

    def mtls_client(self) -> dict[str, str]:
        """librdkafka settings of the client certificate on the mTLS listener."""
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca),
            "ssl.certificate.location": str(self.client_cert),
            "ssl.key.location": str(self.client_key),
            "ssl.key.password": self.client_key_password,
        }


# What a bridge needs, per resource (see docs/deploy.md "ACLs").
_READ_TOPIC = (AclOperation.READ, AclOperation.DESCRIBE)
_WRITE_TOPIC = (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS)
_CHANGELOG = (
    AclOperation.CREATE, AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
)  # fmt: skip


def bridge_acls(
    principal: str,
    *,
    inputs: list[str],
    outputs: list[str],
    group: str,
    transactional_id_prefix: str,
) -> list[AclBinding]:
    """The ACLs a bridge with these topics, group and transactional ids needs: READ on its
    inputs, WRITE on its outputs (and DLQ), its group, its transactional ids (prefix) and
    the changelog topics of its group (prefix ``changelog__<group>--``)."""
    literal, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    wanted = [
        *((ResourceType.TOPIC, t, literal, op) for t in inputs for op in _READ_TOPIC),
        *((ResourceType.TOPIC, t, literal, op) for t in outputs for op in _WRITE_TOPIC),
        *((ResourceType.TOPIC, f"changelog__{group}--", prefixed, op) for op in _CHANGELOG),
        # repartition topics <group>-<step>-repartition (regrouped pipelines)
        *((ResourceType.TOPIC, f"{group}-", prefixed, op) for op in _CHANGELOG),
        (ResourceType.GROUP, group, literal, AclOperation.READ),
        (ResourceType.TRANSACTIONAL_ID, transactional_id_prefix, prefixed, AclOperation.WRITE),
        (ResourceType.TRANSACTIONAL_ID, transactional_id_prefix, prefixed, AclOperation.DESCRIBE),
    ]
    return [
        AclBinding(kind, name, pattern, principal, "*", op, AclPermissionType.ALLOW)
        for kind, name, pattern, op in wanted
    ]


def create_acls(admin_bootstrap: str, bindings: list[AclBinding], timeout: float = 30) -> None:
    """Create ``bindings`` through the admin's (super user's) listener."""
    admin = AdminClient({"bootstrap.servers": admin_bootstrap})
    for future in admin.create_acls(bindings, request_timeout=timeout).values():
        future.result(timeout)


def write_client_settings(cluster: LocalKafka, security: DevSecurity) -> list[Path]:
    """For ``python -m devkit.kafka start --secure``: let the dev users ``bridge`` (SCRAM) and
    the mTLS client certificate do anything (wildcard ACLs), and write each listener's ``BRIDGE_*``
    settings to an env file (mode 0600: it holds a password) for ``set -a; . file``."""
    wildcard = ResourcePatternType.LITERAL
    bindings = [
        AclBinding(kind, "*", wildcard, principal, "*", AclOperation.ALL, AclPermissionType.ALLOW)
        for principal in ("User:bridge", f"User:{MTLS_CLIENT_CN}")
        for kind in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)
    ]
    create_acls(cluster.bootstrap, bindings)
    sasl = security.sasl_ssl_client()
    files = {
        "sasl.env": {
            "BRIDGE_BOOTSTRAP_SERVERS": cluster.sasl_bootstrap,
            "BRIDGE_SASL_USERNAME": sasl.pop("sasl.username"),
            "BRIDGE_SASL_PASSWORD": sasl.pop("sasl.password"),
            "BRIDGE_KAFKA": json.dumps(sasl),
        },
        "mtls.env": {
            "BRIDGE_BOOTSTRAP_SERVERS": cluster.mtls_bootstrap,
            "BRIDGE_KAFKA": json.dumps(security.mtls_client()),
        },
    }
    paths = []
    for name, env in files.items():
        path = security.directory / name
        path.write_text("".join(f"{k}='{v}'\n" for k, v in env.items()))
        os.chmod(path, 0o600)
        paths.append(path)
    return paths


def _openssl(*args: object) -> None:
    proc = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise EnvironmentProblem(f"openssl {args[0]} failed: {proc.stderr.strip()[-500:]}")
