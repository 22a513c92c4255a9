"""The fault suite: real ZooKeeper, ``kctl controller`` and ``kctl broker`` processes under faults.

Each scenario runs two controller candidates (91 and 92) and three brokers on a ZooKeeper server
of its own, injects its faults, and ends with :meth:`ChaosCluster.verify`: once the cluster is
quiet with every broker up, exactly one controller is active, every partition of a live topic is
led with a full ISR, every reassignment completed and every deletion finished, the admin tools'
describe agrees with the znodes, nothing was lost, and the invariants hold on the recorded history.

What the history (ZooKeeper's transaction log, the processes' logs) decides, invariant by invariant:

- I1, decided on every write: each epoch was registered once, by one controller (the multi that
  creates ``/controller`` and sets ``/controller_epoch``); every fenced write that committed came
  from a session of the controller of the epoch then current (sessions known from the
  registrations and the renewals the controllers log); every partition state carries the epoch
  current when it committed, was written under the fence, and no partition's controller epoch
  ever goes back. The processes' logs agree: no epoch claimed twice, and at the end one running
  controller considers itself active, in the registered epoch.
- I2, I4, decided on every stored version of every partition: leader epochs only grow and each
  leader change bumps it; no ISR is ever empty.
- I3, decided on every version: no leader comes from outside the previous ISR (unclean election
  is disabled, so none may). That the leader was *live* when elected is not decided: the log shows
  whether it was registered when the state was written, but a controller elects from its own view
  of the registrations, which legitimately lags ZooKeeper's (a broker can die the instant after
  the election read it), so an unregistered leader at the write is no violation by itself.
- I5, decided on every answer of every broker process (each logs its answers in wire form): no
  request from an older controller epoch than one it accepted is applied, nor a partition state
  whose leader epoch is not newer than the one it holds. What a broker was sent but never
  answered (it died first) is not in its log and is not judged.
- I6, decided: every reassignment the scenario asked for reached its target in the history and
  at the end, after the crash of the controller that started it.
- I7, decided at the end: every partition online with a full ISR, and each running broker's
  metadata cache — rebuilt from the UpdateMetadata requests it logged accepting, by the broker's
  own cache code — equal to the store.
- I8, decided for every record a client saw committed: a producer appends to every partition's
  leader throughout and keeps each acknowledged view of the leader's log (epoch history, log
  end, high watermark); at the end the leader's log must still hold every record below every
  high watermark seen (the common prefix of the two epoch histories reaches it). Records
  acknowledged but never seen committed promise nothing and are not judged.

A broker process keeps its simulated log in memory: kill -9 loses it, as a disk failure would,
so a restarted broker must catch up from the leader before it rejoins the ISR — which is what the
controller's and leaders' ISR handling must guarantee for I8 to hold.
"""

from __future__ import annotations

import signal
import time

from kctl.broker.fetcher import ProduceResponse
from kctl.errors import Errors
from kctl.model import TopicPartition
from kctl.requests import StopReplicaRequest
from kctl.stores.base import MATCH_ANY_VERSION

from tests.support.chaos_harness import SESSION_TIMEOUT, ChaosCluster, committed_records_lost

ORDERS = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
"""Three partitions, RF 3, one led by each broker."""
T = TopicPartition("orders", 0)


def test_controller_killed_in_the_middle_of_a_reassignment(chaos: ChaosCluster) -> None:
    chaos.start()
    chaos.create_topic("orders", ORDERS)
    chaos.create_topic("audit", {0: [1, 2], 1: [2, 3]})
    epoch = chaos.controller_epoch()
    # Broker 4 is not running: the controller writes the adding replicas (RS = ORS + TRS) and
    # waits for it, so the reassignment is caught half done.
    targets = {TopicPartition("orders", 0): [2, 3, 4], TopicPartition("orders", 1): [4, 3, 1],
               TopicPartition("audit", 1): [3, 1]}
    chaos.reassign(targets)
    chaos.wait_until(lambda: chaos.assignment("orders")[0].adding_replicas == (4,)
                     and chaos.assignment("orders")[1].adding_replicas == (4,), 60, "the adding replicas")
    killed = chaos.kill_active_controller()
    assert chaos.admin.get_partition_reassignments() is not None  # still in progress

    successor = chaos.wait_for_new_controller(epoch)
    assert successor != killed
    chaos.start_broker(4)
    chaos.verify()
    assert chaos.assignment("orders")[1].replicas == (4, 3, 1)


def test_controllers_killed_one_after_the_other_during_failover(chaos: ChaosCluster) -> None:
    """A cascade: kill -9 of the active controller in the middle of a reassignment, then of its
    successor as soon as ZooKeeper shows it registered (in practice before it is ready), then the
    first one comes back as a new process: it must take over in the epoch after both and finish
    the work."""
    chaos.start()
    chaos.create_topic("orders", ORDERS)
    epoch = chaos.controller_epoch()
    targets = {TopicPartition("orders", 1): [4, 3, 1], TopicPartition("orders", 2): [3, 2, 4]}
    chaos.reassign(targets)
    chaos.wait_until(lambda: chaos.assignment("orders")[1].adding_replicas == (4,), 60, "the adding replicas")
    first = chaos.kill_active_controller()
    second = chaos.wait_for_new_controller(epoch)
    chaos.controllers[second].kill()
    chaos.inject("kill -9 controller", f"controller {second} right after it registered, during its failover")
    chaos.start_controller(first)  # a new process
    assert chaos.wait_for_new_controller(epoch + 1) == first
    chaos.start_broker(4)
    chaos.verify()
    assert chaos.controller_epoch() == epoch + 2


def test_controller_killed_in_the_middle_of_a_topic_deletion(chaos: ChaosCluster) -> None:
    chaos.start()
    chaos.create_topic("orders", ORDERS)
    chaos.create_topic("doomed", ORDERS)
    epoch = chaos.controller_epoch()
    # With broker 3 down its replicas cannot be deleted: the deletion starts on brokers 1 and 2
    # and waits for broker 3.
    chaos.brokers[3].kill()
    chaos.inject("kill -9 broker", "broker 3, holding a replica of every partition of the doomed topic")
    chaos.delete_topic("doomed")

    def deleted_on(broker_id: int) -> bool:
        process = chaos.brokers[broker_id]
        return any(isinstance(a.request, StopReplicaRequest) and any(
            s.delete_partition and s.topic == "doomed" for s in a.request.partition_states)
            for a in chaos.read_answers(process))

    chaos.wait_until(lambda: deleted_on(1) and deleted_on(2), 60, "brokers 1 and 2 to delete their replicas")
    assert "doomed" in chaos.admin.get_all_topics()  # half done: broker 3 still holds its replicas
    chaos.kill_active_controller()

    chaos.wait_for_new_controller(epoch)
    chaos.restart_broker(3)
    chaos.verify()
    assert chaos.admin.get_all_topics() == {"orders"}


def test_controller_paused_past_its_session_timeout_is_fenced(chaos: ChaosCluster) -> None:
    """SIGSTOP of the active controller for three session timeouts: another takes over with the
    next epoch while the first is frozen with work queued on its connection (a reassignment
    request and a broker's death, both notified before its session expired); after SIGCONT the
    first must notice it lost /controller and resign, and nothing it writes with its old epoch may
    land — checked on every write of the history (I1), and here for its sessions in particular."""
    chaos.start()
    chaos.create_topic("orders", ORDERS)
    epoch = chaos.controller_epoch()
    paused, paused_id = chaos.pause_active_controller(f"for {3 * SESSION_TIMEOUT:g}s, past its session timeout")
    try:
        chaos.reassign({TopicPartition("orders", 0): [3, 2, 1]})
        chaos.brokers[1].kill()
        chaos.inject("kill -9 broker", "broker 1, while the controller is paused")
        successor = chaos.wait_for_new_controller(epoch)
        assert successor != paused_id
        chaos.wait_until(lambda: 1 not in chaos.leaders("orders").values(), 60, "broker 1's leaderships to move")
        time.sleep(SESSION_TIMEOUT)
    finally:
        paused.signal(signal.SIGCONT)
    chaos.wait_until(lambda: f"Resigned as the controller (broker {paused_id}, epoch {epoch})" in paused.log(), 60,
                     "the paused controller to resign", watch=paused)
    chaos.restart_broker(1)
    chaos.verify()

    history = chaos.history()
    takeover = next(r.zxid for r in history.registrations if r.epoch == epoch + 1)
    sessions = {r.session for r in history.registrations if r.controller_id == paused_id}
    sessions.update(*(log.sessions for log in chaos.controller_logs() if log.controller_id == paused_id))
    late = [w for w in history.fenced_writes if w.session in sessions and w.zxid > takeover]
    assert not late, f"the deposed controller's writes landed after the takeover: {late}"
    assert paused.running() and chaos.active_controller() == successor


def test_a_zombie_controllers_writes_are_refused_by_the_fence(chaos: ChaosCluster) -> None:
    """The zombie controller, deterministically: the active controller is frozen (SIGSTOP, well
    within its session timeout) with a reassignment request notified to it (onto broker 4, not
    running, so that it stays pending), then an operator forces a controller move
    (``delete /controller``) and the standby wins the next epoch. Thawed, the old controller
    processes the reassignment before it learns it was deposed: its writes carry the old epoch's
    fence and ZooKeeper must refuse every one (they are in the transaction log as refused multis,
    from its still-valid session); then it resigns."""
    chaos.start()
    chaos.create_topic("orders", ORDERS)
    epoch = chaos.controller_epoch()
    zombie, zombie_id = chaos.pause_active_controller("within its session timeout")
    try:
        chaos.reassign({TopicPartition("orders", 0): [2, 3, 4]})
        chaos.admin.delete_controller(MATCH_ANY_VERSION)  # as an operator does with zkCli: unfenced
        chaos.inject("controller moved", f"/controller deleted while {zombie.name} is frozen")
        successor = chaos.wait_for_new_controller(epoch)
    finally:
        zombie.signal(signal.SIGCONT)
    assert successor != zombie_id
    chaos.wait_until(lambda: f"Resigned as the controller (broker {zombie_id}, epoch {epoch})" in zombie.log(), 60,
                     "the zombie to resign", watch=zombie)
    chaos.start_broker(4)
    chaos.verify()

    history = chaos.history()
    sessions = {r.session for r in history.registrations if r.controller_id == zombie_id}
    assert not any(txn.session in sessions for txn in history.fenced_writes if txn.epoch > epoch)
    refused = [txn for txn in history.refused_fenced_writes if txn.session in sessions]
    assert refused, f"the zombie's writes never reached ZooKeeper:\n{zombie.log()[-3000:]}"
    assert "moved to another broker" in zombie.log()


def test_zookeeper_down_past_the_session_timeout(chaos: ChaosCluster) -> None:
    """The ZooKeeper server stops (SIGTERM) for three session timeouts and restarts on the same
    port and data; meanwhile a broker dies, which the controller learns only once ZooKeeper is
    back and expires its session."""
    chaos.start()
    chaos.create_topic("orders", ORDERS)
    chaos.stop_zookeeper()
    chaos.inject("zookeeper down", f"the server stopped for {3 * SESSION_TIMEOUT:g}s")
    chaos.brokers[3].kill()
    chaos.inject("kill -9 broker", "broker 3, while ZooKeeper is down")
    time.sleep(3 * SESSION_TIMEOUT)
    chaos.start_zookeeper()
    chaos.wait_until(lambda: 3 not in chaos.admin.get_all_brokers(), 60, "broker 3's session to expire")
    chaos.wait_until(lambda: 3 not in chaos.leaders("orders").values(), 60, "broker 3's leaderships to move")
    chaos.start_broker(3)
    chaos.verify()


def test_broker_flapping(chaos: ChaosCluster) -> None:
    """Broker 2 flaps six times in quick succession while a reassignment onto it runs: killed and
    restarted as soon as ZooKeeper drops its registration (a new process, its log empty), or
    frozen past its session timeout and thawed (the same process re-registers with a new broker
    epoch, keeping its state) — never waiting for the controller or the ISR in between."""
    chaos.start()
    chaos.create_topic("orders", ORDERS)
    chaos.create_topic("audit", {0: [1, 3], 1: [3, 1]})
    chaos.reassign({TopicPartition("audit", 0): [2, 3], TopicPartition("audit", 1): [3, 2]})
    for cycle in range(6):
        broker = chaos.brokers[2]
        if cycle % 2 == 0:
            broker.kill()
            chaos.inject("broker flap", f"kill -9 of broker 2 and a new process (cycle {cycle + 1})")
            chaos.restart_broker(2)
        else:
            epoch = chaos.admin.get_all_brokers()[2][1]
            broker.signal(signal.SIGSTOP)
            chaos.inject("broker flap", f"SIGSTOP of broker 2 past its session timeout, then SIGCONT (cycle {cycle + 1})")
            chaos.wait_until(lambda: 2 not in chaos.admin.get_all_brokers(), 60, "broker 2's session to expire")
            broker.signal(signal.SIGCONT)
            chaos.wait_until(lambda before=epoch: chaos.admin.get_all_brokers().get(2, (None, before))[1] > before, 60,
                             "broker 2 to re-register", watch=broker)
    chaos.verify()


def test_a_committed_record_missing_from_the_leaders_log_is_counted() -> None:
    """The I8 arithmetic of the verdict: records below a seen high watermark must be in the final
    log, matched by leader epoch, not only by offset."""
    seen = [ProduceResponse(T, Errors.NONE, 10, 8, ((0, 0),), 0), ProduceResponse(T, Errors.NONE, 12, 12, ((0, 0),), 0)]
    assert committed_records_lost(seen, ProduceResponse(T, Errors.NONE, 20, 20, ((0, 0), (1, 12)), 1)) == 0
    assert committed_records_lost(seen, ProduceResponse(T, Errors.NONE, 20, 20, ((0, 0), (1, 9)), 1)) == 3
    assert committed_records_lost(seen, ProduceResponse(T, Errors.NONE, 7, 7, ((0, 0),), 1)) == 5
    assert committed_records_lost([], ProduceResponse(T, Errors.NONE, 0, 0, (), 1)) == 0
