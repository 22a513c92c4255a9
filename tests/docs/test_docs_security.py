"""docs/security.md says what the code does: every security property is in its table, with the
code's default. (Its openssl commands and properties files are run by the TLS process tests, see
tests/support/tls_harness.py.)"""

from __future__ import annotations

import re
from pathlib import Path

from kctl.security import PROPERTIES, SecurityConfig

DOCS = Path(__file__).parents[2] / "docs"


def test_every_security_property_is_documented_with_its_default() -> None:
    text = (DOCS / "security.md").read_text()
    transport = text[text.index("## Controller and brokers (tcp transport)") : text.index("\n## ZooKeeper")]
    rows = dict(re.findall(r"^\| `([a-z.]+)` \|\s*([^|]*?)\s*\|", transport, re.M))
    assert sorted(rows) == sorted(PROPERTIES)
    defaults = SecurityConfig()
    assert rows["security.inter.broker.protocol"] == defaults.security_protocol
    assert rows["ssl.client.auth"] == defaults.client_auth
    assert rows["ssl.enabled.protocols"] == ",".join(defaults.enabled_protocols)
    assert rows["ssl.principal.mapping.rules"] == defaults.principal_mapping_rules
    assert rows["kctl.authorization.enable"] == str(defaults.authorization_enable).lower()


def test_the_guide_is_linked_and_keeps_a_zookeeper_section() -> None:
    assert "(docs/security.md)" in (DOCS.parent / "README.md").read_text()
    headings = re.findall(r"^## (.+)$", (DOCS / "security.md").read_text(), re.M)
    assert headings[:2] == ["Threat model", "Controller and brokers (tcp transport)"] and "ZooKeeper" in headings
