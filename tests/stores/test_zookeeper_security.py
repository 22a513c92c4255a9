"""TLS and SASL to ZooKeeper through kazoo (kctl.stores.zkclient), against real servers set up for them.

Each release of ``kctl.testing.zookeeper.RELEASES`` serves TLS on a ``secureClientPort`` (Netty,
PEM keystore, client certificates required) and takes SASL DIGEST-MD5 logins, closing sessions
without one. Kafka's ZooKeeper client properties are read as Kafka names them.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kctl.errors import InvalidConfigurationError, NoAuthError, StoreUnavailableError
from kctl.model import LeaderAndIsr
from kctl.stores import MATCH_ANY_VERSION, paths
from kctl.stores.zkacl import ALL, CREATE, READ, AclPolicy
from kctl.properties import read_properties
from kctl.stores.zkclient import ClientSecurity, ZooKeeperTls
from kctl.testing.pki import TestCertificateAuthority, certificate_authority
from kctl.testing.store_contract import ASSIGNMENT, T0, broker, state
from kctl.testing.zookeeper import ServerSecurity, ZooKeeperEnsemble, ZooKeeperInstallation, in_ci, require_zookeeper

try:
    from kctl.stores.zookeeper import ZooKeeperStore
    from kctl.transports.zkqueue import ZkQueueTransport
except ImportError:
    if in_ci():
        raise
    pytest.skip("kazoo is not installed: pip install 'kctl[zookeeper]'", allow_module_level=True)

__all__ = ["certificate_authority"]

USERS = {"ctl": "c-secret", "b1": "b1-secret", "adm": "a-secret", "mallory": "m-secret"}
POLICY = AclPolicy.parse("controller=sasl:ctl,broker.1=sasl:b1,admin=sasl:adm")


def login(user: str) -> tuple[str, str]:
    return user, USERS[user]


@pytest.fixture(scope="module")
def secure_server(
    zookeeper_release: ZooKeeperInstallation, certificate_authority: TestCertificateAuthority
) -> Iterator[ZooKeeperEnsemble]:
    """A server of each release with TLS and required SASL logins."""
    security = ServerSecurity(
        keystore=certificate_authority.issue("zookeeper"), truststore=certificate_authority.certificate,
        sasl_users=USERS, require_sasl=True,
    )
    with ZooKeeperEnsemble(1, installation=zookeeper_release, security=security) as ensemble:
        yield ensemble


@pytest.fixture(scope="module")
def tls(certificate_authority: TestCertificateAuthority) -> ZooKeeperTls:
    """A client with a certificate of the servers' CA, set up as Kafka's properties say."""
    return ZooKeeperTls.from_properties({  # type: ignore[return-value]
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "zookeeper.ssl.keystore.location": str(certificate_authority.issue("kctl-client", password="k-secret")),
        "zookeeper.ssl.keystore.password": "k-secret",
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.truststore.location": str(certificate_authority.certificate),
        "zookeeper.ssl.truststore.type": "PEM",
    })


Connect = Callable[..., ZooKeeperStore]


@pytest.fixture
def connect(secure_server: ZooKeeperEnsemble, zookeeper_chroot: str, tls: ZooKeeperTls) -> Iterator[Connect]:
    """Stores on the TLS port under ``POLICY``, logged in as the named user (options override)."""
    opened: list[ZooKeeperStore] = []

    def open_store(user: str | None, **options: Any) -> ZooKeeperStore:
        settings = {"tls": tls, "acl": POLICY, "sasl": None if user is None else login(user), **options}
        hosts = secure_server.secure_hosts if settings["tls"] is not None else secure_server.hosts
        store = ZooKeeperStore(hosts, zookeeper_chroot, **settings)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


# --- On a real server ------------------------------------------------------------------------------


def test_a_secured_cluster_over_tls_with_sasl_identities(connect: Connect) -> None:
    controller, broker_store, admin = connect("ctl"), connect("b1"), connect("adm")
    assert (controller.identities, broker_store.identities) == (("sasl:ctl",), ("sasl:b1",))
    _, version = controller.register_controller_and_increment_epoch(0)
    assert broker_store.register_broker(broker(1)) > 0
    admin.create_topic("t", ASSIGNMENT)
    assert set(controller.create_partition_states({T0: state(1, (1, 2, 3))}, version).values()) == {None}
    assert T0 in controller.update_partition_states({T0: LeaderAndIsr(1, (1, 2), 1)}, 1, version).successful
    assert set(controller.get_all_brokers()) == {1}  # broker 1's own identity registered it
    assert sorted(controller.acl_of(paths.broker(1))) == [(READ, "world", "anyone"), (ALL, "sasl", "b1"),
                                                          (ALL, "sasl", "ctl")]
    assert sorted(controller.acl_of(paths.BROKER_IDS)) == [(READ, "world", "anyone"), (CREATE | READ, "sasl", "b1"),
                                                           (ALL, "sasl", "ctl")]
    for intruder in (connect("mallory"), broker_store, admin):
        with pytest.raises(NoAuthError, match=r"not authorised to create /controller: .* gives SASL user"):
            intruder.register_controller_and_increment_epoch(9)
        failed = intruder.update_partition_states({T0: LeaderAndIsr(9, (9,), 9, 1)}, 9, MATCH_ANY_VERSION).failed
        assert isinstance(failed[T0], NoAuthError)
    with pytest.raises(NoAuthError, match="not authorised to create /brokers/ids/2"):
        connect("mallory").register_broker(broker(2))
    assert controller.get_partition_states([T0]).values[T0].leader_and_isr.leader == 1


def test_sasl_and_digest_identities_in_one_session(connect: Connect) -> None:
    policy = AclPolicy.parse(f"controller=sasl:ctl,admin={ClientSecurity(auth=('ops', 'o')).identities()[0]}")
    connect("ctl", acl=policy)
    both = connect("mallory", auth=("ops", "o"), acl=policy)  # the digest identity is the admin one
    assert both.identities == (ClientSecurity(auth=("ops", "o")).identities()[0], "sasl:mallory")
    both.create_topic("t", ASSIGNMENT)


def test_logins_the_server_refuses(connect: Connect) -> None:
    connect("ctl")
    with pytest.raises(StoreUnavailableError, match=r"closes sessions without a SASL login, and an "
                                                    r"unauthenticated session made none"):
        connect(None)
    with pytest.raises(StoreUnavailableError, match=r"refused the login of SASL user 'ctl' \(a wrong SASL user or "
                                                    r"password, or a server without SASL\) \(last error: AUTH_FAILED"):
        connect(None, sasl=("ctl", "wrong"), connection_timeout=10)
    with pytest.raises(StoreUnavailableError, match="refused the login of SASL user 'nobody'"):
        connect(None, sasl=("nobody", "x"), connection_timeout=10)


# kazoo leaves the socket of a failed TLS handshake for the garbage collector (a ResourceWarning):
# collected in the test that fails the handshakes, not in whichever test runs next.
IGNORE_UNCLOSED_SOCKETS = pytest.mark.filterwarnings("ignore::ResourceWarning",
                                                     "ignore::pytest.PytestUnraisableExceptionWarning")


@IGNORE_UNCLOSED_SOCKETS
def test_tls_handshakes_the_server_refuses(
    connect: Connect, secure_server: ZooKeeperEnsemble, zookeeper_chroot: str,
    certificate_authority: TestCertificateAuthority, tmp_path: Path,
) -> None:
    connect("ctl")
    other = TestCertificateAuthority(tmp_path / "other")
    trusted = str(certificate_authority.certificate)
    refusals = {
        "no client certificate": ZooKeeperTls(truststore=trusted),
        "a certificate of another CA": ZooKeeperTls(keystore=str(other.issue("stranger")), truststore=trusted),
        "a server it does not trust": ZooKeeperTls(keystore=str(certificate_authority.issue("c2")),
                                                   truststore=str(other.certificate)),
    }
    for what, tls in refusals.items():
        with pytest.raises(StoreUnavailableError, match=r"over TLS within 2s \(last error: .*SSL") as refused:
            ZooKeeperStore(secure_server.secure_hosts, zookeeper_chroot, tls=tls, sasl=login("ctl"),
                           connection_timeout=2)
        if what == "a server it does not trust":
            assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
    with pytest.raises(StoreUnavailableError, match=r"cannot connect to ZooKeeper at 127\.0\.0\.1:\d+ within 2s"):
        ZooKeeperStore(secure_server.secure_hosts, zookeeper_chroot, sasl=login("ctl"), connection_timeout=2)
    gc.collect()


def test_the_zkqueue_transport_over_tls_and_sasl(
    connect: Connect, secure_server: ZooKeeperEnsemble, zookeeper_chroot: str, tls: ZooKeeperTls
) -> None:
    connect("ctl")  # creates the queues' parents
    transport = ZkQueueTransport(hosts=secure_server.secure_hosts + zookeeper_chroot, tls=tls, sasl=login("b1"),
                                 acl=POLICY)
    try:
        queue = transport.queue(f"{paths.CONTROLLER_STATE}/1")
        queue.put("req", 1, "token", "hello")
        assert [(item.sender, item.body) for item in queue.items()] == [(1, "hello")]
        acl = transport.client.get_acls(f"{paths.CONTROLLER_STATE}/1")[0]
        assert sorted((a.perms, a.id.scheme, a.id.id) for a in acl) == sorted(
            (e.perms, e.scheme, e.id) for e in POLICY.acl(f"{paths.CONTROLLER_STATE}/1"))
    finally:
        transport.close()
    with pytest.raises(NoAuthError):
        connect("adm").register_broker(broker(1))


@IGNORE_UNCLOSED_SOCKETS
def test_the_server_name_is_verified_unless_kafka_says_not_to(
    certificate_authority: TestCertificateAuthority,
) -> None:
    """Kafka's zookeeper.ssl.endpoint.identification.algorithm: HTTPS (the default) checks that the
    server's certificate names the host of the connect string; empty turns the check off."""
    security = ServerSecurity(keystore=certificate_authority.issue("elsewhere", hosts=("zookeeper.invalid",)),
                              truststore=certificate_authority.certificate)
    client = str(certificate_authority.issue("client-of-elsewhere"))
    properties = {"zookeeper.ssl.client.enable": "true", "zookeeper.ssl.keystore.location": client,
                  "zookeeper.ssl.truststore.location": str(certificate_authority.certificate)}
    with ZooKeeperEnsemble(1, installation=require_zookeeper(), security=security) as ensemble:
        checked = ZooKeeperTls.from_properties(properties)
        with pytest.raises(StoreUnavailableError, match="IP address mismatch"):
            ZooKeeperStore(ensemble.secure_hosts, tls=checked, connection_timeout=2)
        unchecked = ZooKeeperTls.from_properties(
            {**properties, "zookeeper.ssl.endpoint.identification.algorithm": ""})
        store = ZooKeeperStore(ensemble.secure_hosts, tls=unchecked)
        try:
            assert store.get_all_topics() == set()
        finally:
            store.close()
    gc.collect()


# --- Kafka's client properties ---------------------------------------------------------------------


def test_tls_properties_are_kafkas(certificate_authority: TestCertificateAuthority, tmp_path: Path) -> None:
    keystore = str(certificate_authority.issue("props", password="pw"))
    ca = str(certificate_authority.certificate)
    assert ZooKeeperTls.from_properties({}) is None
    assert ZooKeeperTls.from_properties({"zookeeper.ssl.client.enable": "false", "zookeeper.ssl.keystore.location": "x"}) is None
    assert ZooKeeperTls.from_properties({"zookeeper.ssl.client.enable": "true"}) == ZooKeeperTls()
    assert ZooKeeperTls.from_properties({
        "zookeeper.ssl.client.enable": "TRUE", "zookeeper.ssl.keystore.location": keystore,
        "zookeeper.ssl.keystore.password": "pw", "zookeeper.ssl.truststore.location": ca,
        "zookeeper.ssl.truststore.password": "ignored for PEM", "zookeeper.ssl.crl.enable": "false",
        "zookeeper.ssl.endpoint.identification.algorithm": "",
    }) == ZooKeeperTls(keystore, "pw", ca, verify_hostname=False)
    options = ClientSecurity(sasl=("u", "p"), tls=ZooKeeperTls(keystore, "pw", ca)).kazoo_options()
    assert options == {"sasl_options": {"mechanism": "DIGEST-MD5", "username": "u", "password": "p"},
                       "use_ssl": True, "ca": ca, "certfile": keystore, "keyfile": keystore,
                       "keyfile_password": "pw", "verify_certs": True, "check_hostname": True}

    enabled = {"zookeeper.ssl.client.enable": "true"}
    bad = {
        "zookeeper.ssl.keystore.type": ("JKS", "kctl reads PEM stores only"),
        "zookeeper.ssl.truststore.type": ("PKCS12", "kctl reads PEM stores only"),
        "zookeeper.ssl.protocol": ("TLSv1.2", "zookeeper.ssl.protocol is not supported"),
        "zookeeper.ssl.cipher.suites": ("X", "is not supported"),
        "zookeeper.ssl.ocsp.enable": ("true", "checks no CRL or OCSP"),
        "zookeeper.ssl.client.enable": ("yes", "expected true or false"),
        "zookeeper.ssl.endpoint.identification.algorithm": ("LDAPS", "expected HTTPS or nothing"),
        "zookeeper.ssl.keystore.location": (str(tmp_path / "missing.pem"), "keystore.location=.*missing.pem"),
        "zookeeper.ssl.truststore.location": (keystore, None),  # a keystore holds a certificate too: accepted
    }
    for name, (value, message) in bad.items():
        properties = {**enabled, name: value}
        if message is None:
            assert ZooKeeperTls.from_properties(properties) is not None
            continue
        with pytest.raises(InvalidConfigurationError, match=message):
            ZooKeeperTls.from_properties(properties)
    with pytest.raises(InvalidConfigurationError, match="no PEM PRIVATE KEY"):
        ZooKeeperTls(keystore=ca)
    with pytest.raises(InvalidConfigurationError, match="a wrong zookeeper.ssl.keystore.password"):
        ZooKeeperTls(keystore=keystore, keystore_password="wrong")


def test_tls_config_files_are_java_properties(tmp_path: Path) -> None:
    file = tmp_path / "zk-tls.properties"
    file.write_text(
        "# Kafka's --zk-tls-config-file\n! also a comment\n\n"
        "zookeeper.ssl.client.enable=true\n"
        "zookeeper.ssl.keystore.location : /etc/kctl/client.pem\n"
        "zookeeper.ssl.truststore.location=/etc/kctl/\\\n    ca.pem\n"
        "zookeeper.ssl.keystore.password=a=b:c\n"
    )
    assert read_properties(str(file)) == {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.ssl.keystore.location": "/etc/kctl/client.pem",
        "zookeeper.ssl.truststore.location": "/etc/kctl/ca.pem",
        "zookeeper.ssl.keystore.password": "a=b:c",
    }
    with pytest.raises(InvalidConfigurationError, match="cannot read the properties file"):
        read_properties(str(tmp_path / "missing"))
