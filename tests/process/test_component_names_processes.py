"""``kctl controller`` with a misspelt leader selector refuses to start: it exits non-zero with the
registered names and a suggestion before it joins the election, so a standby configured right takes
the cluster; a selector registered by an installed plugin (kctl-least-loaded) is valid
(issue 12, item 2)."""

from __future__ import annotations

from kctl import admin
from kctl.model import TopicPartition

from tests.support.process_harness import ProcessCluster

EXIT_TIMEOUT = 60.0
"""Seconds a refused process gets to exit (a busy machine imports slowly)."""


def test_a_controller_with_a_misspelt_selector_exits_before_the_election(cluster: ProcessCluster) -> None:
    refused = cluster.start_controller(1, extra=["--config", "kctl.leader.selector.offline=least-lodaed"])
    code = refused.popen.wait(EXIT_TIMEOUT)
    log = refused.log()
    assert code == 1, log
    assert (
        "kctl: error: kctl.leader.selector.offline = 'least-lodaed': no leader selector is registered as "
        "'least-lodaed' (did you mean 'least-loaded'?); offline selectors: least-loaded, offline"
    ) in log
    assert "Traceback" not in log and "Controller 1 started" not in log
    assert cluster.active_controller() is None and cluster.controller_epoch() == 0  # never ran for election

    # The plugin's own name is valid: a controller configured with it wins and elects with it.
    good = cluster.start_controller(2, extra=["--config", "kctl.leader.selector.offline=least-loaded"])
    cluster.wait_until(lambda: cluster.active_controller() == 2, 60, "controller 2 to be active", watch=good)
    assert "leader selectors offline=least-loaded" in good.log()
    cluster.start_broker(1)
    cluster.start_broker(2)
    racks = {b: info.rack for b, (info, _) in cluster.admin.get_all_brokers().items()}
    admin.create_topic(cluster.admin, "t", broker_racks=racks, assignment={0: [1, 2]})
    cluster.wait_until(lambda: (s := cluster.state(TopicPartition("t", 0))) is not None and s.leader_and_isr.leader == 1,
                       60, "t-0 to be led by broker 1", watch=good)
    cluster.brokers[1].kill()
    cluster.wait_until(lambda: (s := cluster.state(TopicPartition("t", 0))) is not None and s.leader_and_isr.leader == 2,
                       60, "t-0 to fail over to broker 2", watch=good)


def test_a_process_with_a_misspelt_transport_exits_at_once(cluster: ProcessCluster) -> None:
    refused = cluster.start_broker(1, wait=False, extra=["--transport", "zkqeue"])
    code = refused.popen.wait(EXIT_TIMEOUT)
    log = refused.log()
    assert code == 1, log
    assert "kctl: error: unknown transport 'zkqeue' (did you mean 'zkqueue'?); registered: " in log
    assert 1 not in cluster.admin.get_all_brokers()
