"""The exception tree of eos-bridge.

::

    BridgeError                    root: everything the bridge raises on purpose
    ├── ConfigError                bad or inconsistent setting; refuse to start (exit 2)
    ├── KafkaFatalError            fenced producer, fatal client error, indeterminate commit;
    │                              close and exit non-zero (exit 3), Kubernetes restarts us
    ├── CheckpointAborted          abortable failure inside a transaction (delivery error,
    │                              ILLEGAL_GENERATION, ...): abort, drop uncommitted state,
    │                              rewind to the committed offsets, carry on
    ├── PartitionsMigrated         partitions were lost while we held uncommitted work: abort,
    │                              drop their state, rejoin
    ├── StateCorrupted             local state unusable: wipe it and restore from the changelog
    ├── RecoveryError              changelog recovery could not complete
    └── RecordError                one record could not be processed; goes to the dead-letter
        ├── DeserializationError   topic (policy ``dlq``) or stops the bridge (policy ``fail``)
        ├── StepError
        │   └── ExpressionLimit    a spec expression would exceed a CPU/memory bound
        ├── OutputTooLarge
        └── ...                    one class per kind of failure: app.pipeline.errors

Messages name the setting, topic/partition/offset and what to do.
"""

from __future__ import annotations


class BridgeError(Exception):
    """Root of every error eos-bridge raises on purpose."""


class ConfigError(BridgeError):
    """A setting is missing, malformed or inconsistent; the message names it."""


class KafkaFatalError(BridgeError):
    """The producer is fenced or fatally broken, or a commit outcome is unknown."""


class CheckpointAborted(BridgeError):
    """The open transaction must be aborted; processing resumes from committed offsets."""


class PartitionsMigrated(BridgeError):
    """Partitions were revoked or lost while uncommitted work existed for them."""


class StateCorrupted(BridgeError):
    """Local state cannot be trusted; it must be wiped and restored from the changelog."""


class RecoveryError(BridgeError):
    """Restoring state from a changelog topic failed."""


class RecordError(BridgeError):
    """One input record could not be turned into output."""


class DeserializationError(RecordError):
    """The input value could not be decoded."""


class StepError(RecordError):
    """A pipeline step raised for this record (after its retries)."""


class ExpressionLimit(StepError):
    """A spec expression would build too large a value (huge power, repeat, width...)."""


class OutputTooLarge(RecordError):
    """An output record exceeds ``max_output_bytes``."""
