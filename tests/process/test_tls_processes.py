"""Real ``kctl controller`` / ``kctl broker`` processes on a real ZooKeeper, over TLS with authorization.

The keys, certificates and properties files are the ones docs/security.md makes (see
:mod:`tests.support.tls_harness`). Forged StopReplica(delete), UpdateMetadata(epoch 2^31-1) and
ControlledShutdown requests from a plaintext peer, from a peer whose certificate another CA signed,
and from a valid broker certificate are refused and logged, and the cluster then still completes a
reassignment, a controlled shutdown and a controller failover. Without TLS, the controller epoch
rule alone keeps a forged epoch from wedging a broker.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from kctl import admin
from kctl.errors import Errors
from kctl.model import TopicPartition
from kctl.net import Address, Header, NetworkError
from kctl.requests import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kctl.testing.ports import free_ports
from kctl.transports.tcp import broker_address

from tests.support.process_harness import KCTL, ProcessCluster
from tests.support.tls_harness import Certificates, Outsider

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
FORGED_EPOCH = 2**31 - 1


def forge(peer: Outsider, broker: Address, controller: Address, controller_id: int, epoch: int, broker_epoch: int) -> list[Any]:
    """StopReplica(delete) of orders-0 with the current epoch and UpdateMetadata with epoch 2^31-1
    to broker 1 in the active controller's name, and a ControlledShutdown of broker 1 to the controller."""
    stop = StopReplicaRequest(3, controller_id, epoch, -1, True, (StopReplicaPartitionState("orders", 0, -2, True),))
    metadata = UpdateMetadataRequest(7, controller_id, FORGED_EPOCH, -1, (), (), {})
    shutdown = ControlledShutdownRequest(1, broker_epoch)
    return [
        peer.send(broker, Header(controller_id, epoch, -1, "127.0.0.1:1"), stop),
        peer.send(broker, Header(controller_id, FORGED_EPOCH, -1, "127.0.0.1:1"), metadata),
        peer.send(controller, Header(-1, -1, broker_epoch), shutdown),
    ]


def registered_address(cluster: ProcessCluster, broker_id: int) -> Address:
    info, _ = cluster.admin.get_all_brokers()[broker_id]
    address = broker_address(info)
    assert address is not None, info
    return address


def full_isrs(cluster: ProcessCluster, partitions: int, size: int) -> bool:
    states = [cluster.state(TopicPartition("orders", p)) for p in range(partitions)]
    return all(s is not None and len(s.leader_and_isr.isr) == size for s in states)


def test_forged_requests_are_refused_and_a_secured_cluster_keeps_working(
    cluster: ProcessCluster, certificates: Certificates, other_ca: Certificates
) -> None:
    ports = dict(zip((1, 2), free_ports(2)))
    controllers = {
        c: cluster.start_controller(c, ["--listen", f"127.0.0.1:{ports[c]}", *certificates.config_files(f"controller-{c}")])
        for c in (1, 2)
    }
    cluster.wait_until(lambda: cluster.active_controller() in (1, 2), 30, "a controller to be active")
    active = cluster.active_controller()
    assert active is not None
    for b in (1, 2, 3):
        cluster.start_broker(b, extra=certificates.config_files(f"broker-{b}"))
    assert "listening on 127.0.0.1:" in cluster.brokers[1].log() and "(SSL, authorization on)" in cluster.brokers[1].log()
    brokers = {b: info.rack for b, (info, _) in cluster.admin.get_all_brokers().items()}
    admin.create_topic(cluster.admin, "orders", broker_racks=brokers, assignment={0: [1, 2], 1: [2, 3], 2: [3, 1]})
    # Followers fetch over TLS, leaders report the ISR with AlterPartition: both authorized.
    cluster.wait_until(lambda: full_isrs(cluster, 3, 2), 60, "orders to have full ISRs")
    leaders, epoch = cluster.leaders("orders"), cluster.controller_epoch()
    broker_1, (info, broker_epoch) = registered_address(cluster, 1), cluster.admin.get_all_brokers()[1]
    assert [str(e) for e in info.endpoints] == [f"SSL://127.0.0.1:{broker_1[1]}"]
    controller = ("127.0.0.1", ports[active])

    # (a) plaintext, (b) a certificate named controller-1 but signed by another CA: disconnected
    # during the handshake; (c) broker 2's own valid certificate: refused by the authorizer.
    peers = [Outsider(None), Outsider(certificates.client_context(other_ca.path(f"controller-{active}.pem"))),
             Outsider(certificates.client_context(certificates.path("broker-2.pem")))]
    try:
        answers = [forge(peer, broker_1, controller, active, epoch, broker_epoch) for peer in peers]
    finally:
        for peer in peers:
            peer.close()
    for refused in answers[:2]:
        assert all(isinstance(a, NetworkError) for a in refused), refused
    denied = Errors.CLUSTER_AUTHORIZATION_FAILED
    assert answers[2] == [StopReplicaResponse(denied, {T0: denied}), UpdateMetadataResponse(denied),
                          ControlledShutdownResponse(denied)]
    broker_log, controller_log = cluster.brokers[1].log(), controllers[active].log()
    assert broker_log.count("TLS handshake failed") == 4 and controller_log.count("TLS handshake failed") == 2
    assert "Closing the connection from 127.0.0.1:" in broker_log and "WRONG_VERSION_NUMBER" in broker_log
    assert "certificate verify failed" in broker_log
    for api in ("StopReplica", "UpdateMetadata"):
        assert ("Principal = User:broker-2 is Denied Operation = ClusterAction from host = 127.0.0.1:" in broker_log
                and f"for request = {api} (not a controller" in broker_log)
    assert "for request = ControlledShutdown (sent for broker 1, whose principal is User:broker-1)" in controller_log
    # Nothing happened: broker 1 is registered with the same epoch, leads what it led, holds its
    # replicas (the ISRs stay full while it keeps serving fetches) and obeys its controller.
    assert "Shutting down broker 1" not in controller_log and "stale controller epoch" not in broker_log
    assert cluster.admin.get_all_brokers()[1][1] == broker_epoch and cluster.leaders("orders") == leaders
    assert full_isrs(cluster, 3, 2)

    # A reassignment: broker 3 joins orders-0 (fetching from broker 1), broker 2 leaves it.
    admin.request_reassignment(cluster.admin, {T0: [1, 3]})
    cluster.wait_for_reassignments({T0: [1, 3]}, 60)
    # A controlled shutdown: SIGTERM to broker 2 moves its leadership (orders-1) before it exits.
    assert cluster.brokers[2].terminate() == 0
    assert "controlled: True" in cluster.brokers[2].log()
    assert cluster.leaders("orders")[1] == 3
    # Its certificate speaks for broker 2 only while broker 2 is registered (the controller's check).
    stopped = Outsider(certificates.client_context(certificates.path("broker-2.pem")))
    try:
        late = stopped.send(controller, Header(broker_epoch=-1), ControlledShutdownRequest(2, -1))
    finally:
        stopped.close()
    assert late == ControlledShutdownResponse(Errors.BROKER_NOT_AVAILABLE)
    # A failover: the active controller is killed; the other takes over with the next epoch and
    # brings broker 2 back into its partitions when it restarts.
    controllers[active].kill()
    standby = 2 if active == 1 else 1
    cluster.wait_until(lambda: cluster.active_controller() == standby, 30, "the standby to take over",
                       watch=controllers[standby])
    assert cluster.controller_epoch() == epoch + 1
    cluster.start_broker(2, extra=certificates.config_files("broker-2"))
    cluster.wait_until(lambda: set(cluster.state(T1).leader_and_isr.isr) == {2, 3}, 60,  # type: ignore[union-attr]
                       "broker 2 to rejoin orders-1's ISR under the new controller")
    admin.request_preferred_replica_election(cluster.admin, [T1])
    cluster.wait_until(lambda: cluster.leaders("orders")[1] == 2, 30, "the preferred leader of orders-1 back")
    # No request of the cluster's own was refused: the three denials are the forged ones.
    assert sum(p.log().count(" is Denied Operation") for p in cluster.processes) == 3


def test_without_tls_a_forged_controller_epoch_does_not_wedge_a_broker(cluster: ProcessCluster) -> None:
    """The epoch rule alone: broker 1 refuses UpdateMetadata with epoch 2^31-1 (it is ahead of
    /controller_epoch) and later obeys its real controller, which makes it a leader; broker 2 then
    rejoins the ISR only because broker 1 really leads. On Kafka's rule broker 1 would refuse its
    controller's LeaderAndIsr for good, and the ISR would never grow."""
    controller = cluster.start_controller(1)
    for b in (1, 2):
        cluster.start_broker(b)
    brokers = {b: info.rack for b, (info, _) in cluster.admin.get_all_brokers().items()}
    admin.create_topic(cluster.admin, "orders", broker_racks=brokers, assignment={0: [2, 1]})
    cluster.wait_until(lambda: full_isrs(cluster, 1, 2), 60, "a full ISR", watch=controller)

    peer = Outsider(None)
    try:
        forged = UpdateMetadataRequest(7, 1, FORGED_EPOCH, -1, (), (), {})
        answer = peer.send(registered_address(cluster, 1), Header(1, FORGED_EPOCH, -1), forged)
    finally:
        peer.close()
    assert isinstance(answer, NetworkError) and "is ahead of /controller_epoch" in str(answer), answer
    assert "refused UpdateMetadata from controller 1: its controller epoch 2147483647 is ahead" in cluster.brokers[1].log()

    cluster.brokers[2].kill()
    cluster.wait_until(lambda: cluster.leaders("orders") == {0: 1}, 30, "broker 1 to lead orders-0")
    cluster.start_broker(2)
    cluster.wait_until(lambda: full_isrs(cluster, 1, 2), 60, "broker 2 to rejoin the ISR led by broker 1")
    assert "stale controller epoch" not in cluster.brokers[1].log()


def run(role: str, *options: str) -> subprocess.CompletedProcess[str]:
    """``kctl controller|broker --id 1`` with ``options``; it must stop before contacting ZooKeeper
    (nothing listens there)."""
    port = free_ports(1)[0]
    return subprocess.run([KCTL, role, "--id", "1", "--zk", f"127.0.0.1:{port}", "--zk-timeout", "1", *options],
                          capture_output=True, text=True, timeout=60)


def test_bad_tls_settings_stop_a_process_with_a_clear_error(
    certificates: Certificates, other_ca: Certificates, tmp_path: Path
) -> None:
    cluster_file, own = certificates.config_files("broker-1")[:2], certificates.config_files("broker-1")[2:]
    unreadable = tmp_path / "unreadable.pem"
    unreadable.write_text(Path(certificates.path("broker-1.pem")).read_text())
    unreadable.chmod(0)
    broker_2 = certificates.path("broker-2.pem")
    cases = {
        "a directory": ("broker", ["--config", f"ssl.keystore.location={tmp_path}"],
                        "(ssl.keystore.location): Is a directory"),
        "missing": ("broker", ["--config", f"ssl.keystore.location={tmp_path / 'nope.pem'}"],
                    f"Failed to load PEM SSL keystore {tmp_path / 'nope.pem'} (ssl.keystore.location): No such file"),
        "wrong password": ("broker", ["--config", "ssl.key.password=wrong"],
                           "(ssl.keystore.location): ssl.key.password does not decrypt the private key"),
        "other CA": ("broker", ["--config", f"ssl.keystore.location={other_ca.path('broker-1.pem')}"],
                     f"The certificate in {other_ca.path('broker-1.pem')} (ssl.keystore.location) is not accepted by "
                     f"the CA certificates in {certificates.path('ca.pem')} (ssl.truststore.location)"),
        "no authentication": ("broker", ["--config", "ssl.client.auth=none"],
                              "kctl.authorization.enable=true needs authenticated peers"),
        "misspelt": ("broker", ["--config", "ssl.keystore.locaton=x"], "Unknown configuration 'ssl.keystore.locaton'"),
        "another broker's certificate": (
            "broker", ["--config", f"ssl.keystore.location={broker_2}"],
            f"Broker 1's certificate ({broker_2}) makes it User:broker-2, but kctl.broker.principal makes broker 1 "
            "User:broker-1"),
        "a broker's certificate on a controller": (
            "controller", [], f"This controller's certificate ({certificates.path('broker-1.pem')}) makes it "
            "User:broker-1, which super.users does not name"),
        "no principal": ("broker", ["--config", "ssl.principal.mapping.rules=RULE:^CN=x$/x/"],
                         "has no principal: No rules apply to CN=broker-1,O=kctl"),
    }
    if os.geteuid() != 0:  # root reads any file
        cases["unreadable"] = ("broker", ["--config", f"ssl.keystore.location={unreadable}"], "Permission denied")
    for case, (role, options, message) in cases.items():
        done = run(role, *cluster_file, *own, *options)
        assert done.returncode == 1 and done.stderr.startswith("kctl: error: "), (case, done.stderr)
        assert message in done.stderr and "ZooKeeper" not in done.stderr, (case, done.stderr)
        assert "Traceback" not in done.stderr
