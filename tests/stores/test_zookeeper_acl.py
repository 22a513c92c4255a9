"""A secured cluster's ACLs (kctl.stores.zkacl): the policy's table, and its effect on a real server.

Three roles (controller, broker, admin) each have a digest identity; every znode gets the ACL of
its path whoever creates it. What each role may do is tried for real through the store, together
with what it may not (``NoAuth``), and with an identity the policy does not know and no identity.
The server tests run on each release of ``kctl.testing.zookeeper.RELEASES``: ZooKeeper 3.8.4+ and
3.9.2+ refuse ``exists`` without READ (ZOOKEEPER-2590), which once kept every role but the
controller's from starting ("not authorised to change /config/users").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kctl.errors import IllegalArgumentError, NodeExistsError, NoAuthError, StoreError, StoreUnavailableError
from kctl.model import LeaderAndIsr, TopicPartition
from kctl.stores import MATCH_ANY_VERSION, paths, zkacl
from kctl.stores.zkacl import ALL, CREATE, DELETE, READ, WRITE, AclEntry, AclPolicy, digest
from kctl.stores.zkdata import BrokerIdZNode
from kctl.testing.store_contract import ASSIGNMENT, T0, broker, state
from kctl.testing.zookeeper import ZooKeeperEnsemble, in_ci

try:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError as KazooNoAuthError
    from kazoo.security import ACL, OPEN_ACL_UNSAFE, Id, make_digest_acl_credential
except ImportError:
    if in_ci():
        raise
    pytest.skip("kazoo is not installed: pip install 'kctl[zookeeper]'", allow_module_level=True)

from kctl.stores.zookeeper import ZooKeeperStore

CONTROLLER, BROKER, ADMIN, MALLORY = ("ctl", "c-secret"), ("brk", "b-secret"), ("adm", "a-secret"), ("mallory", "guess")
POLICY = AclPolicy((digest(*CONTROLLER),), (digest(*BROKER),), (digest(*ADMIN),))
BROKER_1, BROKER_2 = ("b1", "secret-1"), ("b2", "secret-2")
OWN_IDS = AclPolicy((digest(*CONTROLLER),), admins=(digest(*ADMIN),),
                    broker_ids=((1, digest(*BROKER_1)), (2, digest(*BROKER_2))))
"""Brokers 1 and 2 each with an identity of their own."""


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


def test_sasl_and_per_broker_identities_parse() -> None:
    text = f"controller=sasl:ctl,broker=sasl:brk,broker.7=digest:{digest(*BROKER_1)},broker.7=sasl:b7,admin=sasl:adm"
    policy = AclPolicy.parse(text)
    assert policy == AclPolicy(("sasl:ctl",), ("sasl:brk",), ("sasl:adm",),
                               broker_ids=((7, digest(*BROKER_1)), (7, "sasl:b7")))
    assert AclPolicy.parse(policy.format()) == policy
    assert policy.all_brokers() == ("sasl:brk", digest(*BROKER_1), "sasl:b7")
    assert policy.registrants(7) == (digest(*BROKER_1), "sasl:b7") and policy.registrants(8) == ("sasl:brk",)
    assert policy.is_controller(["sasl:ctl"]) and not policy.is_controller(["sasl:brk", digest(*CONTROLLER)])
    for bad in ("broker.x=sasl:b", "broker.-1=sasl:b", f"broker.{2**31}=sasl:b", "broker.²=sasl:b", "controller=sasl:"):
        with pytest.raises(IllegalArgumentError):
            AclPolicy.parse(f"controller=sasl:ctl,{bad}")


def test_sasl_identities_get_sasl_entries() -> None:
    policy = AclPolicy.parse("controller=sasl:ctl,broker=sasl:brk")
    assert set(policy.acl(paths.BROKER_IDS)) == {
        AclEntry(ALL, "sasl", "ctl"), AclEntry(CREATE | READ, "sasl", "brk"), AclEntry(READ, "world", "anyone")
    }


def test_a_broker_id_of_its_own_is_writable_by_its_identities_only() -> None:
    assert grants(paths.BROKER_IDS, OWN_IDS) == {"ctl": ALL, "b1": CREATE | READ, "b2": CREATE | READ, "anyone": READ}
    assert grants("/brokers/ids/1", OWN_IDS) == {"ctl": ALL, "b1": ALL, "anyone": READ}
    assert grants("/brokers/ids/2", OWN_IDS) == {"ctl": ALL, "b2": ALL, "anyone": READ}
    assert grants("/brokers/ids/3", OWN_IDS) == {"ctl": ALL, "anyone": READ}  # no broker identity of any id
    # the other broker grants go to every broker identity
    assert grants("/isr_change_notification/isr_change_", OWN_IDS) == {"ctl": ALL, "b1": ALL, "b2": ALL, "anyone": READ}


def test_what_makes_a_registration_genuine() -> None:
    own = OWN_IDS.acl("/brokers/ids/2")
    forged = OWN_IDS.acl("/brokers/ids/1")  # broker 1's identity in broker 2's znode
    controller = [digest(*CONTROLLER)]
    assert OWN_IDS.genuine_registration(2, own, 1, 0, controller) is None
    assert OWN_IDS.genuine_registration(3, forged, 0, 5, controller) is None  # no identity of its own: unchecked
    assert "another identity created it" in str(OWN_IDS.genuine_registration(2, forged, 1, 0, controller))
    assert "ACL was changed" in str(OWN_IDS.genuine_registration(2, own, 1, 1, controller))
    assert "never written after it was created" in str(OWN_IDS.genuine_registration(2, own, 0, 0, controller))
    # Without ADMIN on the znode, ZooKeeper shows digests as user:x: readers compare users only.
    redacted = [AclEntry(e.perms, e.scheme, e.id.partition(":")[0] + ":x") if e.scheme == "digest" else e for e in own]
    assert OWN_IDS.genuine_registration(2, redacted, 1, 0, [digest(*ADMIN)]) is None
    assert OWN_IDS.genuine_registration(2, redacted, 1, 0, controller) is not None  # the controller sees all


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
        ("/cluster", {"ctl": ALL, "brk": CREATE | READ, "anyone": READ}),
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
def connect(zookeeper_release_server: ZooKeeperEnsemble, zookeeper_chroot: str) -> Iterator[Connect]:
    """Stores on a server of each release, under ``POLICY`` unless ``acl=`` says otherwise."""
    opened: list[ZooKeeperStore] = []

    def open_store(auth: tuple[str, str] | None, **options: Any) -> ZooKeeperStore:
        options.setdefault("acl", POLICY)
        store = ZooKeeperStore(zookeeper_release_server.hosts, zookeeper_chroot, auth=auth, **options)
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
    connect: Connect, zookeeper_release_server: ZooKeeperEnsemble, zookeeper_chroot: str
) -> None:
    controller = connect(CONTROLLER)
    broker_store, admin, mallory, anonymous = connect(BROKER), connect(ADMIN), connect(MALLORY), connect(None)
    _, version = controller.register_controller_and_increment_epoch(0)

    # What each may do: the cluster works.
    broker_epoch = broker_store.register_broker(broker(1))
    cluster_id = broker_store.get_or_create_cluster_id()  # the first broker creates /cluster/id
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
    raw = KazooClient(zookeeper_release_server.hosts + zookeeper_chroot, auth_data=[("digest", "brk:b-secret")])
    raw.start()
    try:
        for path in (paths.CONTROLLER_EPOCH, "/brokers/topics/t/partitions/0/state", "/brokers/topics/t"):
            with pytest.raises(KazooNoAuthError):
                raw.set(path, b"1")
        with pytest.raises(KazooNoAuthError):
            raw.create("/brokers/topics/t/partitions/1")
        with pytest.raises(KazooNoAuthError):
            raw.set(paths.CLUSTER_ID, b"{}")  # created by a broker, written by none
    finally:
        raw.stop()
        raw.close()

    assert controller.get_controller_epoch() == (1, 1) and controller.get_controller_id() == 0
    stored = controller.get_partition_states([T0, TopicPartition("t", 1)])
    assert stored.values[T0].leader_and_isr == LeaderAndIsr(2, (2, 3), 1, 1) and len(stored.values) == 1
    assert controller.get_all_topics() == {"t"} and broker_epoch > 0
    assert controller.get_or_create_cluster_id() == cluster_id
    controller.delete_topic("t", version)  # the controller deletes what admins created
    assert controller.get_all_topics() == set()


def test_a_created_error_is_no_auth(connect: Connect) -> None:
    """Per-partition create errors name the refusal, so the controller's log says why."""
    connect(CONTROLLER).create_topic("t", ASSIGNMENT)
    errors = connect(BROKER).create_partition_states({T0: state(1, (1,))}, MATCH_ANY_VERSION)
    assert isinstance(errors[T0], NoAuthError) and isinstance(errors[T0], StoreError)
    assert str(errors[T0]) == (
        "not authorised to create /brokers/topics/t/partitions: "
        "the ACL of /brokers/topics/t gives digest user 'brk' no CREATE permission"
    )


def test_refusals_name_the_operation_the_node_and_the_permission(connect: Connect) -> None:
    controller, broker_store, admin = connect(CONTROLLER), connect(BROKER), connect(ADMIN)
    with pytest.raises(NoAuthError) as refused:
        admin.register_broker(broker(7))
    assert str(refused.value) == (
        "not authorised to create /brokers/ids/7: the ACL of /brokers/ids gives digest user 'adm' no CREATE permission"
    )
    with pytest.raises(NoAuthError) as refused:
        broker_store.acl_of("/config/users")  # credentials: not even readable
    assert str(refused.value) == (
        "not authorised to read the ACL of /config/users: "
        "the ACL of /config/users gives digest user 'brk' no READ or ADMIN permission"
    )
    _, version = controller.register_controller_and_increment_epoch(0)
    with pytest.raises(NoAuthError, match=r"^not authorised to create /controller: the ACL of the chroot /kctl-tests-"
                                          r"\w+ gives an unauthenticated session no CREATE permission$"):
        connect(None).register_controller_and_increment_epoch(5)
    with pytest.raises(NoAuthError, match=r"^not authorised to delete /controller: the ACL of the chroot /kctl-tests-"):
        broker_store.delete_controller(version)


def test_every_role_starts_on_every_release(connect: Connect) -> None:
    """Regression (ZOOKEEPER-2590): a non-controller store waits for the controller's paths
    without ``exists`` on ``/config/users``, which only the controller and admins may read."""
    connect(CONTROLLER)
    for identity in (BROKER, ADMIN, MALLORY, None):
        assert connect(identity).get_all_topics() == set()


def test_a_broker_identity_registers_only_its_own_id(connect: Connect, caplog: pytest.LogCaptureFixture) -> None:
    controller = connect(CONTROLLER, acl=OWN_IDS)
    first, second = connect(BROKER_1, acl=OWN_IDS), connect(BROKER_2, acl=OWN_IDS)
    admin = connect(ADMIN, acl=OWN_IDS)
    epoch = first.register_broker(broker(1))
    assert controller.get_all_brokers()[1][1] == epoch  # genuine, also to admins' redacted view
    assert set(admin.get_all_brokers()) == {1}
    assert sorted(controller.acl_of("/brokers/ids/1")) == sorted((e.perms, e.scheme, e.id)
                                                                 for e in OWN_IDS.acl("/brokers/ids/1"))

    # Under the policy, broker 1's identity cannot register broker 2: the multi is refused whole.
    with pytest.raises(NoAuthError, match="not authorised to set /brokers/ids/2"):
        first.register_broker(broker(2))
    assert set(controller.get_all_brokers()) == {1}

    # With a forged policy it can create the znode (ZooKeeper lets CREATE on /brokers/ids create
    # any child), but every reader under the real policy ignores it, saying why.
    forged_policy = AclPolicy(OWN_IDS.controllers, broker_ids=((2, digest(*BROKER_1)),))
    rogue = connect(BROKER_1, acl=forged_policy)
    rogue.register_broker(broker(2))
    caplog.set_level(logging.WARNING, logger="kctl.stores.zkclient")
    assert set(controller.get_all_brokers()) == {1} and set(admin.get_all_brokers()) == {1}
    assert "Ignoring the registration of broker 2 at /brokers/ids/2: its ACL [" in caplog.text
    assert "another identity created it" in caplog.text
    # It squats the id until its session ends: the real broker 2 cannot register meanwhile.
    with pytest.raises(NodeExistsError):
        second.register_broker(broker(2))
    rogue.close()
    epoch_2 = second.register_broker(broker(2))
    assert controller.get_all_brokers()[2][1] == epoch_2

    # A registration whose ACL changed after creation proves nothing (ADMIN could have swapped it).
    raw = KazooClient(controller.hosts + controller.chroot, auth_data=[("digest", "b2:secret-2")])
    raw.start()
    try:
        raw.set_acls("/brokers/ids/2", raw.get_acls("/brokers/ids/2")[0])
    finally:
        raw.stop()
        raw.close()
    caplog.clear()
    assert set(controller.get_all_brokers()) == {1}
    assert "its ACL was changed after it was created" in caplog.text


def test_a_forged_digest_of_the_same_user_fools_only_readers_without_admin(connect: Connect) -> None:
    """Broker 1's identity creates broker 2's znode with an ACL naming user b2 with a password of
    its own, which its session also logs in with, and writes the data again. ZooKeeper redacts
    digests for readers without ADMIN: the controller (ADMIN under the policy) sees the forged
    hash; an admin tool's view cannot tell it from the real one."""
    controller, admin = connect(CONTROLLER, acl=OWN_IDS), connect(ADMIN, acl=OWN_IDS)
    impostor = ("b2", "not-the-password")
    acl = [(e.perms, e.scheme, digest(*impostor) if e.id == digest(*BROKER_2) else e.id)
           for e in OWN_IDS.acl("/brokers/ids/2")]
    raw = KazooClient(controller.hosts + controller.chroot,
                      auth_data=[("digest", "b1:secret-1"), ("digest", "b2:not-the-password")])
    raw.start()
    try:
        data = BrokerIdZNode.encode(broker(2))
        raw.create("/brokers/ids/2", data, acl=[ACL(p, Id(s, i)) for p, s, i in acl], ephemeral=True)
        raw.set("/brokers/ids/2", data)
        assert 2 not in controller.get_all_brokers()
        assert 2 in admin.get_all_brokers()  # what remains open for admin tools (docs/security.md)
    finally:
        raw.stop()
        raw.close()


def test_an_open_chroot_is_reported(
    connect: Connect, zookeeper_release_server: ZooKeeperEnsemble, zookeeper_chroot: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="kctl.stores.zkclient")
    connect(CONTROLLER)  # creates the chroot with the policy's ACL: nothing to report
    assert "lets anyone" not in caplog.text
    raw = KazooClient(zookeeper_release_server.hosts, auth_data=[("digest", "ctl:c-secret")])
    raw.start()
    try:
        raw.set_acls(zookeeper_chroot, OPEN_ACL_UNSAFE)  # as a chroot made without a policy
    finally:
        raw.stop()
        raw.close()
    connect(BROKER)
    assert f"The ACL of the chroot {zookeeper_chroot} lets anyone write and create and delete and change the ACL of " \
           "its children" in caplog.text
