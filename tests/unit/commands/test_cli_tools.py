"""The pure parts of the first-hour tools and of record-level pipeline functions."""

from __future__ import annotations

from typing import Any

import pytest

from app.commands.lag import PartitionLag, format_table
from app.commands.produce import parse_lines
from app.commands.settings import settings_epilog, unknown_env_warnings
from app.config import BridgeSettings, ConnectionSettings
from app.errors import ConfigError
from app.pipeline import Pipeline, Record, Row, StepContext
from app.pipeline.steps import fuse
from app.serde import formats

JSON, RAW = formats(), formats("bytes")


def test_unknown_variables_are_named_with_the_closest_setting() -> None:
    env = {
        "BRIDGE_BOOTSTRAP_SERVER": "x",
        "BRIDGE_OUTPUT_TOPICS": "x",
        "BRIDGE_KAFKA__SECURITY.PROTOCOL": "SSL",  # nested map entries are settings
        "BRIDGE_CONFIG_FILE": "c.yaml",
        "BRIDGE_INPUT_TOPICS": "a",
        "BRIDGE_ZZZ": "x",
        "HOME": "/root",
    }
    assert unknown_env_warnings(env) == [
        "BRIDGE_BOOTSTRAP_SERVER is not a setting of eos-bridge and is ignored; "
        "did you mean BRIDGE_BOOTSTRAP_SERVERS?",
        "BRIDGE_OUTPUT_TOPICS is not a setting of eos-bridge and is ignored; "
        "did you mean BRIDGE_OUTPUT_TOPIC?",
        "BRIDGE_ZZZ is not a setting of eos-bridge and is ignored",
    ]


def test_help_epilog_lists_every_setting_with_its_env_name() -> None:
    text = settings_epilog(BridgeSettings)
    for name in BridgeSettings.model_fields:
        assert f"BRIDGE_{name.upper()} " in text
    assert "BRIDGE_INPUT_TOPICS" in text and "[required]" in text
    assert "BRIDGE_OUTPUT_TOPIC" not in settings_epilog(ConnectionSettings)


def test_connection_settings_ignore_the_bridge_only_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BRIDGE_BOOTSTRAP_SERVERS", "k:1")
    monkeypatch.setenv("BRIDGE_SASL_USERNAME", "svc")
    monkeypatch.setenv("BRIDGE_SASL_PASSWORD", "pw")
    monkeypatch.setenv("BRIDGE_OUTPUT_TOPIC", "out")  # a bridge setting, not an error here
    conf = ConnectionSettings().client_config()  # type: ignore[call-arg]
    assert conf["bootstrap.servers"] == "k:1"
    assert (conf["sasl.username"], conf["sasl.password"]) == ("svc", "pw")


def test_produce_parses_keys_from_a_field_or_a_tab() -> None:
    lines = ['{"id": 1, "user": "ana"}\n', "\n", '{"id": 2, "user": 7}\n']
    parsed = parse_lines(lines, "f", "user", tab_key=False, raw=False)
    assert [(r.key, r.value) for r in parsed] == [
        (b"ana", b'{"id": 1, "user": "ana"}'),
        (b"7", b'{"id": 2, "user": 7}'),
    ]
    tabbed = parse_lines(['k1\t{"a": 1}\n'], "f", None, tab_key=True, raw=False)
    assert [(r.key, r.value) for r in tabbed] == [(b"k1", b'{"a": 1}')]
    assert parse_lines(["not json\n"], "f", None, tab_key=False, raw=True)[0].value == b"not json"


@pytest.mark.parametrize(
    ("lines", "key_field", "tab_key", "message"),
    [
        (['{"a": 1}\n', "{oops\n"], None, False, "f:2: not valid JSON"),
        (['{"a": 1}\n'], "user", False, "f:1: no field 'user' for the key (--key-field)"),
        (['{"a": 1}\n'], None, True, "f:1: no TAB between key and value (--tab-key)"),
    ],
)
def test_produce_names_the_line_of_a_mistake(
    lines: list[str], key_field: str | None, tab_key: bool, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_lines(lines, "f", key_field, tab_key, raw=False)
    assert str(info.value).startswith(message)


def test_lag_table_sums_the_partitions() -> None:
    rows = [PartitionLag("in", 0, 5, 9), PartitionLag("in", 1, 3, 3)]
    assert [r.lag for r in rows] == [4, 0]
    assert format_table(rows).splitlines()[-1] == "total lag: 4"


def rows(*values: Any) -> list[Row]:
    headers = [("trace", b"t1")]
    return [Row(v, b"k", headers, "in", 2, 10 + i, 1000 + i) for i, v in enumerate(values)]


def run(p: Pipeline, batch: list[Row]) -> tuple[list[Row], StepContext]:
    ctx = StepContext(retries=0)
    for step in p.steps:
        batch = step(batch, ctx)
    return batch, ctx


def test_record_functions_see_key_headers_timestamp_and_origin() -> None:
    seen: list[Record] = []

    def enrich(record: Record) -> dict[str, Any]:
        seen.append(record)
        return {**record.value, "at": f"{record.topic}/{record.partition}@{record.offset}"}

    p = (
        Pipeline()
        .filter(lambda r: r.header("trace") == b"t1" and r.value["n"] > 0, record=True)
        .map(enrich, record=True)
        .key_by(lambda r: r.key + b"!", record=True)
        .route(lambda r: "odd" if r.offset % 2 else None, record=True)
    )
    out, ctx = run(p, rows({"n": 0}, {"n": 1}, {"n": 2}))
    assert [r.value for r in out] == [{"n": 1, "at": "in/2@11"}, {"n": 2, "at": "in/2@12"}]
    assert [(r.key, r.topic) for r in out] == [(b"k!", "odd"), (b"k!", None)]
    trace = (("trace", b"t1"),)
    assert [(s.timestamp, s.headers) for s in seen] == [(1001, trace), (1002, trace)]
    assert ctx.failures == []
    assert fuse(p.steps, formats=JSON, max_bytes=1000) is None  # never the fused path


def test_record_map_fans_out_drops_and_isolates_a_failure() -> None:
    def fn(record: Record) -> Any:
        if record.value == "boom":
            raise ValueError("bad record")
        return None if record.value == "drop" else [record.value, record.value]

    out, ctx = run(Pipeline().map(fn, record=True), rows("a", "drop", "boom"))
    assert [r.value for r in out] == ["a", "a"]
    assert [(f.row.offset, str(f.error)) for f in ctx.failures] == [(12, "bad record")]
    with pytest.raises(AttributeError):
        Record.of(out[0]).value = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(
    "command", [["lag", "g"], ["verify", "--input", "i", "--output", "o", "--id-field", "id"]]
)
def test_lag_and_verify_read_the_target_from_the_bridges_settings_or_from_target(
    monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    from app.commands.cli import build_parser
    from app.commands.clusters import two_cluster_settings

    def settings(*flags: str) -> Any:
        return two_cluster_settings(build_parser().parse_args([*command, *flags]))

    for name in ("BRIDGE_CONFIG_FILE", "BRIDGE_TARGET__BOOTSTRAP_SERVERS", "BRIDGE_OFFSETS_TOPIC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BRIDGE_BOOTSTRAP_SERVERS", "src:9092")
    one = settings()
    assert one.target is None and not one.cross_cluster
    assert one.target_cluster().bootstrap_servers == "src:9092"  # one cluster: both roles
    monkeypatch.setenv("BRIDGE_TARGET__BOOTSTRAP_SERVERS", "tgt:9092")
    monkeypatch.setenv("BRIDGE_TARGET__SASL_USERNAME", "bridge")
    two = settings()
    assert two.cross_cluster and two.target is not None
    assert two.target.client_config()["sasl.username"] == "bridge"
    assert two.target_cluster() == two.target
    over = settings("--target", "other:9092", "--offsets-topic", "g.pos")
    assert over.target is not None and over.target.bootstrap_servers == "other:9092"
    assert over.target.sasl_username == "bridge"  # the flag replaces the address only
    assert over.offsets_topic == "g.pos"
    monkeypatch.setenv("BRIDGE_TARGET__BOOTSTRAP_SERVERS", "src:9092")  # the same cluster
    assert not settings().cross_cluster


def test_verify_keeps_the_input_below_the_committed_positions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.commands import verify
    from app.commands.clusters import TwoClusterSettings
    from app.kafka.topics import KafkaRecord

    positions = {("in", 0): 2, ("in", 1): 0}  # in[2]: nothing committed
    monkeypatch.setattr(verify, "committed_positions", lambda *_: (positions, "on the target"))
    inputs = [KafkaRecord("in", p, o, None, b"{}", (), 0) for p in range(3) for o in range(3)]
    kept = verify._committed_only(TwoClusterSettings(), "g", inputs, 1.0)
    assert [(r.partition, r.offset) for r in kept] == [(0, 0), (0, 1)]
