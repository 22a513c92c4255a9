"""A secured cluster's ACLs (kctl.stores.zkacl): the policy's table, and its effect on a real server.

Three roles (controller, broker, admin) each have a digest identity; every znode gets the ACL of
its path whoever creates it. What each role may do is tried for real through the store, together
with what it may not (``NoAuth``), and with an identity the policy does not know and no identity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from contract import ASSIGNMENT, T0, broker, state

from kctl.errors import IllegalArgumentError, NoAuthError, StoreError, StoreUnavailableError
from kctl.model import LeaderAndIsr, TopicPartition
from kctl.stores import MATCH_ANY_VERSION, paths, zkacl
from kctl.stores.zkacl import ALL, CREATE, DELETE, READ, WRITE, AclPolicy, digest
from kctl.testing.zookeeper import ZooKeeperEnsemble, in_ci

try:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError as KazooNoAuthError
    from kazoo.security import make_digest_acl_credential
except ImportError:
    if in_ci():
        raise
    pytest.skip("kazoo is not installed: pip install 'kctl[zookeeper]'", allow_module_level=True)

from kctl.stores.zookeeper import ZooKeeperStore

CONTROLLER, BROKER, ADMIN, MALLORY = ("ctl", "c-secret"), ("brk", "b-secret"), ("adm", "a-secret"), ("mallory", "guess")
POLICY = AclPolicy((digest(*CONTROLLER),), (digest(*BROKER),), (digest(*ADMIN),))


# --- The policy ------------------------------------------------------------------------------------


def test_digest_identities_are_zookeepers() -> None:
    assert digest("ctl", "c-secret") == make_digest_acl_credential("ctl", "c-secret")
    assert zkacl.parse_auth("u:p:w") == ("u", "p:w")
    with pytest.raises(IllegalArgumentError, match="USER:PASSWORD"):
        zkacl.parse_auth("nopassword")


def test_the_policy_parses_and_refuses_passwords() -> None:
    text = POLICY.format()
    assert text == f"controller={digest(*CONTROLLER)},broker={digest(*BROKER)},admin={digest(*ADMIN)}"
    assert AclPolicy.parse(text) == POLICY
    assert AclPolicy.parse(f"{text},broker={digest('b2', 'x')}").brokers == (digest(*BROKER), digest("b2", "x"))
    with pytest.raises(IllegalArgumentError, match="never the password"):
        AclPolicy.parse("controller=ctl:c-secret")
    with pytest.raises(IllegalArgumentError, match="ROLE=USER:DIGEST"):
        AclPolicy.parse(f"operator={digest(*ADMIN)}")
    with pytest.raises(IllegalArgumentError, match="controller identity"):
        AclPolicy.parse(f"broker={digest(*BROKER)}")


def test_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(zkacl.AUTH_ENV, "ctl:c-secret")
    monkeypatch.setenv(zkacl.ACL_ENV, POLICY.format())
    assert zkacl.from_environment() == (CONTROLLER, POLICY.format())
    assert zkacl.from_environment("adm:a-secret", "x") == (ADMIN, "x")  # options win
    monkeypatch.delenv(zkacl.AUTH_ENV)
    monkeypatch.delenv(zkacl.ACL_ENV)
    assert zkacl.from_environment() == (None, None)


def grants(path: str, policy: AclPolicy = POLICY) -> dict[str, int]:
    """User (or ``anyone``) → permission bits of ``path``'s ACL."""
    return {entry.id.partition(":")[0]: entry.perms for entry in policy.acl(path)}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("", {"ctl": ALL, "anyone": READ}),
        (paths.CONTROLLER, {"ctl": ALL, "anyone": READ}),
        (paths.CONTROLLER_EPOCH, {"ctl": ALL, "anyone": READ}),
        (paths.BROKERS, {"ctl": ALL, "anyone": READ}),
        (paths.BROKER_IDS, {"ctl": ALL, "brk": CREATE | READ, "anyone": READ}),
        ("/brokers/ids/1", {"ctl": ALL, "brk": ALL, "anyone": READ}),
        (paths.BROKER_TOPICS, {"ctl": ALL, "adm": CREATE | READ, "anyone": READ}),
        ("/brokers/topics/t", {"ctl": ALL, "adm": WRITE | READ, "anyone": READ}),
        ("/brokers/topics/t/partitions", {"ctl": ALL, "anyone": READ}),
        ("/brokers/topics/t/partitions/0", {"ctl": ALL, "anyone": READ}),
        ("/brokers/topics/t/partitions/0/state", {"ctl": ALL, "anyone": READ}),
        (paths.ADMIN, {"ctl": ALL, "adm": CREATE | DELETE | READ, "anyone": READ}),
        (paths.REASSIGN_PARTITIONS, {"ctl": ALL, "adm": ALL, "anyone": READ}),
        (paths.PREFERRED_REPLICA_ELECTION, {"ctl": ALL, "adm": ALL, "anyone": READ}),
        (paths.DELETE_TOPICS, {"ctl": ALL, "adm": CREATE | READ, "anyone": READ}),
        ("/admin/delete_topics/t", {"ctl": ALL, "adm": ALL, "anyone": READ}),
        (paths.CONFIG_TOPICS, {"ctl": ALL, "adm": CREATE | READ, "anyone": READ}),
        ("/config/topics/t", {"ctl": ALL, "adm": ALL, "anyone": READ}),
        ("/config/changes/config_change_", {"ctl": ALL, "adm": ALL, "anyone": READ}),
        ("/config/users/alice", {"ctl": ALL, "adm": ALL}),  # credentials: Kafka's sensitive path
        (paths.ISR_CHANGE_NOTIFICATION, {"ctl": ALL, "brk": CREATE | READ, "anyone": READ}),
        ("/isr_change_notification/isr_change_", {"ctl": ALL, "brk": ALL, "anyone": READ}),
        ("/log_dir_event_notification/log_dir_event_", {"ctl": ALL, "brk": ALL, "anyone": READ}),
        ("/brokers/state/1/item-", {"ctl": ALL, "brk": ALL, "anyone": READ}),
        ("/controller_state/0", {"ctl": ALL, "brk": ALL, "anyone": READ}),
        ("/consumers", {"anyone": ALL}),  # Kafka keeps the old consumers' path open
        ("/cluster/id", {"ctl": ALL, "anyone": READ}),
    ],
)
def test_the_acl_of_each_znode(path: str, expected: dict[str, int]) -> None:
    assert grants(path) == expected


def test_leaders_may_write_states_only_before_alter_isr() -> None:
    old = AclPolicy.parse(POLICY.format(), brokers_write_isr=True)
    assert grants("/brokers/topics/t/partitions/0/state", old)["brk"] == WRITE | READ
    assert "brk" not in grants("/brokers/topics/t/partitions/0", old)


# --- On a real server ------------------------------------------------------------------------------

Connect = Callable[..., ZooKeeperStore]


@pytest.fixture
def connect(zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str) -> Iterator[Connect]:
    opened: list[ZooKeeperStore] = []

    def open_store(auth: tuple[str, str] | None, **options: Any) -> ZooKeeperStore:
        store = ZooKeeperStore(zookeeper_server.hosts, zookeeper_chroot, auth=auth, acl=POLICY, **options)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


def test_only_the_controller_creates_a_secured_clusters_paths(connect: Connect) -> None:
    with pytest.raises(StoreUnavailableError, match="start a controller first"):
        connect(BROKER, connection_timeout=0.5)
    controller = connect(CONTROLLER)
    broker_store = connect(BROKER)  # the paths exist now
    assert broker_store.get_all_brokers() == {}
    for path in ("", *zkacl.CONTROLLER_CREATED_PATHS):
        assert sorted(controller.acl_of(path)) == sorted((e.perms, e.scheme, e.id) for e in POLICY.acl(path)), path


def test_each_role_does_its_part_and_nothing_else(
    connect: Connect, zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str
) -> None:
    controller = connect(CONTROLLER)
    broker_store, admin, mallory, anonymous = connect(BROKER), connect(ADMIN), connect(MALLORY), connect(None)
    _, version = controller.register_controller_and_increment_epoch(0)

    # What each may do: the cluster works.
    broker_epoch = broker_store.register_broker(broker(1))
    broker_store.update_broker_info(broker(1, host="elsewhere"))
    admin.create_topic("t", ASSIGNMENT, config={"min.insync.replicas": "2"})
    assert set(controller.create_partition_states({T0: state(1, (1, 2, 3))}, version).values()) == {None}
    written = controller.update_partition_states({T0: LeaderAndIsr(2, (2, 3), 1)}, 1, version)
    assert T0 in written.successful
    controller.set_topic_assignment("t", controller.get_topic_assignments(["t"]).values["t"], version)
    admin.create_partition_reassignments({T0: [3, 2, 1]})
    controller.set_partition_reassignments({T0: [3, 2]}, version)
    admin.create_preferred_replica_election([T0])
    admin.set_topic_config("t", {"unclean.leader.election.enable": "true"})
    broker_store.create_isr_change_notification([T0])
    broker_store.create_log_dir_event_notification(1)
    controller.delete_isr_change_notifications(controller.get_isr_change_notifications(), version)
    controller.delete_log_dir_event_notifications(controller.get_log_dir_event_notifications(), version)
    controller.delete_preferred_replica_election(version)
    admin.delete_partition_reassignments(MATCH_ANY_VERSION)  # an admin cancels (kctl reassign --cancel)
    assert anonymous.get_partition_states([T0]).values[T0].leader_and_isr.leader == 2  # everyone reads

    # What the others may not: every attempt is refused by the server, nothing changes.
    for intruder in (broker_store, admin, mallory, anonymous):
        with pytest.raises(NoAuthError):
            intruder.register_controller_and_increment_epoch(9)  # creating /controller
        failed = intruder.update_partition_states({T0: LeaderAndIsr(9, (9,), 9, 1)}, 9, MATCH_ANY_VERSION).failed
        assert isinstance(failed[T0], NoAuthError), intruder
        created = intruder.create_partition_states({TopicPartition("t", 1): state(9, (9,))}, MATCH_ANY_VERSION)
        assert isinstance(created[TopicPartition("t", 1)], NoAuthError), intruder
    for intruder in (broker_store, mallory, anonymous):
        with pytest.raises(NoAuthError):
            intruder.set_topic_assignment("t", controller.get_topic_assignments(["t"]).values["t"])
        with pytest.raises(NoAuthError):
            intruder.create_topic("u", ASSIGNMENT)
        with pytest.raises(NoAuthError):
            intruder.create_partition_reassignments({T0: [1]})
    for intruder in (admin, mallory, anonymous):
        with pytest.raises(NoAuthError):
            intruder.register_broker(broker(7))
        with pytest.raises(NoAuthError):
            intruder.create_isr_change_notification([T0])
    raw = KazooClient(zookeeper_server.hosts + zookeeper_chroot, auth_data=[("digest", "brk:b-secret")])
    raw.start()
    try:
        for path in (paths.CONTROLLER_EPOCH, "/brokers/topics/t/partitions/0/state", "/brokers/topics/t"):
            with pytest.raises(KazooNoAuthError):
                raw.set(path, b"1")
        with pytest.raises(KazooNoAuthError):
            raw.create("/brokers/topics/t/partitions/1")
    finally:
        raw.stop()
        raw.close()

    assert controller.get_controller_epoch() == (1, 1) and controller.get_controller_id() == 0
    stored = controller.get_partition_states([T0, TopicPartition("t", 1)])
    assert stored.values[T0].leader_and_isr == LeaderAndIsr(2, (2, 3), 1, 1) and len(stored.values) == 1
    assert controller.get_all_topics() == {"t"} and broker_epoch > 0
    controller.delete_topic("t", version)  # the controller deletes what admins created
    assert controller.get_all_topics() == set()


def test_a_created_error_is_no_auth(connect: Connect) -> None:
    """Per-partition create errors name the refusal, so the controller's log says why."""
    connect(CONTROLLER).create_topic("t", ASSIGNMENT)
    errors = connect(BROKER).create_partition_states({T0: state(1, (1,))}, MATCH_ANY_VERSION)
    assert isinstance(errors[T0], NoAuthError) and isinstance(errors[T0], StoreError)
    assert "not authorised" in str(errors[T0])
