"""Configuration: one pydantic-settings model, from env vars (``BRIDGE_``), a YAML/JSON file
(``BRIDGE_CONFIG_FILE`` or ``--config``) and defaults, in that order of precedence.

Validation turns every problem into one line naming the setting and its env var.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    YamlConfigSettingsSource,
)

from app.errors import ConfigError
from app.kafka.defaults import FORCED_CONSUMER_KEYS, FORCED_PRODUCER_KEYS, masked, refuse_forced
from app.kafka.naming import KeepPartition, check_template, is_template, output_topics
from app.serde import FORMAT_SETTINGS, check_formats
from app.serde.registry_settings import RegistrySettings, SchemaSettings
from app.settings_checks import check_settings, env_of, not_a_setting, yaml_problem

ENV_PREFIX = "BRIDGE_"
KafkaValue = str | int | float | bool
# A role's schema settings when none are given (frozen: one instance serves every default).
_NO_SCHEMA = SchemaSettings.model_validate({})
Format = Literal["json", "bytes", "avro", "protobuf", "json_schema"]
LogFormat = Literal["text", "json"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


_S = TypeVar("_S", bound="ConnectionSettings")


class Cluster(BaseModel):
    """One cluster's connection: where it is and how to authenticate (a role's view of the
    settings: the source the bridge reads, the target it writes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bootstrap_servers: str = Field(min_length=1, description="Kafka bootstrap servers")
    sasl_username: str | None = Field(None, description="SASL user name")
    sasl_password: SecretStr | None = Field(None, description="SASL password (never logged)")
    kafka: dict[str, KafkaValue] = Field(
        default_factory=dict, description="librdkafka settings of every client (TLS, SASL)"
    )

    @field_validator("kafka")
    @classmethod
    def _no_forced_common_keys(cls, value: dict[str, KafkaValue]) -> dict[str, KafkaValue]:
        refuse_forced(value, FORCED_CONSUMER_KEYS | FORCED_PRODUCER_KEYS, "kafka")
        return value

    def client_common(self) -> dict[str, KafkaValue]:
        """librdkafka settings shared by both clients, credentials included (never logged)."""
        common = dict(self.kafka)
        if self.sasl_username is not None:
            common["sasl.username"] = self.sasl_username
        if self.sasl_password is not None:
            common["sasl.password"] = self.sasl_password.get_secret_value()
        return common

    def client_config(self) -> dict[str, KafkaValue]:
        """A complete librdkafka configuration for a plain client. librdkafka logs critical
        lines only (``log_level`` 2 unless ``kafka`` says otherwise): a refused connection
        surfaces once, as the error the command reports, not as a stream of ``%3|FAIL``."""
        return {"log_level": 2, **self.client_common(), "bootstrap.servers": self.bootstrap_servers}


class ConnectionSettings(BaseSettings):
    """How to reach Kafka: the part of the settings every command shares (``run``, ``verify``,
    ``topics``, ``produce``, ``tail``, ``lag``). Other ``BRIDGE_*`` settings are ignored here."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="ignore", frozen=True
    )

    bootstrap_servers: str = Field("127.0.0.1:19092", description="Kafka bootstrap servers")
    sasl_username: str | None = Field(None, description="SASL user name")
    sasl_password: SecretStr | None = Field(None, description="SASL password (never logged)")
    kafka: dict[str, KafkaValue] = Field(
        default_factory=dict, description="librdkafka settings of every client (TLS, SASL)"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get(f"{ENV_PREFIX}CONFIG_FILE")
        if config_file:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=config_file))
        return tuple(sources)

    @field_validator("kafka")
    @classmethod
    def _no_forced_common_keys(cls, value: dict[str, KafkaValue]) -> dict[str, KafkaValue]:
        refuse_forced(value, FORCED_CONSUMER_KEYS | FORCED_PRODUCER_KEYS, "kafka")
        return value

    def source(self) -> Cluster:
        """The cluster the bridge reads (the top-level connection settings)."""
        names = ("bootstrap_servers", "sasl_username", "sasl_password", "kafka")
        return Cluster(**{name: getattr(self, name) for name in names})

    def client_common(self) -> dict[str, KafkaValue]:
        """librdkafka settings shared by both clients, credentials included (never logged)."""
        return self.source().client_common()

    def client_config(self) -> dict[str, KafkaValue]:  # a plain client's (see Cluster)
        return self.source().client_config()


class BridgeSettings(ConnectionSettings):
    """Every setting of the bridge. Env var = ``BRIDGE_`` + upper-cased name."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )

    # NoDecode: the env var may be JSON (`["a","b"]`) or comma-separated (`a,b`).
    input_topics: Annotated[list[str], NoDecode] = Field(min_length=1, description="topics to read")
    output_topic: str = Field(
        min_length=1, description="output topic, or per input topic: {topic}, source.{topic}"
    )
    keep_partition: KeepPartition = Field("auto", description="auto: when counts match")
    dlq_topic: str | None = Field(None, description="dead-letter topic; default <output>.dlq")
    on_error: Literal["dlq", "fail"] = Field("dlq", description="what a bad record does")
    record_retries: int = Field(2, ge=0, le=100, description="retries of a raising step")
    max_output_bytes: int = Field(1_000_000, gt=0, description="larger outputs are dead-lettered")
    max_dead_letter_ratio: float | None = Field(
        None, ge=0, lt=1, description="dead letters / input over the window that fails /readyz"
    )
    dead_letter_ratio_window: float = Field(
        60.0, gt=0, description="seconds of checkpoints the ratio covers (at least the last)"
    )

    group_id: str = Field("eos-bridge", min_length=1, description="consumer group")
    instance_id: str = Field(
        default_factory=socket.gethostname, description="stable per instance (pod name)"
    )
    transactional_id_prefix: str | None = Field(None, description="default: group_id")
    static_membership: bool = Field(True, description="group.instance.id = instance_id")
    group_protocol: Literal["classic", "consumer"] = Field(
        "consumer",
        description="consumer: KIP-848 incremental rebalancing (brokers >= 4.0); classic: eager",
    )
    leave_group_on_shutdown: Literal["scale-in", "always", "never"] = Field(
        "scale-in",
        description="static member, clean stop: leave the group for good (scale-in: when "
        "the pod's StatefulSet ordinal is at or above its replicas; docs/operations.md)",
    )
    processing_guarantee: Literal["exactly-once", "at-least-once"] = "exactly-once"
    commit_interval: float = Field(1.0, gt=0, description="seconds between checkpoints")
    commit_every: int = Field(0, ge=0, description="records per checkpoint (0 = off)")
    pipelined_commit: bool = Field(
        False, description="commit while the next batch is transformed (exactly-once, one cluster)"
    )
    transaction_timeout_ms: int = Field(60_000, ge=1000, le=900_000)
    batch_size: int = Field(2000, ge=1, le=100_000, description="consume(num_messages=...)")
    poll_timeout: float = Field(0.2, gt=0, le=5)
    shutdown_timeout: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="after SIGTERM the process is gone within this many seconds",
    )
    startup_timeout: float = Field(30.0, gt=0, le=3600, description="broker reachability deadline")
    call_timeout: float = Field(30.0, gt=0, le=300, description="each blocking Kafka call's")
    stuck_call_timeout: float | None = Field(None, gt=0, le=315, description="watchdog, exit 3")

    state_dir: Path = Field(Path(".state"), description="RocksDB stores live here")
    state_cache_max_bytes: int = Field(64 * 1024 * 1024, gt=0)
    state_block_cache_bytes: int = Field(
        64 * 1024 * 1024, ge=0, description="RocksDB block cache, shared by every store"
    )

    pipeline: str | None = Field(None, description="Python pipeline as module:attr")
    pipeline_spec: Path | None = Field(None, description="declarative pipeline YAML")
    input_format: Format = Field("json", description="input value format")
    input_key_format: Format = Field("bytes", description="input key format")
    output_format: Format = Field("json", description="output value format")
    output_key_format: Format = Field(
        "bytes", description="output key format (bytes: a non-bytes key is written as its str)"
    )
    schema_registry: RegistrySettings | None = Field(
        None, description="the Schema Registry of the avro, protobuf and json_schema formats"
    )
    input_schema: SchemaSettings = Field(_NO_SCHEMA, description="input value: reader schema")
    input_key_schema: SchemaSettings = Field(_NO_SCHEMA, description="input key: reader schema")
    output_schema: SchemaSettings = Field(_NO_SCHEMA, description="output value: schema, subject")
    output_key_schema: SchemaSettings = Field(_NO_SCHEMA, description="output key: the same")
    target_registry: RegistrySettings | None = Field(
        None, description="the registry of the output's schema IDs; default: schema_registry"
    )
    schema_ids: Literal["translate", "passthrough"] = Field(
        "translate", description="output_format=bytes with target_registry: rewrite the IDs?"
    )

    http_port: int = Field(9000, ge=0, le=65535, description="/metrics /livez /readyz; 0 = off")
    http_host: str = "0.0.0.0"
    log_format: LogFormat = "text"
    log_level: LogLevel = "INFO"

    target: Cluster | None = Field(
        None,
        description="the cluster written to (outputs, dead letters, changelogs); "
        "default: the cluster read from",
    )
    offsets_topic: str | None = Field(
        None,
        description="two clusters, exactly-once: the target's compacted topic of input "
        "positions; default <group_id>.offsets (docs/cross-cluster.md)",
    )
    mirror_offsets_to_source: bool = Field(
        False, description="two clusters: commit positions to the source group too (advisory)"
    )
    consumer: dict[str, KafkaValue] = Field(
        default_factory=dict, description="librdkafka settings of the consumer"
    )
    producer: dict[str, KafkaValue] = Field(
        default_factory=dict, description="librdkafka settings of the producer"
    )

    isolation_after_aborts: int = Field(5, ge=1, le=20, description="aborts in a row: isolate")

    @field_validator("input_topics", mode="before")
    @classmethod
    def _split_topics(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value.lstrip().startswith("["):
                return json.loads(value)
            return [t.strip() for t in value.split(",") if t.strip()]
        return value

    @field_validator("output_topic")
    @classmethod
    def _template(cls, value: str, info: ValidationInfo) -> str:
        check_template(value, info.data.get("input_topics", ()))
        return value

    @field_validator("consumer")
    @classmethod
    def _no_forced_consumer_keys(cls, value: dict[str, KafkaValue]) -> dict[str, KafkaValue]:
        refuse_forced(value, FORCED_CONSUMER_KEYS, "consumer")
        return value

    @field_validator("producer")
    @classmethod
    def _no_forced_producer_keys(cls, value: dict[str, KafkaValue]) -> dict[str, KafkaValue]:
        refuse_forced(value, FORCED_PRODUCER_KEYS, "producer")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> BridgeSettings:
        check_formats(
            {name: getattr(self, name) for name in FORMAT_SETTINGS},
            {name: getattr(self, name.replace("_format", "_schema")) for name in FORMAT_SETTINGS},
            registry=self.schema_registry is not None,
            target=self.target_registry is not None,
        )
        check_settings(self)  # the rules between settings (app.settings_checks)
        return self

    # ---- derived values --------------------------------------------------------------------

    def target_cluster(self) -> Cluster:
        """The cluster written to: ``target``, or the one read from."""
        return self.target or self.source()

    @property
    def cross_cluster(self) -> bool:
        """Source and target are different clusters."""
        return self.target is not None and (self.target.bootstrap_servers != self.bootstrap_servers)

    @property
    def exactly_once(self) -> bool:
        return self.processing_guarantee == "exactly-once"

    @property
    def output_topics(self) -> dict[str, str]:
        """Input topic → its output topic (``output_topic``, a template rendered per input)."""
        return output_topics(self.output_topic, self.input_topics)

    @property
    def dead_letter_topic(self) -> str:
        base = f"{self.group_id}" if is_template(self.output_topic) else self.output_topic
        return self.dlq_topic or f"{base}.dlq"

    @property
    def transactional_id(self) -> str:
        return f"{self.transactional_id_prefix or self.group_id}-{self.instance_id}"

    def masked(self) -> dict[str, Any]:
        """The effective configuration with secrets masked, for ``check-config`` and logs."""
        data = self.model_dump(mode="json")
        for section in ("kafka", "consumer", "producer"):
            data[section] = masked(data[section])
        if data.get("target"):
            data["target"]["kafka"] = masked(data["target"]["kafka"])
        for name in ("schema_registry", "target_registry"):  # basic_auth etc.: masked
            if (registry := getattr(self, name)) is not None:
                data[name]["url"] = registry.safe_url
        data["dlq_topic"] = self.dead_letter_topic
        data["transactional_id"] = self.transactional_id if self.exactly_once else None
        return data


def load_settings(config_file: Path | None = None, **overrides: Any) -> BridgeSettings:
    """Build the settings or raise :class:`ConfigError` with one readable line per problem."""
    return _load(BridgeSettings, config_file, overrides)


def load_connection(config_file: Path | None = None, **overrides: Any) -> ConnectionSettings:
    """Only the connection settings (for the tools): the same sources as the bridge's."""
    return _load(ConnectionSettings, config_file, overrides)


def load_tool_settings(cls: type[_S], config_file: Path | None = None, **overrides: Any) -> _S:
    """A tool's own settings (connection settings and a few more): the same sources."""
    return _load(cls, config_file, overrides)


def _load(cls: type[_S], config_file: Path | None, overrides: dict[str, Any]) -> _S:
    name = f"{ENV_PREFIX}CONFIG_FILE"
    if config_file is not None and not config_file.exists():
        raise ConfigError(f"config file {config_file} does not exist (--config)")
    path = str(config_file) if config_file is not None else os.environ.get(name)
    if path and not Path(path).exists():
        raise ConfigError(f"config file {path} does not exist ({name})")
    try:
        with _environ(name, path):  # settings_customise_sources reads the file's name there
            return cls(**overrides)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {yaml_problem(path, exc)}") from None
    except (SettingsError, json.JSONDecodeError) as exc:  # e.g. malformed JSON in an env var
        cause = f": {exc.__cause__}" if exc.__cause__ else ""
        raise ConfigError(f"invalid configuration: {exc}{cause}") from None


@contextmanager
def _environ(name: str, value: str | None) -> Iterator[None]:
    """``name=value`` in the environment for the block only (``--config`` must not leak)."""
    before = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem: ``setting (ENV_VAR): what is wrong``."""
    lines = ["invalid configuration:"]
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        if not loc:
            lines.append(f"  - {msg}")
            continue
        env = env_of(BridgeSettings, [str(part) for part in err["loc"]])
        if err["type"] == "extra_forbidden":
            msg = not_a_setting(BridgeSettings, [str(part) for part in err["loc"]]) or msg
        lines.append(f"  - {loc} ({env}): {msg}")
    return "\n".join(lines)
