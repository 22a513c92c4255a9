"""A secured cluster of real processes: digest identities by role and the ACLs of kctl.stores.zkacl.

Controllers authenticate as the controller identity, brokers as the broker identity, the admin
tools as the admin identity (``--zk-auth`` or ``KCTL_ZK_AUTH``, the policy in ``KCTL_ZK_ACL``).
The cluster works as usual, while no other identity (a broker's, an admin's, an unknown one,
none) can write what only the controller writes — not even a ``kctl controller`` process
started with a forged policy.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator

import pytest
from process_harness import KCTL, ProcessCluster

from kctl.model import TopicPartition
from kctl.stores import paths
from kctl.stores.zkacl import ACL_ENV, AUTH_ENV, AclPolicy, digest
from kctl.testing.zookeeper import ZooKeeperEnsemble

try:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError
except ImportError:  # pragma: no cover - kazoo comes with kctl[zookeeper]
    pytest.skip("kazoo is not installed", allow_module_level=True)

CONTROLLER, BROKER, ADMIN = ("ctl", "c-secret"), ("brk", "b-secret"), ("adm", "a-secret")
POLICY = f"controller={digest(*CONTROLLER)},broker={digest(*BROKER)},admin={digest(*ADMIN)}"
T0 = TopicPartition("orders", 0)


def auth(identity: tuple[str, str]) -> str:
    return f"{identity[0]}:{identity[1]}"


@pytest.fixture
def cluster(
    zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProcessCluster]:
    env = {
        "controller": {ACL_ENV: POLICY},  # controller 1 gives --zk-auth on its command line instead
        "broker": {ACL_ENV: POLICY, AUTH_ENV: auth(BROKER)},
    }
    admin = {"auth": ADMIN, "acl": AclPolicy.parse(POLICY)}
    with ProcessCluster(zookeeper_server.hosts + zookeeper_chroot, tmp_path_factory.mktemp("kctl-secured"), env=env,
                        admin_options=admin) as c:
        yield c


def tool(cluster: ProcessCluster, identity: tuple[str, str] | None, *args: str) -> subprocess.CompletedProcess[str]:
    """An admin tool as a process, authenticated through the environment (or not at all)."""
    env = {k: v for k, v in os.environ.items() if k not in (ACL_ENV, AUTH_ENV)}
    env[ACL_ENV] = POLICY
    if identity is not None:
        env[AUTH_ENV] = auth(identity)
    return subprocess.run([KCTL, *args, "--zk", cluster.zk], capture_output=True, text=True, timeout=60, env=env)


def session(cluster: ProcessCluster, identity: tuple[str, str] | None) -> KazooClient:
    client = KazooClient(cluster.zk, auth_data=None if identity is None else [("digest", auth(identity))])
    client.start()
    return client


def test_only_the_controller_identity_writes_controller_paths(cluster: ProcessCluster) -> None:
    first_broker = cluster.start_broker(1, wait=False)  # before any controller: it waits for the paths
    first = cluster.start_controller(1, ["--zk-auth", auth(CONTROLLER)])
    cluster.wait_until(lambda: cluster.active_controller() == 1, 30, "controller 1 to be active", watch=first)
    second = cluster.start_controller(2, env={AUTH_ENV: auth(CONTROLLER)})
    cluster.wait_until(lambda: 1 in cluster.admin.get_all_brokers(), 30, "broker 1 to register", watch=first_broker)
    for broker in (2, 3):
        cluster.start_broker(broker)

    # The admin tools work with the admin identity, and only with it.
    create = ("topics", "create", "--topic", "orders", "--replica-assignment", "1:2,2:3,3:1")
    for intruder in (None, BROKER):
        refused = tool(cluster, intruder, *create)
        assert refused.returncode == 1 and "not authorised" in refused.stderr, refused
    created = tool(cluster, ADMIN, *create)
    assert (created.returncode, created.stdout) == (0, "Created topic orders.\n"), created.stderr
    cluster.wait_until(lambda: cluster.leaders("orders") == {0: 1, 1: 2, 2: 3}
                       and all(len(cluster.state(TopicPartition("orders", p)).leader_and_isr.isr) == 2  # type: ignore[union-attr]
                               for p in range(3)), 30, "orders to be online with full ISRs", watch=first)
    state_path = paths.partition_state(T0)
    # Identities as users: ZooKeeper shows digests only to those with ADMIN on the znode.
    assert sorted((p, s, i.partition(":")[0]) for p, s, i in cluster.admin.acl_of(state_path)) == sorted(
        (e.perms, e.scheme, e.id.partition(":")[0]) for e in AclPolicy.parse(POLICY).acl(state_path)
    )
    epoch = cluster.controller_epoch()

    # No other identity can write the controller's znodes, whatever client it uses.
    for intruder in (BROKER, ADMIN, ("mallory", "guess"), None):
        client = session(cluster, intruder)
        try:
            for path in (paths.CONTROLLER_EPOCH, paths.CONTROLLER, state_path):
                with pytest.raises(NoAuthError):
                    client.set(path, b"{}")
            with pytest.raises(NoAuthError):
                client.delete(paths.CONTROLLER)
            with pytest.raises(NoAuthError):
                client.create("/brokers/topics/orders/partitions/3")
            if intruder != ADMIN:  # admins write assignments: Kafka's tools add partitions that way
                with pytest.raises(NoAuthError):
                    client.set(paths.topic("orders"), b"{}")
        finally:
            client.stop()
            client.close()

    # A process with a broker identity cannot even start as a controller ...
    refused = subprocess.run([KCTL, "controller", "--id", "8", "--zk", cluster.zk, "--zk-auth", auth(BROKER)],
                             capture_output=True, text=True, timeout=60, env={**os.environ, ACL_ENV: POLICY})
    assert refused.returncode == 1 and "controller identity" in refused.stderr
    # ... and with a forged policy naming it the controller, ZooKeeper refuses it: with no other
    # controller running it never becomes active, and writes nothing.
    forged = f"controller={digest(*BROKER)}"
    rogue = cluster.start_controller(9, ["--zk-auth", auth(BROKER)], env={ACL_ENV: forged})
    first.signal(signal.SIGSTOP)  # the active controller's session expires; controller 2 is away too
    second.signal(signal.SIGSTOP)
    try:
        cluster.wait_until(lambda: cluster.active_controller() is None, 30, "the active controller's session to end")
        cluster.wait_until(lambda: "not authorised" in rogue.log(), 30, "the rogue controller to be refused",
                           watch=rogue)
        assert cluster.active_controller() is None and cluster.controller_epoch() == epoch
    finally:
        first.signal(signal.SIGCONT)
        second.signal(signal.SIGCONT)
    cluster.wait_until(lambda: cluster.active_controller() in (1, 2), 30, "a real controller to take over again")
    assert cluster.controller_epoch() == epoch + 1
    rogue.kill()

    # The cluster keeps working: a broker killed, another shut down cleanly, a preferred election.
    cluster.brokers[1].kill()
    cluster.wait_until(lambda: 1 not in cluster.leaders("orders").values(), 30, "broker 1's leaderships to move")
    cluster.start_broker(1)
    cluster.wait_until(lambda: len(cluster.state(T0).leader_and_isr.isr) == 2, 30, "broker 1 to rejoin")  # type: ignore[union-attr]
    assert cluster.brokers[2].terminate() == 0
    assert "controlled: True" in cluster.brokers[2].log()
    cluster.start_broker(2)
    cluster.wait_until(lambda: all(len(cluster.state(TopicPartition("orders", p)).leader_and_isr.isr) == 2  # type: ignore[union-attr]
                                   for p in range(3)), 30, "full ISRs again")
    elected = tool(cluster, ADMIN, "elect-leaders", "--election-type", "preferred", "--all-topic-partitions")
    assert elected.returncode == 0, elected.stderr
    assert cluster.leaders("orders") == {0: 1, 1: 2, 2: 3}


def test_a_secured_cluster_on_the_zkqueue_transport(
    zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The queues are written by the controller and broker identities: requests and answers flow,
    and no other identity can queue anything."""
    env = {
        "controller": {ACL_ENV: POLICY, AUTH_ENV: auth(CONTROLLER)},
        "broker": {ACL_ENV: POLICY, AUTH_ENV: auth(BROKER)},
    }
    admin = {"auth": ADMIN, "acl": AclPolicy.parse(POLICY)}
    with ProcessCluster(zookeeper_server.hosts + zookeeper_chroot, tmp_path_factory.mktemp("kctl-secured-zkqueue"),
                        transport="zkqueue", env=env, admin_options=admin) as cluster:
        controller = cluster.start_controller(1)
        for broker in (1, 2):
            cluster.start_broker(broker)
        assert tool(cluster, ADMIN, "topics", "create", "--topic", "orders", "--replica-assignment", "1:2").returncode == 0
        cluster.wait_until(lambda: cluster.leaders("orders") == {0: 1}
                           and cluster.state(T0).leader_and_isr.isr == (1, 2),  # type: ignore[union-attr]
                           30, "orders-0 online with a full ISR over zkqueue", watch=controller)
        assert cluster.brokers[1].terminate() == 0  # a controlled shutdown: a request through the queues
        assert "controlled: True" in cluster.brokers[1].log() and cluster.leaders("orders") == {0: 2}
        for intruder in (ADMIN, None):
            client = session(cluster, intruder)
            try:
                with pytest.raises(NoAuthError):
                    client.create(f"{paths.BROKER_STATE}/2/item-", b"x", sequence=True)
                with pytest.raises(NoAuthError):
                    client.create(f"{paths.CONTROLLER_STATE}/1/item-", b"x", sequence=True)
            finally:
                client.stop()
                client.close()
