"""The Spark jobs' Avro input settings, checked before Spark starts (no Spark, no registry)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs import cli, stream
from spark_jobs.avro_input import AUTH_ENV, URL_ENV, RegistryInput, registry_input, safe_url
from spark_jobs.errors import JobConfigError
from spark_jobs.spec import parse_spec

ARGS = ["--bootstrap", "b:9092", "--topic", "out", "--table", "/t", "--checkpoint", "/c"]


def _cfg(*extra: str) -> stream.StreamConfig:
    return stream.config_from(stream.parse_args([*ARGS, *extra]))


def test_json_is_the_default_and_avro_takes_the_registry_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    assert _cfg().source.registry is None
    registry = _cfg("--input-format", "avro", "--registry-url", "http://r:8081").source.registry
    assert registry == RegistryInput("http://r:8081")
    assert registry.subjects(["out", "b"]) == ["out-value", "b-value"]
    monkeypatch.setenv(URL_ENV, "http://env:8081")
    assert _cfg("--input-format", "avro").source.registry == RegistryInput("http://env:8081")


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--input-format", "avro"], "--registry-url"),
        (["--registry-url", "http://r:8081"], "--input-format avro"),
        (["--input-format", "avro", "--registry-url", "r:8081"], "http://"),
        (["--input-format", "avro", "--registry-url", "http://u:pw@r:8081"], AUTH_ENV),
    ],
)
def test_bad_registry_options_are_refused_naming_the_option(
    monkeypatch: pytest.MonkeyPatch, extra: list[str], named: str
) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    with pytest.raises(JobConfigError, match=named) as refused:
        _cfg(*extra)
    assert "pw" not in str(refused.value)


def test_basic_auth_and_ca_come_from_the_environment_only() -> None:
    env = {AUTH_ENV: "me:secret", "BRIDGE_SCHEMA_REGISTRY__CA_LOCATION": "/ca.pem"}
    conf = registry_input("avro", "https://r", None, env).client_conf()  # type: ignore[union-attr]
    assert conf["basic.auth.user.info"] == "me:secret" and conf["ssl.ca.location"] == "/ca.pem"
    assert "secret" not in repr(registry_input("avro", "https://r", None, env))
    assert safe_url("https://me:secret@r:8081/x") == "https://r:8081/x"


def test_the_spec_says_avro_and_where_its_registry_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    doc = {
        "input": {
            "topics": ["out"], "format": "avro",
            "registry": {"url": "http://spec:8081", "subject": "events"},
            "fields": [{"name": "user", "type": "string"}],
        },
        "group_by": ["user"],
        "aggregates": [{"name": "n", "fn": "count"}],
    }  # fmt: skip
    spec = parse_spec(doc)
    args = stream.parse_args(["--bootstrap", "b", "--table", "/t", "--checkpoint", "/c"])
    assert cli.registry_from(args, spec) == RegistryInput("http://spec:8081", "events")
    with pytest.raises(JobConfigError, match=r"input\.registry"):
        parse_spec({**doc, "input": {**doc["input"], "format": "json"}})


def test_the_bridges_config_file_names_the_registry_and_its_ca(tmp_path: Path) -> None:
    """What the chart gives the job: the bridge's config file and the basic-auth Secret."""
    config = tmp_path / "config.yaml"
    config.write_text("schema_registry: {url: 'https://reg:8081', ca_location: /etc/ca.crt}\n")
    env = {"BRIDGE_CONFIG_FILE": str(config), AUTH_ENV: "me:pw"}
    registry = registry_input("avro", None, None, env)
    assert registry is not None and registry.url == "https://reg:8081"
    assert registry.client_conf()["ssl.ca.location"] == "/etc/ca.crt"
    assert registry_input("avro", "http://flag:1", None, env) == RegistryInput("http://flag:1")
