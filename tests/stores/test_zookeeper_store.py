"""ZooKeeperStore on real ZooKeeper servers: the store contract, plus what only ZooKeeper has.

Kafka's bytes in the znodes, multi chunking under jute.maxbuffer, fencing across many multis, ACLs,
chroots, real session expiry, reconnects and the loss of the ensemble's leader. The servers are
started by the fixtures of :mod:`kctl.testing.zookeeper` (a session-wide standalone server with a
chroot per test, or a 3-server ensemble per test); without Java/ZooKeeper these tests skip, except
under ``CI=true`` where they fail.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kctl.errors import (
    ControllerMovedError,
    CorruptDataError,
    NoNodeError,
    StoreError,
    StoreUnavailableError,
)
from kctl.model import (
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    ReplicaAssignment,
    TopicPartition,
)
from kctl.registry import StateStoreRegistry
from kctl.stores import MATCH_ANY_VERSION, ChangeType, StateStore, WatchEvent, WatchKind, paths, zkclient
from kctl.stores.znode import Op
from kctl.testing.ports import free_ports
from kctl.testing.store_contract import ASSIGNMENT, T0, Recorder, StoreContract, broker, state
from kctl.testing.zookeeper import ZooKeeperEnsemble, four_letter_word, in_ci, require_zookeeper

try:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError
    from kazoo.protocol.serialization import CheckVersion, Create, Delete, MultiHeader, SetData
    from kazoo.security import OPEN_ACL_UNSAFE, make_acl, make_digest_acl
except ImportError:
    if in_ci():
        raise
    pytest.skip("kazoo is not installed: pip install 'kctl[zookeeper]'", allow_module_level=True)

from kctl.stores import zookeeper
from kctl.stores.zookeeper import ZooKeeperStore

GARBAGE = b"\x00not JSON any reader accepts"
END = MultiHeader(-1, True, -1).serialize()  # a multi's end marker
MIB = 1024 * 1024
TOPIC_DATA = b'{"version":3,"partitions":{"0":[1,2]}}'

Connect = Callable[..., ZooKeeperStore]


@pytest.fixture
def connect(zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str) -> Iterator[Connect]:
    """Open sessions on the shared server in this test's chroot; all are closed at teardown."""
    opened: list[ZooKeeperStore] = []

    def open_store(**options: Any) -> ZooKeeperStore:
        store = ZooKeeperStore(zookeeper_server.hosts, zookeeper_chroot, **options)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


@pytest.fixture
def store(connect: Connect) -> ZooKeeperStore:
    return connect()


@pytest.fixture
def raw(zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str, store: ZooKeeperStore) -> Iterator[KazooClient]:
    """A plain kazoo client in the test's chroot (which ``store`` created), to see the bytes."""
    client = KazooClient(zookeeper_server.hosts + zookeeper_chroot)
    client.start()
    yield client
    client.stop()
    client.close()


class TestZooKeeperStoreContract(StoreContract):
    @pytest.fixture
    def store_factory(self, connect: Connect) -> Callable[[], StateStore]:
        return connect

    @pytest.fixture
    def corrupt_node(self, raw: KazooClient) -> Callable[[str], None]:
        def plant(path: str) -> None:
            if raw.exists(path):
                raw.set(path, GARBAGE)
            else:
                raw.create(path, GARBAGE, makepath=True)

        return plant

    @pytest.fixture
    def expire_session(self) -> Callable[[ZooKeeperStore], None]:
        return ZooKeeperStore.expire_session

    @pytest.fixture
    def reconnect_session(self) -> Callable[[ZooKeeperStore], None]:
        return ZooKeeperStore.reconnect


# --- Kafka's layout, byte for byte -----------------------------------------------------------------


def test_znodes_hold_kafkas_bytes(store: ZooKeeperStore, raw: KazooClient) -> None:
    _, version = store.register_controller_and_increment_epoch(1)
    assert raw.get("/controller_epoch")[0] == b"1"
    controller = json.loads(raw.get("/controller")[0])
    assert list(controller) == ["version", "brokerid", "timestamp", "kraftControllerEpoch"]  # Kafka 3.4+'s
    assert (controller["version"], controller["brokerid"], controller["kraftControllerEpoch"]) == (2, 1, -1)
    assert controller["timestamp"].isdigit()

    store.create_topic("t", {0: ReplicaAssignment((1, 2, 3))}, "jp0oK1lQRSe1BV8vLzT0zg", {"min.insync.replicas": "2"})
    assert raw.get("/brokers/topics/t")[0] == (
        b'{"version":3,"topic_id":"jp0oK1lQRSe1BV8vLzT0zg","partitions":{"0":[1,2,3]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    assert raw.get("/config/topics/t")[0] == b'{"version":1,"config":{"min.insync.replicas":"2"}}'
    store.create_partition_states({T0: state(1, (1, 2, 3))}, version)
    assert raw.get("/brokers/topics/t/partitions/0/state")[0] == (
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'
    )
    assert raw.get("/brokers/topics/t/partitions")[0] == raw.get("/brokers/topics/t/partitions/0")[0] == b""

    isr_change = store.create_isr_change_notification([TopicPartition("topic-a", 0), TopicPartition("topic-b", 0)])
    assert raw.get(f"/isr_change_notification/{isr_change}")[0] == (
        b'{"version":1,"partitions":[{"topic":"topic-a","partition":0},{"topic":"topic-b","partition":0}]}'
    )
    log_dir_event = store.create_log_dir_event_notification(3)
    assert raw.get(f"/log_dir_event_notification/{log_dir_event}")[0] == b'{"version":1,"broker":3,"event":1}'
    store.create_partition_reassignments({TopicPartition("foo", 0): [1, 2]})
    assert raw.get("/admin/reassign_partitions")[0] == (
        b'{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]}]}'
    )
    store.create_preferred_replica_election([TopicPartition("foo", 0)])
    assert (
        raw.get("/admin/preferred_replica_election")[0] == b'{"version":1,"partitions":[{"topic":"foo","partition":0}]}'
    )
    store.create_topic_deletion("t")
    assert raw.get("/admin/delete_topics/t")[0] == b""

    store.set_topic_config("t", {"retention.ms": "1000"})  # as Kafka's changeTopicConfig: a notification too
    assert raw.get("/config/topics/t")[0] == b'{"version":1,"config":{"retention.ms":"1000"}}'
    assert raw.get_children("/config/changes") == ["config_change_0000000000"]
    assert raw.get("/config/changes/config_change_0000000000")[0] == b'{"version":2,"entity_path":"topics/t"}'

    cluster_id = store.get_or_create_cluster_id()
    assert json.loads(raw.get("/cluster/id")[0]) == {"version": "1", "id": cluster_id}

    store.register_broker(BrokerInfo(1, (EndPoint("broker1", 9092),), rack="rack-a"))
    registration = json.loads(raw.get("/brokers/ids/1")[0])
    assert registration.pop("timestamp").isdigit()
    assert registration == {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": ["PLAINTEXT://broker1:9092"],
        "jmx_port": -1,
        "port": 9092,
        "host": "broker1",
        "version": 5,
        "rack": "rack-a",
    }
    for persistent in paths.PERSISTENT_PATHS:
        assert raw.exists(persistent), persistent


def test_reads_what_kafka_wrote(store: ZooKeeperStore, raw: KazooClient) -> None:
    raw.create("/controller", b'{"version":2,"brokerid":3,"timestamp":"1600000000000","kraftControllerEpoch":-1}')
    raw.create("/brokers/topics/v1", b'{"version":1,"partitions":{"0":[1,2]}}')
    raw.create(
        "/brokers/topics/v2",
        b'{"version":2,"partitions":{"0":[1,2,3],"1":[2,3,1]},"adding_replicas":{},"removing_replicas":{}}',
    )
    raw.create(
        "/brokers/topics/v2/partitions/0/state",
        b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":7,"isr":[2],"leader_recovery_state":1}',
        makepath=True,
    )
    raw.set("/brokers/topics/v2/partitions/0/state", raw.get("/brokers/topics/v2/partitions/0/state")[0])
    raw.create("/brokers/ids/1", b'{"version":1,"host":"old","port":9092,"jmx_port":9999,"timestamp":"1"}')
    raw.create(
        "/brokers/ids/2",
        b'{"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},'
        b'"endpoints":["CLIENT://[::1]:9093","REPLICATION://b2:9094"],"jmx_port":-1,"host":"b2","timestamp":"1",'
        b'"port":9094,"version":4,"rack":null}',
    )

    assert store.get_controller_id() == 3
    assignments = store.get_topic_assignments(["v1", "v2"]).values
    assert dict(assignments["v1"].partitions) == {0: ReplicaAssignment((1, 2))}
    assert dict(assignments["v2"].partitions) == {0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 1))}
    assert store.get_partition_states([TopicPartition("v2", 0)]).values == {
        TopicPartition("v2", 0): LeaderIsrAndControllerEpoch(
            LeaderAndIsr(2, (2,), 7, partition_epoch=1, leader_recovery_state=LeaderRecoveryState.RECOVERING), 3
        )
    }
    brokers = store.get_all_brokers()
    assert brokers[1][0] == BrokerInfo(1, (EndPoint("old", 9092),), jmx_port=9999)
    assert brokers[2][0] == BrokerInfo(
        2, (EndPoint("::1", 9093, "CLIENT", "SSL"), EndPoint("b2", 9094, "REPLICATION", "PLAINTEXT"))
    )


def test_broker_epoch_is_the_czxid_of_the_ephemeral_registration(store: ZooKeeperStore, raw: KazooClient) -> None:
    epoch = store.register_broker(broker(1))
    stat = raw.exists("/brokers/ids/1")
    assert stat.czxid == epoch and stat.ephemeralOwner == store.session_id


def test_a_lost_election_response_is_recognised(store: ZooKeeperStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's recovery path: our multi landed but we retried from the epoch read before it."""
    assert store.register_controller_and_increment_epoch(1) == (1, 1)
    reads = iter([(0, 0)])
    real = store.get_controller_epoch
    monkeypatch.setattr(store, "get_controller_epoch", lambda: next(reads, None) or real())
    assert store.register_controller_and_increment_epoch(1) == (1, 1)


# --- Multi transactions: fencing, chunking, per-item failures --------------------------------------


def many_partitions(store: StateStore, count: int, version: int, topic: str = "big") -> list[TopicPartition]:
    store.create_topic(topic, {p: ReplicaAssignment((1, 2)) for p in range(count)})
    tps = [TopicPartition(topic, p) for p in range(count)]
    created = store.create_partition_states({tp: state(1, (1, 2)) for tp in tps}, version)
    assert set(created.values()) == {None}
    return tps


def test_a_deposed_controller_writes_nothing_in_any_of_its_multis(connect: Connect) -> None:
    old, new = connect(max_multi_ops=50), connect()
    _, old_version = old.register_controller_and_increment_epoch(1)
    tps = many_partitions(old, 1000, old_version)  # 20 fenced multis
    new.delete_controller(MATCH_ANY_VERSION)  # the old controller's session lingers (a zombie)
    _, new_version = new.register_controller_and_increment_epoch(2)
    before = new.get_partition_states(tps).values

    with pytest.raises(ControllerMovedError):
        old.update_partition_states({tp: LeaderAndIsr(2, (2,), 1) for tp in tps}, 1, old_version)
    with pytest.raises(ControllerMovedError):
        old.update_partition_states({}, 1, old_version)  # even with nothing to write

    assert new.get_partition_states(tps).values == before
    updates = {tp: s.leader_and_isr.new_leader_and_isr(2, (2, 1)) for tp, s in before.items()}
    assert len(new.update_partition_states(updates, 2, new_version).successful) == 1000
    after = new.get_partition_states(tps).values
    assert all(
        s == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, (2, 1), 1, partition_epoch=1), 2) for s in after.values()
    )


def test_a_bulk_write_over_jute_maxbuffer_is_split_into_multis(
    connect: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = connect(max_multi_ops=100_000)  # only the byte limit splits
    _, version = store.register_controller_and_increment_epoch(1)
    wide_isr = tuple(range(100_000, 100_300))  # 2.2 KB of JSON per state, 4.4 MB per bulk write
    store.create_topic("wide", {p: ReplicaAssignment((1,)) for p in range(2000)})
    tps = [TopicPartition("wide", p) for p in range(2000)]
    sent: list[bytes] = []  # multis' ops (those the native codec encoded end with the end marker)
    send, send_raw = store.client._send_multi, store.client._send_raw

    def recording(wires: list[bytes]) -> Any:
        sent.append(b"".join(wires) + END)
        return send(wires)

    def recording_raw(opcode: int, body: bytes) -> Any:
        sent.append(body)
        return send_raw(opcode, body)

    monkeypatch.setattr(store.client, "_send_multi", recording)
    monkeypatch.setattr(store.client, "_send_raw", recording_raw)

    created = store.create_partition_states({tp: state(1, wide_isr) for tp in tps}, version)
    raw_before = len(sent)
    updated = store.update_partition_states({tp: LeaderAndIsr(2, wide_isr, 1) for tp in tps}, 1, version)

    assert len(sent) - raw_before >= 5  # the native codec's multis: 4.4 MB split too
    assert all(body.endswith(END) for body in sent)
    lengths = [8 + len(body) for body in sent]  # what the server checks: xid, type, ops, end
    assert sum(lengths) > 8 * MIB and max(lengths) < MIB and len(lengths) >= 10
    assert all(struct.unpack_from("!i", body)[0] == CheckVersion.type for body in sent)  # each fenced
    assert set(created.values()) == {None} and len(updated.successful) == 2000
    stored = store.get_partition_states(tps).values
    assert all(s.leader_and_isr == LeaderAndIsr(2, wide_isr, 1, partition_epoch=1) for s in stored.values())


@pytest.mark.parametrize("auth", [None, ("alice", "secret")], ids=["open_acl", "digest_acl"])
def test_multi_ops_are_encoded_as_kazoo_encodes_them(connect: Connect, auth: tuple[str, str] | None) -> None:
    """The store encodes multi operations itself (sizes exact for chunking): kazoo is the oracle."""
    store = connect(auth=auth)
    chroot = store.chroot
    acl = (
        OPEN_ACL_UNSAFE if auth is None else [make_digest_acl(*auth, all=True), make_acl("world", "anyone", read=True)]
    )
    cases = [
        (Op("check", "/controller_epoch", version=3), CheckVersion(chroot + "/controller_epoch", 3)),
        (
            Op("create", "/isr_change_notification/isr_change_", b"{}", sequential=True),
            Create(chroot + "/isr_change_notification/isr_change_", b"{}", acl, 2),
        ),
        (Op("create", "/controller", b"x", ephemeral=True), Create(chroot + "/controller", b"x", acl, 1)),
        (
            Op("set", "/brokers/topics/t/partitions/0/state", b"{}", 7),
            SetData(chroot + "/brokers/topics/t/partitions/0/state", b"{}", 7),
        ),
        (Op("delete", "/admin/delete_topics/t"), Delete(chroot + "/admin/delete_topics/t", -1)),
    ]
    for op, expected in cases:
        assert store.client._wire(op) == MultiHeader(expected.type, False, -1).serialize() + expected.serialize(), op


def test_the_server_refuses_a_multi_over_its_jute_maxbuffer(connect: Connect) -> None:
    """Why the store splits: told the limit is higher than the server's, one request is too big."""
    store = connect(jute_maxbuffer=64 * MIB, max_multi_ops=100_000, session_timeout=2.0)
    store.create_topic("wide", {p: ReplicaAssignment((1,)) for p in range(1000)})
    states = {TopicPartition("wide", p): state(1, tuple(range(100_000, 100_300))) for p in range(1000)}
    with pytest.raises(StoreUnavailableError, match="jute.maxbuffer"):
        store.create_partition_states(states, MATCH_ANY_VERSION)


def test_a_single_write_over_jute_maxbuffer_is_refused_before_sending(store: ZooKeeperStore) -> None:
    with pytest.raises(StoreError, match="jute.maxbuffer") as raised:
        store.create_topic("huge", {0: ReplicaAssignment((1,))}, config={"x": "y" * (2 * MIB)})
    assert raised.value.path is not None
    assert store.get_all_topics() == set()


def test_stale_versions_only_hold_back_their_own_partitions(connect: Connect) -> None:
    store, leader = connect(max_multi_ops=10), connect()
    tps = many_partitions(store, 100, MATCH_ANY_VERSION)
    shrunk = tps[3::13]  # partition leaders change their ISR meanwhile, spread over the multis
    leader.update_partition_states({tp: LeaderAndIsr(1, (1,), 0) for tp in shrunk}, 1, MATCH_ANY_VERSION)
    absent = [TopicPartition("big", 100), TopicPartition("gone", 0)]

    result = store.update_partition_states(
        {tp: LeaderAndIsr(2, (2,), 1) for tp in [*tps, *absent]}, 5, MATCH_ANY_VERSION
    )

    assert result.to_retry == shrunk
    assert list(result.failed) == absent and all(isinstance(e, NoNodeError) for e in result.failed.values())
    assert set(result.successful) == set(tps) - set(shrunk)
    found = store.get_partition_states(tps).values
    assert all(found[tp].leader_and_isr.isr == (1,) for tp in shrunk)
    assert all(found[tp].controller_epoch == 5 for tp in result.successful)


def test_bulk_operations_on_50k_partitions(connect: Connect) -> None:
    """Correctness at scale; the speed is measured in benches/bench_zookeeper_store.py."""
    store = connect()
    _, version = store.register_controller_and_increment_epoch(1)
    tps = [tp for i in range(50) for tp in many_partitions(store, 1000, version, f"topic-{i}")]
    found = store.get_partition_states(tps)
    updates = {tp: s.leader_and_isr.new_leader_and_isr(2, (2,)) for tp, s in found.values.items()}
    result = store.update_partition_states(updates, 1, version)
    assert len(found.values) == len(result.successful) == 50_000 and not found.errors
    assert store.get_partition_states(tps[-1:]).values[tps[-1]] == LeaderIsrAndControllerEpoch(
        LeaderAndIsr(2, (2,), 1, partition_epoch=1), 1
    )
    store.delete_topic("topic-0", version)  # 2001 znodes, children first
    assert "topic-0" not in store.get_all_topics()


@pytest.mark.parametrize("multi_read", [True, False], ids=["multi_read", "pipelined_gets"])
def test_bulk_reads_report_each_key(connect: Connect, raw: KazooClient, multi_read: bool) -> None:
    store = connect(multi_read=multi_read, max_read_ops=7)
    tps = many_partitions(store, 30, MATCH_ANY_VERSION)
    raw.set("/brokers/topics/big/partitions/4/state", GARBAGE)
    raw.delete("/brokers/topics/big/partitions/5", recursive=True)
    store.register_broker(broker(1))
    raw.create("/brokers/ids/9", GARBAGE)

    found = store.get_partition_states(tps)

    assert set(found.values) == set(tps) - {tps[4], tps[5]}
    assert isinstance(found.errors[tps[4]], CorruptDataError) and "partitions/4/state" in str(found.errors[tps[4]])
    assert isinstance(found.errors[tps[5]], NoNodeError)
    assert list(store.get_all_brokers()) == [1]
    assert store.get_topic_partition_ids("big") == [p for p in range(30) if p != 5]
    store.delete_topic("big", MATCH_ANY_VERSION)
    assert store.get_all_topics() == set()


# --- Sessions, connections, servers ----------------------------------------------------------------


def test_an_expired_session_is_unusable_until_reconnect(connect: Connect) -> None:
    store, watcher = connect(), connect()
    store.register_broker(broker(1))
    first = store.session_id

    store.expire_session()

    assert watcher.get_all_brokers() == {}
    with pytest.raises(StoreUnavailableError, match="expired; reconnect"):
        store.get_all_topics()
    store.expire_session()  # already expired: nothing more happens
    recorder = Recorder()
    store.add_listener(recorder)
    store.watch(WatchKind.TOPICS)  # recorded now, armed by reconnect()
    store.reconnect()
    assert store.session_id not in (0, first)
    store.reconnect()  # live: nothing to do
    assert store.get_all_brokers() == {}
    watcher.create_topic("t", ASSIGNMENT)
    recorder.wait_for(WatchEvent(WatchKind.TOPICS, ChangeType.CHILDREN_CHANGED))
    store.close()
    with pytest.raises(StoreUnavailableError, match="closed"):
        store.reconnect()


def test_unreachable_zookeeper_is_unavailable_and_names_the_hosts() -> None:
    port = free_ports(1)[0]
    with pytest.raises(StoreUnavailableError, match=f"127.0.0.1:{port}"):
        ZooKeeperStore(f"127.0.0.1:{port}", connection_timeout=1.0)


def test_the_chroot_is_created_and_isolates_clusters(zookeeper_server: ZooKeeperEnsemble) -> None:
    base = f"/kctl-tests-{uuid.uuid4().hex}"
    nested = ZooKeeperStore(zookeeper_server.hosts, f"{base}/a/b")
    in_connect_string = ZooKeeperStore(f"{zookeeper_server.hosts}{base}/c")
    try:
        nested.create_topic("t", ASSIGNMENT)
        assert in_connect_string.get_all_topics() == set()
        assert in_connect_string.chroot == f"{base}/c"
        again = nested.new_session()
        assert again.get_all_topics() == {"t"}
        again.close()
    finally:
        nested.close()
        in_connect_string.close()
    root = KazooClient(zookeeper_server.hosts)
    root.start()
    try:
        assert root.exists(f"{base}/a/b/brokers/topics/t") and root.exists(f"{base}/c/brokers/ids")
    finally:
        root.stop()
        root.close()
    with pytest.raises(ValueError, match="twice"):
        ZooKeeperStore(f"{zookeeper_server.hosts}/x", "/y")


def test_only_the_writing_identity_can_change_what_it_wrote(
    connect: Connect, zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str
) -> None:
    alice = connect(auth=("alice", "secret"))  # the first session: it creates the chroot too
    _, version = alice.register_controller_and_increment_epoch(1)
    alice.create_topic("t", ASSIGNMENT)
    alice.create_partition_states({T0: state(1, (1, 2, 3))}, version)
    alice.delete_controller(version)
    mallory, anonymous = connect(auth=("mallory", "guess")), connect()
    before = mallory.get_partition_states([T0]).values  # everyone may read

    with pytest.raises(StoreError, match="not authorised"):
        mallory.register_controller_and_increment_epoch(2)
    for intruder in (mallory, anonymous):
        failed = intruder.update_partition_states({T0: LeaderAndIsr(2, (2,), 1)}, 1, MATCH_ANY_VERSION).failed
        assert "not authorised" in str(failed[T0])
    client = KazooClient(zookeeper_server.hosts + zookeeper_chroot, auth_data=[("digest", "mallory:guess")])
    client.start()
    try:
        for path in ("/controller_epoch", "/brokers/topics/t/partitions/0/state"):
            with pytest.raises(NoAuthError):
                client.set(path, b"1")
    finally:
        client.stop()
        client.close()

    assert alice.get_controller_epoch() == (1, 1) and alice.get_partition_states([T0]).values == before
    assert alice.register_controller_and_increment_epoch(1) == (2, 2)  # its owner still can


def test_the_store_survives_the_loss_of_the_zookeeper_leader(zookeeper_ensemble: ZooKeeperEnsemble) -> None:
    store = ZooKeeperStore(zookeeper_ensemble.hosts, "/kctl")
    other = store.new_session()
    try:
        recorder = Recorder()
        store.add_listener(recorder)
        store.watch(WatchKind.TOPICS)
        _, version = store.register_controller_and_increment_epoch(1)
        tps = many_partitions(store, 200, version)

        zookeeper_ensemble.leader().kill()
        # issued at once: the writes wait out the election on a new connection, same session
        result = store.update_partition_states({tp: LeaderAndIsr(2, (2,), 1) for tp in tps}, 1, version)

        assert len(result.successful) == 200
        assert store.get_controller_id() == 1  # the session, and its ephemeral node, survived
        other.create_topic("after", ASSIGNMENT)
        recorder.wait_for(WatchEvent(WatchKind.TOPICS, ChangeType.CHILDREN_CHANGED))
        assert other.get_partition_states(tps).values[tps[0]].leader_and_isr == LeaderAndIsr(2, (2,), 1, 1)
    finally:
        store.close()
        other.close()


def test_changes_missed_while_disconnected_are_reported(zookeeper_ensemble: ZooKeeperEnsemble) -> None:
    follower = next(server for server in zookeeper_ensemble.servers if server.mode() == "follower")
    others = ",".join(s.address for s in zookeeper_ensemble.servers if s is not follower)
    store = ZooKeeperStore(follower.address, "/kctl", session_timeout=30.0)
    other = ZooKeeperStore(others, "/kctl")
    try:
        recorder = Recorder()
        store.add_listener(recorder)
        store.watch(WatchKind.TOPICS)
        store.watch(WatchKind.CONTROLLER)
        store.watch(WatchKind.PREFERRED_REPLICA_ELECTION)

        follower.kill()  # the store's only server: it is disconnected, its session lives on
        other.create_topic("missed", ASSIGNMENT)
        other.register_controller_and_increment_epoch(2)
        follower.start()

        recorder.wait_for(WatchEvent(WatchKind.TOPICS, ChangeType.CHILDREN_CHANGED), timeout=30)
        recorder.wait_for(WatchEvent(WatchKind.CONTROLLER, ChangeType.CREATED))
        assert store.get_all_topics() == {"missed"}
        assert all(e.kind is not WatchKind.PREFERRED_REPLICA_ELECTION for e in recorder.events)
    finally:
        store.close()
        other.close()


# --- The launcher ------------------------------------------------------------------------------------


def test_the_ensemble_launcher(zookeeper_ensemble: ZooKeeperEnsemble) -> None:
    servers = zookeeper_ensemble.servers
    assert zookeeper_ensemble.hosts == ",".join(f"127.0.0.1:{s.client_port}" for s in servers)
    assert sorted(s.mode() or "" for s in servers) == ["follower", "follower", "leader"]
    assert "Zookeeper version" in four_letter_word(servers[0].client_port, "srvr")
    leader = zookeeper_ensemble.leader()
    leader.kill()
    assert not leader.running and leader.pid is None and leader.mode() is None
    zookeeper_ensemble.wait_until_serving()
    assert zookeeper_ensemble.leader() is not leader
    leader.start()  # back from its data directory, as a follower of the new leader
    zookeeper_ensemble.wait_until_serving()
    assert leader.mode() == "follower"


def test_a_stopped_server_leaves_nothing_behind() -> None:
    ensemble = ZooKeeperEnsemble(1, installation=require_zookeeper()).start()
    server = ensemble.servers[0]
    pid, directory = server.pid, server.directory
    assert pid is not None and server.mode() == "standalone" and directory.exists()
    ensemble.stop()
    assert not server.running and not directory.exists() and four_letter_word(server.client_port, "srvr") == ""
    with pytest.raises(ValueError, match="at least one server"):
        ZooKeeperEnsemble(0, installation=require_zookeeper())


# --- Watches and the handler -------------------------------------------------------------------------


def test_watch_keys_are_type_checked(store: ZooKeeperStore) -> None:
    with pytest.raises(TypeError, match="BROKER watch takes a int key"):
        store.watch(WatchKind.BROKER, "1")
    with pytest.raises(TypeError, match="takes no key"):
        store.watch(WatchKind.TOPICS, "t")
    with pytest.raises(TypeError, match="TopicPartition"):
        store.watch(WatchKind.PARTITION_STATE, ("t", 0))


def test_watches_set_together_take_one_round_and_fire_as_single_ones(
    store: ZooKeeperStore, raw: KazooClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failover watches every topic and broker at once (``watch_all``): their watches are set
    by one round of pipelined requests, and each then fires as a watch set alone would, that of
    a topic created later included."""
    store.create_topic("a", {0: ASSIGNMENT[0]})
    recorder, rounds = Recorder(), []
    store.add_listener(recorder)
    gather = store.client._gather

    def counted(sends: Any, *rest: Any) -> Any:
        sends = list(sends)
        rounds.append(len(sends))
        return gather(sends, *rest)

    monkeypatch.setattr(store.client, "_gather", counted)
    store.watch_all(WatchKind.TOPIC, ["a", "b"])
    store.watch_all(WatchKind.TOPIC, ["a", "b"])  # set already: nothing sent
    assert rounds == [2]
    with pytest.raises(TypeError, match="BROKER watch takes a int key"):
        store.watch_all(WatchKind.BROKER, [1, "2"])
    assert (WatchKind.BROKER, 1) not in store.client._watches  # nothing registered
    raw.set("/brokers/topics/a", TOPIC_DATA)
    recorder.take(WatchEvent(WatchKind.TOPIC, ChangeType.DATA_CHANGED, "a"))
    store.create_topic("b", {0: ASSIGNMENT[0]})
    raw.set("/brokers/topics/b", TOPIC_DATA)
    recorder.wait_for(WatchEvent(WatchKind.TOPIC, ChangeType.DATA_CHANGED, "b"))
    raw.set("/brokers/topics/a", TOPIC_DATA)  # re-armed when it fired
    recorder.wait_for(WatchEvent(WatchKind.TOPIC, ChangeType.DATA_CHANGED, "a"))
    assert {e.key for e in recorder.events} == {"a", "b"}
    assert {e.change for e in recorder.events} == {ChangeType.DATA_CHANGED}


def test_every_change_of_the_controller_znode_is_reported(
    store: ZooKeeperStore, connect: Connect, raw: KazooClient
) -> None:
    recorder, candidate = Recorder(), connect()
    store.add_listener(recorder)
    store.watch(WatchKind.CONTROLLER)
    candidate.register_controller_and_increment_epoch(2)
    recorder.wait_for(WatchEvent(WatchKind.CONTROLLER, ChangeType.CREATED))  # re-armed: see the next
    raw.set("/controller", b'{"version":1,"brokerid":2,"timestamp":"2"}')
    recorder.wait_for(WatchEvent(WatchKind.CONTROLLER, ChangeType.DATA_CHANGED))
    candidate.close()
    recorder.wait_for(WatchEvent(WatchKind.CONTROLLER, ChangeType.DELETED))
    assert [e.change for e in recorder.events] == [ChangeType.CREATED, ChangeType.DATA_CHANGED, ChangeType.DELETED]


def test_a_change_undone_before_the_re_arm_is_reported_whole(store: ZooKeeperStore, raw: KazooClient) -> None:
    """A node created then deleted before its watch is re-armed: both changes reach listeners."""
    recorder = Recorder()
    store.add_listener(recorder)
    store.watch(WatchKind.REASSIGN_PARTITIONS)
    blocker = threading.Event()
    store.client._dispatch(lambda: blocker.wait(10))  # hold the watch thread while the node comes and goes
    raw.create("/admin/reassign_partitions", b'{"version":1,"partitions":[]}')
    raw.delete("/admin/reassign_partitions")
    blocker.set()
    recorder.wait_for(WatchEvent(WatchKind.REASSIGN_PARTITIONS, ChangeType.DELETED))
    assert [e.change for e in recorder.events] == [ChangeType.CREATED, ChangeType.DELETED]


def test_the_polling_handler_selects_like_kazoos() -> None:
    handler = zkclient.kazoo_modules().handler()
    left, right = socket.socketpair()
    with left, right:
        assert handler.select([left], [], [], 0.01) == ([], [], [])
        assert handler.select([left], [right], [], 0.01) == ([], [right], [])
        right.send(b"x")
        assert handler.select([left, right], [], [], 0.01) == ([left], [], [])
        assert len(handler._pollers.cache) == 3  # one poll object per descriptor set, reused
        assert handler.select([left], [right], [], None) == ([left], [right], [])


def test_only_the_stores_own_clients_use_the_polling_handler(store: ZooKeeperStore) -> None:
    """The handler is a subclass given to the store's client: kazoo itself is not patched."""
    from kazoo.handlers import threading as kazoo_threading
    from kazoo.handlers import utils as kazoo_utils

    handler = store.client._client.handler
    assert isinstance(handler, kazoo_threading.SequentialThreadingHandler)
    assert type(handler).select is not kazoo_threading.SequentialThreadingHandler.select
    assert kazoo_threading.SequentialThreadingHandler.select.__module__ == "kazoo.handlers.threading"
    assert kazoo_threading.selector_select is kazoo_utils.selector_select
    assert type(KazooClient().handler) is kazoo_threading.SequentialThreadingHandler  # other users: stock


# --- Plugin registration --------------------------------------------------------------------------------


def test_registered_as_the_zookeeper_store(zookeeper_server: ZooKeeperEnsemble) -> None:
    registry = StateStoreRegistry().for_plugin("kctl.stores.zookeeper")
    zookeeper.kctl_register_state_stores(registry)
    entry = registry.get("zookeeper")
    assert entry.factory is ZooKeeperStore and entry.plugin == "kctl.stores.zookeeper"
    made = entry.factory(hosts=zookeeper_server.hosts, chroot=f"/kctl-tests-{uuid.uuid4().hex}")
    try:
        assert isinstance(made, StateStore)
    finally:
        made.close()


def test_kctl_works_without_kazoo() -> None:
    """The plugin module imports and registers without kazoo; only creating a store needs it."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["kazoo"] = None  # as if not installed
        from kctl.registry import StateStoreRegistry
        from kctl.stores import zookeeper
        registry = StateStoreRegistry()
        zookeeper.kctl_register_state_stores(registry)
        try:
            registry.get("zookeeper").factory("127.0.0.1:1")
        except ImportError as exc:
            print(exc)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "pip install 'kctl[zookeeper]'" in done.stdout


def test_fired_and_missed_changes() -> None:
    fired, missed = zkclient._fired_changes, zkclient._missed_changes
    C, D, M, K = ChangeType.CREATED, ChangeType.DELETED, ChangeType.DATA_CHANGED, ChangeType.CHILDREN_CHANGED
    assert fired(False, "CREATED", (1, 1)) == [C]
    assert fired(False, "CREATED", (1, 4)) == [C, M]  # written between the firing and the re-arming
    assert fired(False, "CREATED", None) == [C, D]
    assert fired(False, "CHANGED", None) == [M, D]
    assert fired(False, "DELETED", (5, 5)) == [D, C]
    assert fired(True, "CHILD", (1, 2)) == [K] and fired(True, "DELETED", None) == []
    assert missed(False, None, (1, 1)) == [C] and missed(False, (1, 1), None) == [D]
    assert missed(False, (1, 1), (1, 2)) == [M] and missed(False, (1, 1), (3, 3)) == [D, C]
    assert missed(False, (1, 1), (1, 1)) == [] and missed(True, (1, 1), (1, 2)) == [K]
    assert missed(True, None, (1, 0)) == []


def test_bulk_writes_keep_a_few_multis_in_flight(connect: Connect, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pipelined, but never more than ``MULTIS_IN_FLIGHT`` multis unanswered: the server answers a
    session's heartbeat after everything sent before it, and a ping stuck behind a whole bulk
    write made a loaded client drop its connection in the middle of it."""
    store = connect(max_multi_ops=10)
    _, version = store.register_controller_and_increment_epoch(1)
    kazoo_client = store.client._client
    send = kazoo_client._call
    sent: list[Any] = []
    most: list[int] = []  # at each multi sent, how many are unanswered

    def counting(request: Any, result: Any) -> Any:
        if request.type == 14:  # a multi
            sent.append(result)
            most.append(sum(1 for r in sent if not r.ready()))
        return send(request, result)

    monkeypatch.setattr(kazoo_client, "_call", counting)
    tps = many_partitions(store, 400, version)  # 80 creates: 8 multis of the Python codec
    assert 1 < max(most) <= zkclient.MULTIS_IN_FLIGHT
    most.clear()
    result = store.update_partition_states({tp: LeaderAndIsr(2, (2,), 1) for tp in tps}, 1, version)  # the native codec's
    assert len(result.successful) == 400
    assert len(most) >= 40 and 1 < max(most) <= zkclient.MULTIS_IN_FLIGHT
