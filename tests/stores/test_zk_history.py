"""ZooKeeper's transaction log read back (kctl.testing.zktxnlog) and replayed in Kafka's terms
(kctl.testing.zkhistory): hand-made logs for the decoder's edges, and a real server's log of
writes made through ZooKeeperStore, including the violations the replay must catch."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from kctl.errors import ControllerMovedError
from kctl.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kctl.stores.memory import PartitionSnapshot
from kctl.stores.zkdata import ControllerEpochZNode, ControllerZNode, TopicPartitionStateZNode, TopicZNode
from kctl.stores.base import TopicAssignment
from kctl.testing.zkhistory import ZooKeeperHistory
from kctl.testing.zktxnlog import (
    MAX_ENTRY_BYTES,
    OpCode,
    Operation,
    Transaction,
    TransactionLogError,
    read_file,
    read_transactions,
)
from kctl.testing.zookeeper import ZooKeeperEnsemble

T0 = TopicPartition("t", 0)

# --- A tiny jute writer for hand-made logs -----------------------------------------------------------


def _int(value: int) -> bytes:
    return struct.pack(">i", value)


def _buffer(data: bytes | None) -> bytes:
    return _int(-1) if data is None else _int(len(data)) + data


def _string(text: str) -> bytes:
    return _buffer(text.encode())


def _create(path: str, data: bytes, ephemeral: bool = False) -> bytes:
    return _string(path) + _buffer(data) + _int(1) + _int(31) + _string("world") + _string("anyone") + bytes(
        [ephemeral]) + _int(0)


def _set(path: str, data: bytes, version: int) -> bytes:
    return _string(path) + _buffer(data) + _int(version)


def _multi(*parts: tuple[int, bytes]) -> bytes:
    return _int(len(parts)) + b"".join(_int(code) + _buffer(body) for code, body in parts)


def _entry(session: int, zxid: int, code: int, record: bytes, checksum: int | None = None) -> bytes:
    body = struct.pack(">qiqqi", session, 0, zxid, 1000 + zxid, code) + record
    return struct.pack(">qi", zlib.adler32(body) if checksum is None else checksum, len(body)) + body + b"B"


def _log(tmp_path: Path, *entries: bytes, tail: bytes = b"\0" * 64) -> Path:
    path = tmp_path / "version-2" / "log.1"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(struct.pack(">4siq", b"ZKLG", 2, 7) + b"".join(entries) + tail)
    return path


def test_the_decoder_reads_creates_changes_multis_refusals_and_sessions(tmp_path: Path) -> None:
    path = _log(
        tmp_path,
        _entry(5, 1, OpCode.CREATE_SESSION, _int(2000)),
        _entry(5, 2, OpCode.CREATE, _create("/a", b"x", ephemeral=True)),
        _entry(5, 3, OpCode.MULTI, _multi((OpCode.CHECK, _string("/e") + _int(3)), (OpCode.SET_DATA, _set("/a", b"y", 1)))),
        _entry(5, 4, OpCode.MULTI, _multi((OpCode.ERROR, _int(-103)), (OpCode.ERROR, _int(-2)))),
        _entry(5, 5, OpCode.DELETE, _string("/a")),
        _entry(5, 6, OpCode.CLOSE_SESSION, _int(1) + _string("/b")),
        _entry(5, 7, 99, b"whatever"),
    )
    txns = list(read_file(path))
    assert [t.zxid for t in txns] == [1, 2, 3, 4, 5, 6, 7]
    assert txns[1].operations == (Operation(OpCode.CREATE, 1, "/a", b"x", ephemeral=True),)
    assert txns[2].multi and txns[2].operations == (
        Operation(OpCode.CHECK, 13, "/e", version=3), Operation(OpCode.SET_DATA, 5, "/a", b"y", version=1))
    assert txns[3].failed and txns[3].operations[0].error == -103 and not txns[2].failed
    assert txns[4].operations[0].path == "/a" and txns[5].operations[0].paths == ("/b",)
    assert txns[6].operations == (Operation(None, 99),)  # a type the reader does not know is kept, undecoded
    assert read_transactions(tmp_path) == txns


def test_a_partial_last_entry_ends_the_log_as_the_preallocated_zeros_do(tmp_path: Path) -> None:
    whole = _entry(5, 1, OpCode.DELETE, _string("/a"))
    cut = _entry(5, 2, OpCode.DELETE, _string("/b"))[:-6]
    assert [t.zxid for t in read_file(_log(tmp_path, whole, cut, tail=b""))] == [1]


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (_entry(5, 1, OpCode.DELETE, _string("/a"), checksum=12345), "checksum"),
        (_entry(5, 1, OpCode.CREATE, _string("/a") + _int(1 << 20)), "overruns"),
        (_entry(5, 1, OpCode.MULTI, _int(1 << 30)), "cannot fit"),
        (_entry(5, 1, OpCode.MULTI, _multi((OpCode.MULTI, _multi((OpCode.DELETE, _string("/a")))))), "multi inside"),
        (struct.pack(">qi", 0, MAX_ENTRY_BYTES + 1), "at most"),
        (_entry(5, 1, OpCode.DELETE, _buffer(b"\xff\xfe")), "not UTF-8"),
    ],
    ids=["checksum", "overrun", "vector", "nested-multi", "oversized", "not-utf8"],
)
def test_corrupt_entries_are_errors_naming_the_file_and_offset(tmp_path: Path, entry: bytes, problem: str) -> None:
    first = _entry(5, 1, OpCode.DELETE, _string("/ok"))
    path = _log(tmp_path, first, entry)
    with pytest.raises(TransactionLogError, match=problem) as caught:
        list(read_file(path))
    assert f"{path} at offset {16 + len(first)}" in str(caught.value)  # after the file header and the good entry


def test_a_file_that_is_not_a_transaction_log_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.1"
    path.write_bytes(b"PK\x03\x04 not a log at all")
    with pytest.raises(TransactionLogError, match="not a ZooKeeper transaction log"):
        list(read_file(path))


# --- The replay, from hand-made transactions ---------------------------------------------------------


def _txn(zxid: int, *ops: Operation, session: int = 1, multi: bool = True) -> Transaction:
    return Transaction(zxid, session, 0, ops, multi)


def _create_op(path: str, data: bytes, ephemeral: bool = False) -> Operation:
    return Operation(OpCode.CREATE, 1, path, data, ephemeral=ephemeral)


def _set_op(path: str, data: bytes, version: int) -> Operation:
    return Operation(OpCode.SET_DATA, 5, path, data, version=version)


def _check() -> Operation:
    return Operation(OpCode.CHECK, 13, "/controller_epoch", version=2)


def _state(leader: int, isr: tuple[int, ...], leader_epoch: int, controller_epoch: int = 1) -> bytes:
    return TopicPartitionStateZNode.encode(LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, isr, leader_epoch), controller_epoch))


def _registered(zxid: int, controller_id: int, epoch: int, session: int) -> Transaction:
    return _txn(zxid, _create_op("/controller", ControllerZNode.encode(controller_id, 0), ephemeral=True),
                _set_op("/controller_epoch", ControllerEpochZNode.encode(epoch), epoch), session=session)


def _topic(replicas: tuple[int, ...]) -> bytes:
    return TopicZNode.encode(TopicAssignment({0: ReplicaAssignment(replicas)}))


STATE = TopicPartitionStateZNode.path(T0)


def test_a_deleted_topic_created_again_is_a_new_partition_history() -> None:
    history = ZooKeeperHistory([
        _registered(1, 91, 1, session=7),
        _txn(2, _create_op("/brokers/topics/t", _topic((1, 2)))),
        _txn(3, _check(), _create_op(STATE, _state(1, (1, 2), 4)), session=7),
        _txn(4, _check(), Operation(OpCode.DELETE, 2, STATE), Operation(OpCode.DELETE, 2, "/brokers/topics/t"), session=7),
        _txn(5, _create_op("/brokers/topics/t", _topic((2, 1)))),
        _txn(6, _check(), _create_op(STATE, _state(2, (2, 1), 0)), session=7),
    ])
    assert history.violations() == []  # leader epoch 0 after 4: another partition, not a step back
    assert [(tp, [r.leader_epoch for r in rows]) for tp, rows in history.partitions] == [(T0, [4]), (T0, [0])]
    assert history.partitions[1][1] == [PartitionSnapshot((2, 1), (), (), 2, 0, (2, 1), 1)]


def test_the_replay_catches_stale_unfenced_foreign_and_backward_writes() -> None:
    history = ZooKeeperHistory([
        _txn(1, _create_op("/controller_epoch", b"0"), multi=False),
        _registered(2, 91, 1, session=7),
        _txn(3, _create_op("/brokers/topics/t", _topic((1, 2)))),
        _txn(4, _check(), _create_op(STATE, _state(1, (1, 2), 3)), session=7),
        _txn(5, _set_op(STATE, _state(2, (2,), 4), 1), session=7),  # outside a fenced multi
        _txn(6, _check(), _set_op(STATE, _state(1, (1,), 2), 2), session=7),  # leader epoch back, leader changed
        Transaction(7, 7, 0, (Operation(OpCode.CLOSE_SESSION, -11),)),  # 91's session expires
        _registered(8, 92, 2, session=8),
        _txn(9, _check(), _set_op(STATE, _state(2, (2,), 5, controller_epoch=1), 3), session=8),  # stale epoch
        _txn(10, _check(), _set_op("/admin/x", b"", 1), session=7),  # 91 writes in 92's epoch
        _txn(11, _set_op("/controller_epoch", b"5", 3), session=9),  # no registration
    ])
    violations = history.violations()
    assert violations == [
        "I1: zxid 0x5: /brokers/topics/t/partitions/0/state was written outside a fenced multi",
        "I1: zxid 0x9: t-0 was written with controller epoch 1 while the epoch was 2",
        "I1: zxid 0xb: /controller_epoch went from 2 to 5 without a controller registering",
        "I1: zxid 0xa: controller 91 (0x7) made a fenced write to /admin/x in epoch 2, which belongs to controller 92",
        "I2: leader epoch of t-0 went back from 4 to 2",
    ]
    assert history.node("/controller") is not None and history.epoch == 5


def test_unclean_leader_changes_are_counted_and_expired_sessions_drop_their_ephemerals() -> None:
    broker = b'{"version":5,"host":"h","port":1,"endpoints":["PLAINTEXT://h:1"],"jmx_port":-1,"timestamp":"0"}'
    history = ZooKeeperHistory([
        _registered(1, 91, 1, session=7),
        _txn(2, _create_op("/brokers/ids/3", broker, ephemeral=True), session=3),
        _txn(3, _create_op("/brokers/topics/t", _topic((1, 2, 3)))),
        _txn(4, _check(), _create_op(STATE, _state(1, (1, 2), 0)), session=7),
        _txn(5, _check(), _set_op(STATE, _state(3, (3,), 1), 1), session=7),  # 3 was not in the ISR
        Transaction(6, 3, 0, (Operation(OpCode.CLOSE_SESSION, -11),)),
    ])
    assert history.unclean_elections() == 1 and history.violations() == []
    assert history.live_brokers() == [] and [(b.broker_id, b.zxid, b.ended) for b in history.brokers] == [(3, 2, 6)]
    assert history.children("/brokers/ids") == []


# --- A real server's log ---------------------------------------------------------------------------


def test_a_real_servers_log_replays_the_stores_writes_and_refused_fences(
    zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str
) -> None:
    from kctl.stores.zookeeper import ZooKeeperStore

    hosts = zookeeper_server.hosts + zookeeper_chroot
    first, second = ZooKeeperStore(hosts), ZooKeeperStore(hosts)
    try:
        epoch, version = first.register_controller_and_increment_epoch(91)
        first.create_topic("t", {0: ReplicaAssignment((1, 2))})
        first.create_partition_states({T0: LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1, 2)), epoch)}, version)
        first.update_partition_states({T0: LeaderAndIsr(2, (2,), 1, 0)}, epoch, version)
        first.delete_controller(version)
        new_epoch, new_version = second.register_controller_and_increment_epoch(92)
        with pytest.raises(ControllerMovedError):  # the deposed controller's write is refused
            first.update_partition_states({T0: LeaderAndIsr(1, (1, 2), 2, 1)}, epoch, version)
        second.update_partition_states({T0: LeaderAndIsr(2, (2, 1), 2, 1)}, new_epoch, new_version)
        history = ZooKeeperHistory.read(zookeeper_server.servers[0].directory / "data", zookeeper_chroot)
        stored = second.get_partition_states([T0]).values
        sessions = (first.session_id, second.session_id)
    finally:
        first.close()
        second.close()

    assert [(r.epoch, r.controller_id, r.session) for r in history.registrations] == [
        (epoch, 91, sessions[0]), (new_epoch, 92, sessions[1])]
    assert history.violations() == [] and history.unclean_elections() == 0
    assert len(history.refused_fenced_writes) == 1 and history.refused_fenced_writes[0].session == sessions[0]
    assert [(r.leader, r.leader_epoch, r.isr, r.controller_epoch) for _, rows in history.partitions for r in rows] == [
        (1, 0, (1, 2), epoch), (2, 1, (2,), epoch), (2, 2, (2, 1), new_epoch)]
    assert history.states() == stored and history.topics()["t"].partitions == {0: ReplicaAssignment((1, 2))}
