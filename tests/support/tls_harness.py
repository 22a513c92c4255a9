"""Keys, certificates and properties for the TLS tests, made as docs/security.md tells an operator.

The shell block of the guide's "Setting it up" steps runs as it is, in a fresh directory, and its
two properties files (the cluster's and one process's) are written there with the directory in
place of ``/etc/kctl/tls``: what the tests run is what the documentation says.
"""

from __future__ import annotations

import re
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kctl.net import Address, EventLoopThread, FrameClient, Header, NetworkError, Request
from kctl.properties import read_properties
from kctl.security import ListenerSecurity

SECURITY_MD = Path(__file__).parents[2] / "docs" / "security.md"
DOCS_DIRECTORY = "/etc/kctl/tls"
PROCESSES = ("controller-1", "controller-2", "broker-1", "broker-2", "broker-3")
"""The processes the guide's commands make a key and certificate for."""


def tcp_section() -> str:
    text = SECURITY_MD.read_text()
    start = text.index("## Controller and brokers (tcp transport)")
    return text[start:text.index("\n## ", start + 1)]


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", tcp_section(), re.S)


@dataclass(frozen=True)
class Certificates:
    """A directory holding the guide's CA, keys and properties files."""

    directory: Path

    def path(self, name: str) -> str:
        return str(self.directory / name)

    def config_files(self, process: str) -> list[str]:
        """``--config-file`` options of one process: the cluster's file, then its own."""
        return ["--config-file", self.path("security.properties"), "--config-file", self.path(f"{process}.properties")]

    def properties(self, process: str) -> dict[str, str]:
        """The same as a mapping (for building a :class:`ListenerSecurity` in the test)."""
        return {**read_properties(self.path("security.properties")), **read_properties(self.path(f"{process}.properties"))}

    def security(self, process: str) -> ListenerSecurity:
        return ListenerSecurity.from_properties(self.properties(process))

    def client_context(self, keystore: str, truststore: str | None = None) -> ssl.SSLContext:
        """A TLS client presenting ``keystore`` (any file, even from another CA), trusting
        ``truststore`` (default: this cluster's CA)."""
        context = ssl.create_default_context(cafile=truststore or self.path("ca.pem"))
        context.load_cert_chain(keystore, password=self.properties("broker-1")["ssl.key.password"])
        return context


def make_certificates(directory: Path) -> Certificates:
    """Run the guide's openssl commands in ``directory`` and write its properties files there."""
    directory.mkdir(parents=True, exist_ok=True)
    [script] = code_blocks("sh")[:1]
    done = subprocess.run(["bash", "-euc", script], cwd=directory, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the guide's openssl commands failed:\n{done.stderr[-3000:]}"
    cluster, own = (block.replace(DOCS_DIRECTORY, str(directory)) for block in code_blocks("properties")[:2])
    (directory / "security.properties").write_text(cluster)
    for process in PROCESSES:
        assert (directory / f"{process}.pem").exists(), process
        (directory / f"{process}.properties").write_text(own.replace("broker-1", process))
    return Certificates(directory)


class Outsider:
    """A peer's connections, plaintext or TLS with ``context`` (any certificate, even one the
    cluster's truststore refuses: unlike a process, it does not check its own)."""

    def __init__(self, context: ssl.SSLContext | None) -> None:
        security = ListenerSecurity()
        security.client_context = context
        self.network = EventLoopThread()
        self.client = FrameClient(self.network, connect_timeout=10, security=security)

    def send(self, address: Address, header: Header, body: Any) -> Any:
        """The answer, or the :class:`NetworkError` that stands for none."""
        try:
            return self.network.run(self.client.call(address, Request(body.api, header, body), 20))
        except NetworkError as exc:
            return exc

    def close(self) -> None:
        self.client.close()
        self.network.stop()
