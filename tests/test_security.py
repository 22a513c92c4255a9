"""The tcp transport's security settings: principals, mapping rules, properties, the authorizer.

TLS itself (files, handshakes, refusals on the wire) is tested with real certificates in
tests/process/test_tls_transport.py and test_tls_processes.py.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pytest

from kctl.errors import InvalidConfigurationError
from kctl.process import process_properties
from kctl.properties import read_properties
from kctl.security import (
    ANONYMOUS,
    ClusterAuthorizer,
    KafkaPrincipal,
    NoMatchingRule,
    Peer,
    SecurityConfig,
    SslPrincipalMapper,
    is_security_property,
)
from kctl.security.principal import distinguished_name, parse_principals

SUBJECT = ((("countryName", "US"),), (("organizationName", "kctl"),), (("organizationalUnitName", "ops"),),
           (("commonName", "broker-1"),))
AUTHORIZED = {
    "security.inter.broker.protocol": "SSL", "ssl.keystore.location": "k.pem", "ssl.truststore.location": "ca.pem",
    "ssl.client.auth": "required", "super.users": "User:controller-1;User:controller-2",
    "kctl.authorization.enable": "true", "kctl.broker.principal": "User:broker-{id}",
}


# --- Principals and distinguished names -------------------------------------------------------------


def test_principals_parse_as_kafka_writes_them() -> None:
    assert KafkaPrincipal.parse(" User:CN=a,O=b:c ") == KafkaPrincipal("User", "CN=a,O=b:c")
    assert str(KafkaPrincipal("User", "alice")) == "User:alice" and str(ANONYMOUS) == "User:ANONYMOUS"
    assert parse_principals("super.users", "User:a; User:b;;") == {KafkaPrincipal("User", "a"), KafkaPrincipal("User", "b")}
    for bad in ("alice", "User:", ":alice"):
        with pytest.raises(InvalidConfigurationError, match="super.users: .* is not a principal"):
            parse_principals("super.users", f"User:ok;{bad}")


def test_the_distinguished_name_is_rfc_2253_most_specific_first() -> None:
    assert distinguished_name(SUBJECT) == "CN=broker-1,OU=ops,O=kctl,C=US"
    # Multi-valued RDNs join with '+'; special characters are escaped; unknown attributes keep Python's name.
    subject = ((("domainComponent", "org"),), (("commonName", "a,b+c"), ("userId", "#42 ")), (("emailAddress", "x@y"),))
    assert distinguished_name(subject) == r"emailAddress=x@y,CN=a\,b\+c+UID=\#42\ ,DC=org"
    assert distinguished_name(((("commonName", ' "q" <x>; \\ '),),)) == r'CN=\ \"q\" \<x\>\; \\\ '


# --- ssl.principal.mapping.rules (the cases of Kafka's SslPrincipalMapperTest, and more) -------------


@pytest.mark.parametrize("rules, dn, name", [
    ("DEFAULT", "CN=Kafka Server,OU=ops", "CN=Kafka Server,OU=ops"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=kafka1,OU=ServiceUsers,O=Org,C=US", "kafka1"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=kafka1,OU=Users,O=Org", "CN=kafka1,OU=Users,O=Org"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L", "CN=Duke,OU=JavaSoft,O=Sun,L=Cupertino,ST=CA,C=US",
     "duke@javasoft"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U", "CN=Duke,OU=JavaSoft,O=Sun,L=Cupertino,ST=CA,C=US",
     "DUKE@JAVASOFT"),
    ("RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/,DEFAULT", "CN=Tkafka,O=x", "CN=Tkafka,O=x"),  # a comma inside a pattern
    (r"RULE:^CN=(.*)\/x$/$1/", "CN=a/x", "a"),  # an escaped slash in the pattern
    ("RULE:^CN=(.*)$/$1 costs \\$5 and $9/", "CN=a", "a costs $5 and $9"),  # $9 beyond the groups stays literal
    ("RULE:^(?P<host>[a-z]+)-(\\d+)$/${host}.$2/", "broker-7", "broker.7"),
    ("  RULE:^CN=([^,]+),O=kctl$/$1/  ,  DEFAULT  ", "CN=broker-1,O=kctl", "broker-1"),
])
def test_mapping_rules(rules: str, dn: str, name: str) -> None:
    assert SslPrincipalMapper(rules).name(dn) == name


def test_a_name_no_rule_applies_to_is_refused() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=([^,]+),O=kctl$/$1/")
    with pytest.raises(NoMatchingRule, match=r"No rules apply to CN=x,O=other, rules \[RULE:\^CN="):
        mapper.name("CN=x,O=other")
    assert mapper.principal({"subject": ((("organizationName", "kctl"),), (("commonName", "b-1"),))}) == KafkaPrincipal("User", "b-1")
    assert mapper.principal({}) == ANONYMOUS and mapper.principal(None) == ANONYMOUS  # no certificate presented


@pytest.mark.parametrize("rules, problem", [
    ("RULE:^CN=(.*)$/$1", "unmatched substring: `RULE:\\^CN=\\(\\.\\*\\)\\$/\\$1`"),
    ("DEFAULT,garbage", "invalid rule `garbage`"),
    ("RULE:^CN=(.*$/$1/", "bad pattern"),
    ("RULE:^CN=(.*)$/$ money/", "'\\$' in the replacement is no group reference"),
    ("RULE:^CN=(.*)$/${nope}/", "'\\$\\{nope\\}' in the replacement is no group reference"),
])
def test_rules_that_do_not_parse_are_configuration_errors(rules: str, problem: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=f"ssl.principal.mapping.rules: .*{problem}"):
        SslPrincipalMapper(rules)


# --- The properties ------------------------------------------------------------------------------------


def test_defaults_are_plaintext_without_authorization() -> None:
    config = SecurityConfig.from_properties({})
    assert (config.security_protocol, config.tls, config.authorization_enable) == ("PLAINTEXT", False, False)
    assert config.client_auth == "none" and config.endpoint_identification and config.enabled_protocols == ("TLSv1.2", "TLSv1.3")


def test_a_full_configuration_parses() -> None:
    config = SecurityConfig.from_properties({**AUTHORIZED, "ssl.keystore.type": "pem", "ssl.key.password": "pw",
                                             "ssl.endpoint.identification.algorithm": "", "ssl.enabled.protocols": "TLSv1.3"})
    assert config.tls and config.authorization_enable and config.client_auth == "required"
    assert not config.endpoint_identification and config.enabled_protocols == ("TLSv1.3",)
    assert config.super_users == {KafkaPrincipal("User", "controller-1"), KafkaPrincipal("User", "controller-2")}
    assert config.broker_principal == "User:broker-{id}" and "pw" not in repr(config)


@pytest.mark.parametrize("changes, message", [
    ({"ssl.keystore.locaton": "x"}, "Unknown configuration 'ssl.keystore.locaton'; known security properties: "),
    ({"security.inter.broker.protocol": "SASL_SSL"}, "SASL is not supported"),
    ({"ssl.keystore.type": "JKS"}, "Invalid value 'JKS' for configuration ssl.keystore.type: expected one of PEM"),
    ({"ssl.keystore.password": "x"}, "SSL key store password cannot be specified with PEM format"),
    ({"ssl.truststore.password": "x"}, "SSL trust store password cannot be specified for PEM format"),
    ({"ssl.client.auth": "always"}, "ssl.client.auth: expected one of none, requested, required"),
    ({"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols: expected one of TLSv1.2, TLSv1.3"),
    ({"ssl.enabled.protocols": " , "}, "ssl.enabled.protocols: name a TLS version"),
    ({"ssl.endpoint.identification.algorithm": "ldaps"}, "expected one of https, \\(empty\\)"),
    ({"kctl.authorization.enable": "yes"}, "kctl.authorization.enable: expected one of true, false"),
    ({"ssl.keystore.location": ""}, "ssl.keystore.location: expected a file"),
    ({"ssl.truststore.location": None}, "security.inter.broker.protocol=SSL needs ssl.truststore.location"),
    ({"ssl.client.auth": "requested"}, "needs authenticated peers: security.inter.broker.protocol=SSL and ssl.client.auth=required"),
    ({"super.users": ""}, "kctl.authorization.enable=true needs super.users"),
    ({"super.users": "controller"}, "super.users: 'controller' is not a principal"),
    ({"kctl.broker.principal": None}, "kctl.authorization.enable=true needs kctl.broker.principal"),
    ({"kctl.broker.principal": "User:broker"}, "kctl.broker.principal: expected a principal with \\{id\\} once"),
    ({"kctl.broker.principal": "{id}"}, "kctl.broker.principal: '\\{id\\}' is not a principal"),
    ({"ssl.key.password": True}, "ssl.key.password: expected a string"),
])
def test_bad_properties_are_refused_naming_the_property(changes: dict[str, object], message: str) -> None:
    properties = {k: v for k, v in {**AUTHORIZED, **changes}.items() if v is not None}
    with pytest.raises(InvalidConfigurationError, match=message):
        SecurityConfig.from_properties(properties)


def test_security_properties_are_told_apart_from_the_controllers() -> None:
    assert all(is_security_property(n) for n in (*AUTHORIZED, "ssl.anything.misspelt"))
    assert not any(is_security_property(n) for n in ("request.timeout.ms", "zookeeper.ssl.client.enable", "listeners"))


# --- The authorizer ----------------------------------------------------------------------------------


def test_the_authorizer_splits_cluster_action_by_role(caplog: pytest.LogCaptureFixture) -> None:
    authorizer = ClusterAuthorizer(SecurityConfig.from_properties(AUTHORIZED))
    controller, broker_1, stranger = (Peer("10.0.0.1:4000", KafkaPrincipal("User", n)) for n in ("controller-2", "broker-1", "x"))
    caplog.set_level(logging.WARNING, "kctl.authorizer")
    assert authorizer.authorize_controller_request(controller, "StopReplica")
    assert authorizer.authorize_broker_request(controller, "ControlledShutdown", 3)  # a super user may do anything
    assert authorizer.authorize_broker_request(broker_1, "AlterPartition", 1)
    assert caplog.records == []
    assert not authorizer.authorize_controller_request(broker_1, "StopReplica")
    assert not authorizer.authorize_broker_request(broker_1, "ControlledShutdown", 2)
    assert not authorizer.authorize_broker_request(Peer("10.0.0.2:1"), "Fetch", 1)  # ANONYMOUS
    assert not authorizer.authorize_controller_request(stranger, "UpdateMetadata")
    assert [r.getMessage() for r in caplog.records] == [
        "Principal = User:broker-1 is Denied Operation = ClusterAction from host = 10.0.0.1:4000 on resource = "
        "Cluster:LITERAL:kafka-cluster for request = StopReplica (not a controller: only super.users may send "
        "controller requests)",
        "Principal = User:broker-1 is Denied Operation = ClusterAction from host = 10.0.0.1:4000 on resource = "
        "Cluster:LITERAL:kafka-cluster for request = ControlledShutdown (sent for broker 2, whose principal is "
        "User:broker-2)",
        "Principal = User:ANONYMOUS is Denied Operation = ClusterAction from host = 10.0.0.2:1 on resource = "
        "Cluster:LITERAL:kafka-cluster for request = Fetch (sent for broker 1, whose principal is User:broker-1)",
        "Principal = User:x is Denied Operation = ClusterAction from host = 10.0.0.1:4000 on resource = "
        "Cluster:LITERAL:kafka-cluster for request = UpdateMetadata (not a controller: only super.users may send "
        "controller requests)",
    ]


def test_without_authorization_everything_is_allowed() -> None:
    authorizer = ClusterAuthorizer()
    assert authorizer.authorize_controller_request(Peer("h:1"), "StopReplica")
    assert authorizer.authorize_broker_request(Peer("h:1"), "ControlledShutdown", 1)


# --- Properties files and the process's command line -------------------------------------------------


def test_properties_files_read_as_java_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# a comment\n"
        "  ! another\n"
        "\n"
        "ssl.keystore.location = /etc/kctl/a b.pem\n"
        "super.users:User:a;\\\n"
        "    User:b\n"
        "ssl.principal.mapping.rules RULE:^CN=(\\\\w+)$/$1/\n"
        "key\\=with\\:separators=v\\u00e9\\tx\n"
        "empty\n"
        "ssl.key.password=p\\\\\n",
        encoding="utf-8",
    )
    assert read_properties(str(path)) == {
        "ssl.keystore.location": "/etc/kctl/a b.pem",
        "super.users": "User:a;User:b",
        "ssl.principal.mapping.rules": r"RULE:^CN=(\w+)$/$1/",
        "key=with:separators": "vé\tx",
        "empty": "",
        "ssl.key.password": "p\\",
    }


def test_bad_properties_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigurationError, match="cannot read the properties file .*missing: No such file"):
        read_properties(str(tmp_path / "missing"))
    (tmp_path / "latin1").write_bytes(b"a=caf\xe9\n")
    with pytest.raises(InvalidConfigurationError, match="latin1 is not UTF-8 \\(byte 5\\)"):
        read_properties(str(tmp_path / "latin1"))
    (tmp_path / "open").write_text("a=b\\\n")
    with pytest.raises(InvalidConfigurationError, match="ends inside a continued line"):
        read_properties(str(tmp_path / "open"))
    (tmp_path / "huge").write_bytes(b"#" * (1 << 20) + b"\n")
    with pytest.raises(InvalidConfigurationError, match="larger than 1048576 bytes"):
        read_properties(str(tmp_path / "huge"))


def test_files_then_the_command_line_then_split_by_kind(tmp_path: Path) -> None:
    first, second = tmp_path / "cluster.properties", tmp_path / "own.properties"
    first.write_text("request.timeout.ms=1000\nsuper.users=User:a\nzookeeper.session.timeout.ms=5000\n")
    second.write_text("request.timeout.ms=2000\n")
    args = argparse.Namespace(config_file=[str(first), str(second)], config=[("request.timeout.ms", "3000")])
    config, security, client = process_properties(args)
    assert client == {}
    assert config.request_timeout_ms == 3000 and config.zookeeper_session_timeout_ms == 5000
    assert security.config.super_users == {KafkaPrincipal("User", "a")} and security.server_context is None
    args.config = [("ssl.keystore.locaton", "x")]
    with pytest.raises(InvalidConfigurationError, match="known security properties"):
        process_properties(args)
    args.config = [("request.timout.ms", "1")]
    with pytest.raises(InvalidConfigurationError, match="Unknown configuration 'request.timout.ms'"):
        process_properties(args)
