"""A certificate authority for tests: PEM keys and certificates made with the ``openssl`` command.

TLS tests need a CA, servers whose certificates name the loopback address, and clients with
certificates of their own. :class:`TestCertificateAuthority` makes them in a directory, with
elliptic-curve keys (quick to generate) valid for two days:

- :attr:`~TestCertificateAuthority.certificate`: the CA's certificate, a truststore (PEM);
- :meth:`~TestCertificateAuthority.issue`: a PEM file holding a private key and its certificate
  chain, as Kafka's PEM keystores and ZooKeeper's ``ssl.keyStore.type=PEM`` want, usable by
  servers and clients alike (extended key usage ``serverAuth`` and ``clientAuth``).

``openssl`` comes with Debian's ``ca-certificates`` (so with Java); without it the CA raises
:class:`OpenSslNotInstalledError`. The ``certificate_authority`` fixture is one CA for the test
session; without ``openssl`` it skips, or fails under ``CI=true``.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from kctl.testing.zookeeper import in_ci

INSTALL_HINT = "apt-get install -y openssl"
DAYS = 2


class OpenSslNotInstalledError(RuntimeError):
    """There is no ``openssl`` command; the message says how to install it."""


class TestCertificateAuthority:
    """A CA whose files live in ``directory``; :meth:`issue` signs certificates with it."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, directory: Path, name: str = "kctl test CA") -> None:
        openssl = shutil.which("openssl")
        if openssl is None:
            raise OpenSslNotInstalledError(f"no openssl command on PATH; install: {INSTALL_HINT}")
        self._openssl = openssl
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.key = directory / "ca.key"
        self.certificate = directory / "ca.pem"
        self._run("req", "-x509", "-new", *_EC_KEY, "-nodes", "-keyout", self.key, "-out", self.certificate,
                  "-days", str(DAYS), "-subj", f"/CN={name}",
                  "-addext", "basicConstraints=critical,CA:TRUE",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                  "-addext", "subjectKeyIdentifier=hash")

    def issue(self, name: str, hosts: Sequence[str] = ("127.0.0.1", "localhost"), password: str | None = None) -> Path:
        """A PEM file with a new private key (encrypted with ``password`` if given) and its
        certificate for ``CN=name``, naming ``hosts`` (IP addresses or DNS names) as its subject
        alternative names."""
        key, request, certificate = (self.directory / f"{name}.{suffix}" for suffix in ("key", "csr", "crt"))
        self._run("req", "-new", *_EC_KEY, "-nodes", "-keyout", key, "-out", request, "-subj", f"/CN={name}")
        names = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() or ":" in h else f"DNS:{h}" for h in hosts)
        extensions = self.directory / f"{name}.ext"
        extensions.write_text(
            f"subjectAltName={names}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyAgreement\n"
            "extendedKeyUsage=serverAuth,clientAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n"
        )
        self._run("x509", "-req", "-in", request, "-CA", self.certificate, "-CAkey", self.key, "-CAcreateserial",
                  "-out", certificate, "-days", str(DAYS), "-extfile", extensions)
        if password is not None:
            encrypted = self.directory / f"{name}.enc.key"
            self._run("pkcs8", "-topk8", "-in", key, "-out", encrypted, "-passout", f"pass:{password}")
            key = encrypted
        bundle = self.directory / f"{name}.pem"
        bundle.write_text(key.read_text() + certificate.read_text())
        return bundle

    def _run(self, *args: str | Path) -> None:
        done = subprocess.run([self._openssl, *map(str, args)], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeError(f"openssl {args[0]} failed ({done.returncode}): {done.stderr.strip()}")


_EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")


@pytest.fixture(scope="session")
def certificate_authority(tmp_path_factory: pytest.TempPathFactory) -> TestCertificateAuthority:
    """A CA for the test session (skipped without ``openssl``, failed under ``CI=true``)."""
    try:
        return TestCertificateAuthority(tmp_path_factory.mktemp("kctl-ca"))
    except OpenSslNotInstalledError as exc:
        if in_ci():
            pytest.fail(f"CI=true and no certificates can be made: {exc}", pytrace=False)
        pytest.skip(str(exc))


__all__ = ["OpenSslNotInstalledError", "TestCertificateAuthority", "certificate_authority"]
