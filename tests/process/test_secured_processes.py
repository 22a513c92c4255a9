"""A secured cluster of real processes: identities by role and the ACLs of kctl.stores.zkacl.

Controllers authenticate as the controller identity, brokers as the broker identity, the admin
tools as the admin identity (``--zk-auth`` or ``KCTL_ZK_AUTH``, the policy in ``KCTL_ZK_ACL``).
The cluster works as usual, while no other identity (a broker's, an admin's, an unknown one,
none) can write what only the controller writes — not even a ``kctl controller`` process
started with a forged policy. Every test runs on each release of
``kctl.testing.zookeeper.RELEASES`` (Debian's 3.8 and a current 3.9); the last one runs the
cluster over TLS with SASL logins and brokers that each have an identity of their own.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.model import ReplicaAssignment, TopicPartition
from kctl.stores import paths
from kctl.stores.zkacl import ACL_ENV, AUTH_ENV, AclPolicy, digest
from kctl.stores.zkclient import SASL_ENV, ZooKeeperTls
from kctl.testing.pki import TestCertificateAuthority, certificate_authority
from kctl.testing.zookeeper import ServerSecurity, ZooKeeperEnsemble, ZooKeeperInstallation

from tests.support.process_harness import KCTL, ProcessCluster

pytestmark = pytest.mark.usefixtures("engine")  # every test here runs on each engine

try:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError
except ImportError:  # pragma: no cover - kazoo comes with kctl[zookeeper]
    pytest.skip("kazoo is not installed", allow_module_level=True)

__all__ = ["certificate_authority"]

CONTROLLER, BROKER, ADMIN = ("ctl", "c-secret"), ("brk", "b-secret"), ("adm", "a-secret")
POLICY = f"controller={digest(*CONTROLLER)},broker={digest(*BROKER)},admin={digest(*ADMIN)}"
T0 = TopicPartition("orders", 0)


def auth(identity: tuple[str, str]) -> str:
    return f"{identity[0]}:{identity[1]}"


@pytest.fixture
def cluster(
    zookeeper_release_server: ZooKeeperEnsemble, zookeeper_chroot: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProcessCluster]:
    env = {
        "controller": {ACL_ENV: POLICY},  # controller 1 gives --zk-auth on its command line instead
        "broker": {ACL_ENV: POLICY, AUTH_ENV: auth(BROKER)},
    }
    admin = {"auth": ADMIN, "acl": AclPolicy.parse(POLICY)}
    with ProcessCluster(zookeeper_release_server.hosts + zookeeper_chroot, tmp_path_factory.mktemp("kctl-secured"),
                        env=env, admin_options=admin) as c:
        yield c


def tool(cluster: ProcessCluster, identity: tuple[str, str] | None, *args: str,
         policy: str = POLICY) -> subprocess.CompletedProcess[str]:
    """An admin tool as a process, authenticated through the environment (or not at all)."""
    env = {k: v for k, v in os.environ.items() if k not in (ACL_ENV, AUTH_ENV, SASL_ENV)}
    env[ACL_ENV] = policy
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
    assert "lets anyone" not in cluster.logs(tail=10**6)  # the policy made the chroot: nothing to report
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
    zookeeper_release_server: ZooKeeperEnsemble, zookeeper_chroot: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The queues are written by the controller and broker identities: requests and answers flow,
    and no other identity can queue anything."""
    env = {
        "controller": {ACL_ENV: POLICY, AUTH_ENV: auth(CONTROLLER)},
        "broker": {ACL_ENV: POLICY, AUTH_ENV: auth(BROKER)},
    }
    admin = {"auth": ADMIN, "acl": AclPolicy.parse(POLICY)}
    with ProcessCluster(zookeeper_release_server.hosts + zookeeper_chroot,
                        tmp_path_factory.mktemp("kctl-secured-zkqueue"), transport="zkqueue", env=env,
                        admin_options=admin) as cluster:
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


def test_every_process_warns_of_an_open_chroot(
    zookeeper_release_server: ZooKeeperEnsemble, zookeeper_chroot: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A chroot made without a policy (world:anyone:cdrwa) lets anyone delete and recreate
    ``/controller``: the controller, the brokers and the admin tools say so when they start."""
    raw = KazooClient(zookeeper_release_server.hosts)
    raw.start()
    try:
        raw.create(zookeeper_chroot)  # open, as ZooKeeper's default ACL is
    finally:
        raw.stop()
        raw.close()
    env = {"controller": {ACL_ENV: POLICY, AUTH_ENV: auth(CONTROLLER)}, "broker": {ACL_ENV: POLICY, AUTH_ENV: auth(BROKER)}}
    with ProcessCluster(zookeeper_release_server.hosts + zookeeper_chroot, tmp_path_factory.mktemp("kctl-open"),
                        env=env, admin_options={"auth": ADMIN, "acl": AclPolicy.parse(POLICY)}) as cluster:
        warning = f"The ACL of the chroot {zookeeper_chroot} lets anyone write and create and delete"
        controller = cluster.start_controller(1)
        broker = cluster.start_broker(1)
        cluster.wait_until(lambda: warning in controller.log() and warning in broker.log(), 30,
                           "the controller and the broker to warn", watch=controller)
        listed = tool(cluster, ADMIN, "topics", "list")
        assert listed.returncode == 0 and warning in listed.stderr, listed


# --- TLS, SASL and brokers with identities of their own ---------------------------------------------

SASL_USERS = {"ctl": "c-secret", "b1": "b1-secret", "b2": "b2-secret", "b3": "b3-secret", "adm": "a-secret"}
SASL_POLICY = "controller=sasl:ctl,broker.1=sasl:b1,broker.2=sasl:b2,broker.3=sasl:b3,admin=sasl:adm"


@pytest.fixture(scope="module")
def secure_server(
    zookeeper_release: ZooKeeperInstallation, certificate_authority: TestCertificateAuthority
) -> Iterator[ZooKeeperEnsemble]:
    """A server of each release serving TLS and closing sessions without a SASL login."""
    security = ServerSecurity(keystore=certificate_authority.issue("zookeeper"),
                              truststore=certificate_authority.certificate, sasl_users=SASL_USERS, require_sasl=True)
    with ZooKeeperEnsemble(1, installation=zookeeper_release, security=security) as ensemble:
        yield ensemble


def test_a_cluster_over_tls_with_sasl_logins(
    secure_server: ZooKeeperEnsemble, zookeeper_chroot: str, certificate_authority: TestCertificateAuthority,
    tmp_path: Path,
) -> None:
    """Every process connects over TLS (Kafka's properties, in a --zk-tls-config-file or as --config)
    and logs in with SASL; each broker id has an identity of its own, and a broker identity that
    registers another id (with a forged policy, since kctl refuses to start it otherwise) is
    ignored by the controller, which says so."""
    keystore = certificate_authority.issue("kctl", password="k-secret")
    tls = {"zookeeper.ssl.client.enable": "true", "zookeeper.ssl.keystore.location": str(keystore),
           "zookeeper.ssl.keystore.password": "k-secret",
           "zookeeper.ssl.truststore.location": str(certificate_authority.certificate)}
    tls_file = tmp_path / "zk-tls.properties"
    tls_file.write_text("".join(f"{name}={value}\n" for name, value in tls.items()))
    env = {"controller": {ACL_ENV: SASL_POLICY, SASL_ENV: "ctl:c-secret"}, "broker": {ACL_ENV: SASL_POLICY}}
    admin = {"sasl": ("adm", "a-secret"), "acl": AclPolicy.parse(SASL_POLICY),
             "tls": ZooKeeperTls.from_properties(tls)}
    with ProcessCluster(secure_server.secure_hosts + zookeeper_chroot, tmp_path, env=env,
                        admin_options=admin) as cluster:
        controller = cluster.start_controller(1, ["--zk-tls-config-file", str(tls_file)])
        cluster.wait_until(lambda: cluster.active_controller() == 1, 30, "controller 1 over TLS", watch=controller)
        for broker in (1, 2):
            cluster.start_broker(broker, extra=[f"--config={name}={value}" for name, value in tls.items()],
                                 env={SASL_ENV: f"b{broker}:b{broker}-secret"})

        # The admin tools: the same file, the SASL login on the command line.
        def admin_tool(*args: str) -> subprocess.CompletedProcess[str]:
            env = {k: v for k, v in os.environ.items() if k not in (ACL_ENV, AUTH_ENV, SASL_ENV)}
            return subprocess.run([KCTL, *args, "--zk", cluster.zk, "--zk-tls-config-file", str(tls_file),
                                   "--zk-sasl", "adm:a-secret", "--zk-acl", SASL_POLICY],
                                  capture_output=True, text=True, timeout=60, env=env)

        created = admin_tool("topics", "create", "--topic", "orders", "--replica-assignment", "1:2,2:1")
        assert (created.returncode, created.stdout) == (0, "Created topic orders.\n"), created.stderr
        cluster.wait_until(lambda: cluster.leaders("orders") == {0: 1, 1: 2}, 30, "orders online", watch=controller)

        # Broker 1's identity may not start as broker 3 ...
        refused = subprocess.run(
            [KCTL, "broker", "--id", "3", "--zk", cluster.zk, "--zk-tls-config-file", str(tls_file)],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, ACL_ENV: SASL_POLICY, SASL_ENV: "b1:b1-secret"})
        assert refused.returncode == 1 and "may register broker 3; 'sasl:b1' is not one" in refused.stderr, refused
        # ... and registering broker 3 anyway, with a forged policy, convinces no one.
        forged = SASL_POLICY.replace("broker.3=sasl:b3", "broker.3=sasl:b1")
        cluster.start_broker(3, wait=False, extra=["--zk-tls-config-file", str(tls_file)],
                             env={SASL_ENV: "b1:b1-secret", ACL_ENV: forged})
        cluster.wait_until(lambda: "Ignoring the registration of broker 3 at /brokers/ids/3" in controller.log(), 30,
                           "the controller to ignore the forged registration of broker 3", watch=controller)
        assert 3 not in cluster.admin.get_all_brokers()
        placed = admin_tool("topics", "create", "--topic", "rogue", "--replica-assignment", "3:1")
        assert placed.returncode == 1 and "not live: [3] (live brokers: [1, 2])" in placed.stderr, placed
        cluster.admin.create_topic("rogue", {0: ReplicaAssignment((3, 1))})  # as a tool that does not check
        cluster.wait_until(lambda: cluster.state(TopicPartition("rogue", 0)) is not None, 30, "rogue-0 online")
        rogue = cluster.state(TopicPartition("rogue", 0)).leader_and_isr  # type: ignore[union-attr]
        assert (rogue.leader, rogue.isr) == (1, (1,))  # broker 3 is not live to the controller

        # A controlled shutdown still goes through (requests over tcp, state over TLS).
        assert cluster.brokers[2].terminate() == 0
        assert "controlled: True" in cluster.brokers[2].log() and cluster.leaders("orders") == {0: 1, 1: 1}
