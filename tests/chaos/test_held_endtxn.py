"""An ``EndTxn`` held in the network past its timeout never ends the next transaction.

The hazard librdkafka#5423 names (no Transactions V2, KIP-890 part 2, on this client): the
``EndTxn`` of transaction N times out, librdkafka retries it on a new connection and the retry
commits N; the original is still on its way, arrives while N+1 is open under the same epoch,
and commits N+1 early — records of a transaction whose input offsets were never committed
become visible to read_committed readers (and duplicates after its replay). The bridge answers
with a new epoch after any transaction one of whose transactional calls ran past
``request.timeout.ms`` (:meth:`app.engine.transactions.Transactions.commit`): the late request
is then fenced.

The rig: the transaction coordinator's Toxiproxy proxy is pointed at a :class:`HoldProxy`, which
holds the first ``EndTxn`` on its connection until the test releases it — after the retry
committed N and N+1 has a record in it — and keeps the broker's answer to it.
"""

from __future__ import annotations

import pytest

from app.engine.transactions import Transactions
from tests.chaos.test_delayed_produce import EpochLog, _coordinated_elsewhere, _owner
from tests.support.chaos import Rig
from tests.support.holdproxy import END_TXN, HoldProxy

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

FENCED = {47, 90}  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED
# librdkafka times a transactional request out after socket.timeout.ms and sends it again.
SOCKET_TIMEOUT_MS = 5000


def held_endtxn_round(rig: Rig, renew: bool) -> tuple[list[bytes], int, Transactions]:
    """Commit N with its first EndTxn held, put a record into N+1, release the held EndTxn;
    what a read_committed reader sees before N+1 commits, and the broker's answer to it."""
    topic = rig.kafka.create_topic(rig.kafka.unique("held-endtxn"), 1)
    leader = rig.leader(topic, 0)
    txn_id = _coordinated_elsewhere(rig, leader)
    coordinator = rig.transaction_coordinator(txn_id)
    broker = rig.cluster.brokers[coordinator - 1]
    assert broker.proxied_port is not None
    hold = HoldProxy(broker.proxied_port)
    rig.proxy.set_upstream(f"b{coordinator}", hold.port)
    try:
        txn = _owner(rig, txn_id, renew, EpochLog(), SOCKET_TIMEOUT_MS)
        txn.producer.produce(topic, b"committed-N", partition=0)
        txn.producer.flush(30)
        hold.arm(END_TXN)
        txn.commit([])  # the retry commits N; the original waits in the proxy
        assert len(hold.held) == 1, "the first EndTxn was held"
        txn.begin()
        txn.producer.produce(topic, b"open-N+1", partition=0)
        assert txn.producer.flush(30) == 0  # acknowledged: the partition is in N+1
        hold.release()
        assert hold.held[0].answered.wait(60), "the broker answered the held EndTxn"
        seen = [r.value or b"" for r in rig.kafka.read_all(topic)]
        txn.abort_quietly()
        return seen, hold.held[0].error_code(), txn
    finally:
        rig.proxy.set_upstream(f"b{coordinator}", broker.proxied_port)
        hold.close()


def test_a_late_endtxn_is_fenced_and_never_commits_the_next_transaction(rig: Rig) -> None:
    seen, error, txn = held_endtxn_round(rig, renew=True)
    assert seen == [b"committed-N"], seen  # nothing of the open N+1
    assert error in FENCED, error
    assert txn.epoch_bumps == 1
