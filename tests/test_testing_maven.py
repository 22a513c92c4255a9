"""kctl.testing.maven: programs fetched from Maven Central once, into a cache, for tests that run them.

The fetching itself runs whenever ``scripts/test`` runs (and the ZooKeeper 3.9 fixtures use what it
fetched); these tests pin the cache's rules with a stand-in ``mvn`` that records its calls and
copies a jar where ``dependency:copy-dependencies`` would.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from kctl.testing import maven
from kctl.testing.kafka import KAFKA
from kctl.testing.zookeeper import MAVEN_RELEASES

ROOT = Path(__file__).resolve().parents[1]
COORDINATES = ("org.example:server:1.2.3", "org.example:logging:4.5")


@pytest.fixture
def mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in ``mvn``: logs its arguments and the pom's dependencies, writes one jar per one."""
    calls = tmp_path / "calls.log"
    script = tmp_path / "mvn"
    script.write_text(f"""#!/bin/sh
echo "$*" >> {calls}
[ -n "$FAIL" ] && {{ echo "[ERROR] Could not resolve dependencies"; exit 1; }}
for arg in "$@"; do case "$arg" in -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}";; esac; done
mkdir -p "$out"
grep -o '<dependency><groupId>[^<]*</groupId><artifactId>[^<]*</artifactId><version>[^<]*' pom.xml | \\
  sed 's/<[^>]*>/ /g' | while read -r group artifact version; do echo jar > "$out/$artifact-$version.jar"; done
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(maven.MVN_ENV, str(script))
    monkeypatch.setenv(maven.CACHE_ENV, str(tmp_path / "cache"))
    return calls


def test_a_fetch_is_kept_and_not_repeated(mvn: Path) -> None:
    directory = maven.fetch_jars(COORDINATES, maven.cached("server-1.2.3"))
    assert directory == Path(maven.cache_root()) / "server-1.2.3"
    assert sorted(p.name for p in directory.glob("*.jar")) == ["logging-4.5.jar", "server-1.2.3.jar"]
    assert maven.fetched(directory, COORDINATES) and maven.classpath(directory) == f"{directory}/*"
    calls = mvn.read_text().splitlines()
    assert len(calls) == 1 and "copy-dependencies -DincludeScope=runtime" in calls[0]
    maven.fetch_jars(COORDINATES, directory)
    assert len(mvn.read_text().splitlines()) == 1  # cached: Maven is not run again
    maven.fetch_jars(COORDINATES[:1], directory)  # other coordinates: fetched again, replacing the old jars
    assert sorted(p.name for p in directory.glob("*.jar")) == ["server-1.2.3.jar"]
    assert len(mvn.read_text().splitlines()) == 2


def test_a_failed_fetch_leaves_nothing_behind(mvn: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIL", "1")
    directory = maven.cached("server-1.2.3")
    with pytest.raises(maven.FetchError, match=r"Maven could not fetch org.example:server:1.2.3.*\(exit 1\):\n"
                                               r".*Could not resolve dependencies"):
        maven.fetch_jars(COORDINATES, directory)
    assert not directory.exists() and list(directory.parent.iterdir()) == [directory.parent / ".server-1.2.3.lock"]


def test_refusals(mvn: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(maven.FetchError, match="GROUP:ARTIFACT:VERSION"):
        maven.fetch_jars(["org.example:server"], maven.cached("x"))
    assert maven.main(["only-a-name"]) == 2
    monkeypatch.setenv(maven.MVN_ENV, "/nonexistent/mvn")
    assert maven.main(["x", "org.example:server:1"]) == 1
    assert "no mvn on PATH; install: apt-get" in capsys.readouterr().err


def test_a_known_program_is_fetched_by_its_name_alone(mvn: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert maven.main([KAFKA]) == 0
    directory = maven.cached(KAFKA)
    assert capsys.readouterr().out.strip() == str(directory) and maven.fetched(directory, maven.PROGRAMS[KAFKA])
    assert sorted(p.name for p in directory.glob("*.jar")) == [
        "kafka_2.13-3.9.1.jar", "reload4j-1.2.25.jar", "slf4j-reload4j-1.7.36.jar"]
    assert maven.main(["kafka-0.0.0"]) == 2  # not a known program, and no coordinates


def test_scripts_test_fetches_kafka_through_fetch_jars() -> None:
    """``scripts/test`` runs ``scripts/fetch-jars --kafka``, which names the release the fixtures run."""
    assert "./scripts/fetch-jars --kafka" in (ROOT / "scripts" / "test").read_text()
    fetcher = (ROOT / "scripts" / "fetch-jars").read_text()
    assert f"set -- {KAFKA}" in fetcher and KAFKA in maven.PROGRAMS


def test_scripts_test_fetches_the_releases_the_fixtures_use() -> None:
    """``scripts/test`` fetches exactly ``MAVEN_RELEASES``, through ``scripts/fetch-jars``."""
    script = (ROOT / "scripts" / "test").read_text()
    assert "from kctl.testing.zookeeper import MAVEN_RELEASES" in script and "./scripts/fetch-jars" in script
    fetcher = (ROOT / "scripts" / "fetch-jars").read_text()
    assert re.search(r"apt-get install .*maven", fetcher) and "kctl/testing/maven.py" in fetcher
    for name, coordinates in MAVEN_RELEASES.values():
        assert all(re.fullmatch(r"[\w.-]+:[\w.-]+:[\w.+-]+", c) for c in coordinates) and name.startswith("zookeeper-")
