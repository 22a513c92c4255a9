"""The in-process transport: Kafka's channel-manager behaviour on a simulated (or real) clock."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from kctl.errors import Errors, IllegalStateError
from kctl.model import BrokerInfo, LeaderAndIsr, TopicPartition
from kctl.plugins import PluginHost
from kctl.requests import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kctl.messages import UpdateMetadataFanOut
from kctl.scheduler import RealTimeScheduler, SimulatedScheduler
from kctl.transports.base import answers_fan_outs, repeatable
from kctl.transports.inprocess import InProcessTransport


def request(n: int) -> StopReplicaRequest:
    """A distinguishable controller request (its controller epoch is ``n``)."""
    return StopReplicaRequest(3, 0, n, -1, False, ())


class Broker:
    """A broker handler that records what it handled and when."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self.handled: list[tuple[float, int]] = []

    def __call__(self, req: Any) -> StopReplicaResponse:
        self.handled.append((round(self.scheduler.now(), 6), req.controller_epoch))
        return StopReplicaResponse()


@pytest.fixture
def scheduler() -> SimulatedScheduler:
    return SimulatedScheduler()


@pytest.fixture
def transport(scheduler: SimulatedScheduler) -> InProcessTransport:
    return InProcessTransport(scheduler, latency=0.001)


def collect(scheduler: SimulatedScheduler, out: list[tuple[float, Any]], tag: Any = None) -> Any:
    return lambda response: out.append((round(scheduler.now(), 6), tag if tag is not None else response))


def test_registered_as_the_inprocess_transport_plugin(plugin_host: PluginHost) -> None:
    entry = plugin_host.transports().get("inprocess")
    assert entry.plugin == "kctl.transports.inprocess"
    built = entry.factory(scheduler=SimulatedScheduler(), latency=0.5)
    assert isinstance(built, InProcessTransport) and built.latency == 0.5


def test_a_broker_gets_its_requests_in_order_one_in_flight(scheduler: SimulatedScheduler,
                                                            transport: InProcessTransport) -> None:
    broker = Broker(scheduler)
    transport.bind_broker(1, broker)
    channel = transport.controller_channel(0)
    channel.add_broker(BrokerInfo(1))
    responses: list[tuple[float, Any]] = []
    for n in (1, 2, 3):
        channel.send_request(1, request(n), collect(scheduler, responses, n))
    assert channel.queued(1) == 3
    scheduler.advance(1)
    # Each request leaves only when the previous response is back: request, response, request, …
    assert broker.handled == [(0.001, 1), (0.003, 2), (0.005, 3)]
    assert responses == [(0.002, 1), (0.004, 2), (0.006, 3)]
    assert channel.queued(1) == 0


def test_brokers_have_independent_queues(scheduler: SimulatedScheduler, transport: InProcessTransport) -> None:
    brokers = {b: Broker(scheduler) for b in (1, 2)}
    channel = transport.controller_channel(0)
    for b, handler in brokers.items():
        transport.bind_broker(b, handler)
        channel.add_broker(BrokerInfo(b))
    channel.send_request(1, request(1), None)
    channel.send_request(1, request(2), None)
    channel.send_request(2, request(3), None)
    scheduler.advance(1)
    assert brokers[1].handled == [(0.001, 1), (0.003, 2)]
    assert brokers[2].handled == [(0.001, 3)]
    assert channel.brokers() == [1, 2]


def test_a_request_is_retried_every_100ms_while_the_broker_is_down(
    scheduler: SimulatedScheduler, transport: InProcessTransport
) -> None:
    broker = Broker(scheduler)
    channel = transport.controller_channel(0)
    channel.add_broker(BrokerInfo(1))
    responses: list[tuple[float, Any]] = []
    channel.send_request(1, request(1), collect(scheduler, responses, 1))
    channel.send_request(1, request(2), collect(scheduler, responses, 2))
    scheduler.advance(0.25)
    assert responses == [] and channel.queued(1) == 2
    transport.bind_broker(1, broker)  # the broker process comes up
    scheduler.advance(1)
    # Attempts at 0.001, 0.101, 0.201 found nobody; 0.301 delivers; the next follows the response.
    assert broker.handled == [(0.301, 1), (0.303, 2)]
    assert responses == [(0.302, 1), (0.304, 2)]


def test_removing_a_broker_discards_its_queue(scheduler: SimulatedScheduler, transport: InProcessTransport) -> None:
    broker = Broker(scheduler)
    channel = transport.controller_channel(0)
    channel.add_broker(BrokerInfo(1))
    responses: list[tuple[float, Any]] = []
    channel.send_request(1, request(1), collect(scheduler, responses))
    channel.send_request(1, request(2), collect(scheduler, responses))
    scheduler.advance(0.15)
    channel.remove_broker(1)
    transport.bind_broker(1, broker)
    scheduler.advance(1)
    assert broker.handled == [] and responses == [] and channel.queued(1) == 0
    # A bounced broker gets a fresh queue; only new requests reach it.
    channel.add_broker(BrokerInfo(1))
    channel.send_request(1, request(3), collect(scheduler, responses, 3))
    scheduler.advance(1)
    assert broker.handled == [(1.151, 3)] and responses == [(1.152, 3)]


def test_the_response_of_a_removed_broker_is_dropped(scheduler: SimulatedScheduler,
                                                     transport: InProcessTransport) -> None:
    broker = Broker(scheduler)
    transport.bind_broker(1, broker)
    channel = transport.controller_channel(0)
    channel.add_broker(BrokerInfo(1))
    responses: list[tuple[float, Any]] = []
    channel.send_request(1, request(1), collect(scheduler, responses))
    scheduler.run_until(0.0015)  # delivered, response on the way
    channel.remove_broker(1)
    scheduler.advance(1)
    assert broker.handled == [(0.001, 1)] and responses == []


def test_requests_to_a_broker_without_a_queue_are_dropped_with_a_warning(
    scheduler: SimulatedScheduler, transport: InProcessTransport, caplog: pytest.LogCaptureFixture
) -> None:
    broker = Broker(scheduler)
    transport.bind_broker(7, broker)
    channel = transport.controller_channel(0)
    with caplog.at_level(logging.WARNING, logger="kctl.transports.inprocess"):
        channel.send_request(7, request(1), None)
    scheduler.advance(1)
    assert broker.handled == []
    assert "dropping StopReplica request to broker 7, which has no queue" in caplog.text


def failing_once(scheduler: SimulatedScheduler, calls: list[float]) -> Callable[[Any], StopReplicaResponse]:
    """A broker's handler that records when it is called and fails the first call, as a broken
    connection does."""

    def handler(req: Any) -> StopReplicaResponse:
        calls.append(round(scheduler.now(), 6))
        if len(calls) == 1:
            raise RuntimeError("connection reset")
        return StopReplicaResponse()

    return handler


def test_a_handler_failure_is_retried_like_a_broken_connection(
    scheduler: SimulatedScheduler, transport: InProcessTransport, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[float] = []
    transport.bind_broker(1, failing_once(scheduler, calls))
    channel = transport.controller_channel(0)
    channel.add_broker(BrokerInfo(1))
    responses: list[tuple[float, Any]] = []
    with caplog.at_level(logging.ERROR, logger="kctl.transports.inprocess"):
        channel.send_request(1, request(1), collect(scheduler, responses, "ok"))
        scheduler.advance(1)
    assert calls == [0.001, 0.101] and responses == [(0.102, "ok")]
    assert "Broker 1 failed to handle StopReplica; retrying" in caplog.text


def test_channel_shutdown_and_transport_close_discard_everything(
    scheduler: SimulatedScheduler, transport: InProcessTransport
) -> None:
    broker = Broker(scheduler)
    channel = transport.controller_channel(0)
    channel.add_broker(BrokerInfo(1))
    channel.send_request(1, request(1), None)
    channel.shutdown()
    transport.bind_broker(1, broker)
    scheduler.advance(1)
    assert broker.handled == [] and channel.brokers() == []
    transport.close()
    assert not transport.is_broker_bound(1)


def test_binding_an_id_twice_is_an_error(transport: InProcessTransport) -> None:
    transport.bind_broker(1, lambda req: StopReplicaResponse())
    with pytest.raises(IllegalStateError, match="broker 1 is already bound"):
        transport.bind_broker(1, lambda req: StopReplicaResponse())
    transport.bind_controller(0, lambda req, respond: None)
    with pytest.raises(IllegalStateError, match="controller 0 is already bound"):
        transport.bind_controller(0, lambda req, respond: None)
    transport.unbind_broker(1)
    transport.bind_broker(1, lambda req: StopReplicaResponse())  # a restarted broker binds again


@pytest.mark.parametrize(
    ("req", "response_type"),
    [
        (ControlledShutdownRequest(1, 5), ControlledShutdownResponse),
        (AlterPartitionRequest(1, 5, {TopicPartition("t", 0): LeaderAndIsr(1, (1,))}), AlterPartitionResponse),
    ],
    ids=["controlled_shutdown", "alter_partition"],
)
def test_a_broker_request_without_a_controller_gets_not_controller(
    scheduler: SimulatedScheduler, transport: InProcessTransport, req: Any, response_type: type
) -> None:
    responses: list[tuple[float, Any]] = []
    transport.send_to_controller(3, req, collect(scheduler, responses))
    transport.send_to_controller(-1, req, collect(scheduler, responses))
    scheduler.advance(1)
    assert responses == [(0.002, response_type(Errors.NOT_CONTROLLER))] * 2


def test_a_broker_request_reaches_the_bound_controller(scheduler: SimulatedScheduler,
                                                        transport: InProcessTransport) -> None:
    received: list[tuple[float, Any]] = []

    def controller(req: Any, respond: Any) -> None:
        received.append((round(scheduler.now(), 6), req))
        # The controller answers when its event has been processed, here half a second later.
        scheduler.schedule(0.5, lambda: respond(ControlledShutdownResponse(remaining_partitions=(TopicPartition("t", 0),))))

    transport.bind_controller(3, controller)
    responses: list[tuple[float, Any]] = []
    transport.send_to_controller(3, ControlledShutdownRequest(1, 5), collect(scheduler, responses))
    scheduler.advance(1)
    assert received == [(0.001, ControlledShutdownRequest(1, 5))]
    assert responses == [(0.502, ControlledShutdownResponse(remaining_partitions=(TopicPartition("t", 0),)))]
    transport.unbind_controller(3)
    transport.send_to_controller(3, ControlledShutdownRequest(1, 5), collect(scheduler, responses))
    scheduler.advance(1)
    assert responses[-1] == (1.002, ControlledShutdownResponse(Errors.NOT_CONTROLLER))


def test_threads_sending_concurrently_on_a_real_clock() -> None:
    """The controller's thread sends while the scheduler's thread delivers: nothing is lost or
    reordered per broker."""
    scheduler = RealTimeScheduler(seed=1)
    try:
        transport = InProcessTransport(scheduler, latency=0.0001, retry_backoff=0.001)
        brokers = {b: Broker(scheduler) for b in range(4)}
        channel = transport.controller_channel(0)
        for b, handler in brokers.items():
            transport.bind_broker(b, handler)
            channel.add_broker(BrokerInfo(b))
        done = threading.Semaphore(0)

        def sender(b: int) -> None:
            for n in range(50):
                channel.send_request(b, request(n), lambda response: done.release())

        threads = [threading.Thread(target=sender, args=(b,)) for b in brokers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(done.acquire(timeout=10) for _ in range(200))
        for handler in brokers.values():
            assert [n for _, n in handler.handled] == list(range(50))
    finally:
        scheduler.shutdown()


def fan_out(bulk: bool) -> tuple[list[tuple[int, float, int]], list[tuple[float, Any]]]:
    """Two fan-outs to brokers 1–3 and one to broker 9, which has no queue; what the brokers
    handled (broker, time, request) and the responses, with ``send_requests`` or one by one."""
    scheduler = SimulatedScheduler()
    transport = InProcessTransport(scheduler, latency=0.001)
    handled: list[tuple[int, float, int]] = []
    for broker_id in (1, 2, 3):
        def handle(req: Any, broker_id: int = broker_id) -> StopReplicaResponse:
            handled.append((broker_id, round(scheduler.now(), 6), req.controller_epoch))
            return StopReplicaResponse()
        transport.bind_broker(broker_id, handle)
    channel = transport.controller_channel(0)
    for broker_id in (1, 2, 3):
        channel.add_broker(BrokerInfo(broker_id))
    responses: list[tuple[float, Any]] = []
    for n in (1, 2):
        outgoing = [(b, request(10 * n + b), collect(scheduler, responses, 10 * n + b)) for b in (1, 9, 2, 3)]
        if bulk:
            channel.send_requests(outgoing)
        else:
            for broker_id, req, callback in outgoing:
                channel.send_request(broker_id, req, callback)
    scheduler.advance(1)
    return handled, responses


def test_a_fan_out_sent_in_one_call_is_delivered_as_one_by_one() -> None:
    handled, responses = fan_out(bulk=True)

    assert (handled, responses) == fan_out(bulk=False)
    assert handled[:3] == [(1, 0.001, 11), (2, 0.001, 12), (3, 0.001, 13)]
    assert len(handled) == len(responses) == 6  # broker 9's requests are dropped


def test_each_message_of_a_batch_is_handled_as_if_alone(scheduler: SimulatedScheduler,
                                                         transport: InProcessTransport) -> None:
    """The deliveries and responses due at one instant are one call, message by message: a broker
    that is down or fails is retried without holding up the others, and a response callback that
    removes a later broker's queue drops that broker's response, as separate callbacks did."""
    brokers = {b: Broker(scheduler) for b in (1, 3, 4)}
    failed: list[float] = []
    channel = transport.controller_channel(0)
    for b, handler in [*brokers.items(), (2, failing_once(scheduler, failed))]:
        transport.bind_broker(b, handler)
    for b in (1, 2, 3, 4, 5):  # broker 5 is down
        channel.add_broker(BrokerInfo(b))
    responses: list[tuple[float, Any]] = []

    def first(response: Any) -> None:
        responses.append((round(scheduler.now(), 6), 1))
        channel.remove_broker(3)

    channel.send_requests([(1, request(1), first), *((b, request(b), collect(scheduler, responses, b)) for b in (2, 3, 4, 5))])
    scheduler.advance(0.15)

    assert [h for b in (1, 3, 4) for h in brokers[b].handled] == [(0.001, 1), (0.001, 3), (0.001, 4)]
    assert failed == [0.001, 0.101] and channel.queued(5) == 1
    assert responses == [(0.002, 1), (0.002, 4), (0.102, 2)]  # broker 3's response went with its queue


def test_a_fan_out_reaches_each_broker_as_its_request_or_as_it_is_to_a_handler_that_takes_it(
    scheduler: SimulatedScheduler, transport: InProcessTransport
) -> None:
    """An UpdateMetadata fan-out is handed over as one object for every broker: a plain handler
    gets the request built for its broker (its own broker epoch), a handler marked with
    ``answers_fan_outs`` the fan-out itself, and a broker without a queue drops its request."""
    got: dict[int, Any] = {}

    def plain(broker_id: int) -> Callable[[Any], UpdateMetadataResponse]:
        def handle(req: Any) -> UpdateMetadataResponse:
            got[broker_id] = req
            return UpdateMetadataResponse()
        return handle

    @answers_fan_outs
    def taking(req: Any) -> UpdateMetadataResponse:
        got[3] = req
        return UpdateMetadataResponse()

    for b, handler in [(1, plain(1)), (2, plain(2)), (3, taking)]:
        transport.bind_broker(b, handler)
    channel = transport.controller_channel(0)
    for b in (1, 2, 3):
        channel.add_broker(BrokerInfo(b))
    fan_out = UpdateMetadataFanOut(7, 0, 4, (), (), {}, {1: 11, 2: 12, 3: 13, 9: 19})
    responses: list[tuple[float, Any]] = []
    channel.send_requests([(b, fan_out, collect(scheduler, responses, b)) for b in (1, 9, 2, 3)])
    scheduler.advance(0.01)

    assert got[1] == UpdateMetadataRequest(7, 0, 4, 11, (), (), {}) and got[2].broker_epoch == 12
    assert got[1] is fan_out.request(1) and type(got[2]) is UpdateMetadataRequest
    assert got[3] is fan_out and fan_out.request(4).broker_epoch == -1  # not a live broker's
    assert responses == [(0.002, 1), (0.002, 2), (0.002, 3)]


@pytest.mark.parametrize("counted", [True, False])
def test_answers_whose_callbacks_repeat_one_another_are_handed_over_in_one_call(
    scheduler: SimulatedScheduler, transport: InProcessTransport, counted: bool
) -> None:
    """Consecutive answers with one response object whose callbacks share a ``repeat`` are one
    call of it (the first answering broker named), once the queues of removed brokers are left
    out; a ``repeat`` that declines leaves each callback called in turn. Either way the brokers'
    next requests go out after it, as one by one."""
    calls: list[tuple[float, Any]] = []
    response = UpdateMetadataResponse()

    def repeat(broker: int, answer: Any, times: int) -> bool:
        calls.append((round(scheduler.now(), 6), ("repeat", broker, answer is response, times)))
        return counted

    def callback(broker: int) -> Callable[[Any], None]:
        return repeatable(lambda answer: calls.append((round(scheduler.now(), 6), ("each", broker))), repeat)

    handled: list[tuple[int, float]] = []
    for b in (1, 2, 3, 4):
        def handle(req: Any, b: int = b) -> UpdateMetadataResponse:
            handled.append((b, round(scheduler.now(), 6)))
            return response
        transport.bind_broker(b, handle)
    channel = transport.controller_channel(0)
    for b in (1, 2, 3, 4):
        channel.add_broker(BrokerInfo(b))
    for _ in range(2):  # two fan-outs: the second waits for the first's answers
        channel.send_requests([(b, request(b), callback(b)) for b in (1, 2, 3, 4)])
    scheduler.schedule(0.0015, lambda: channel.remove_broker(2))  # its answer is on the way
    scheduler.advance(0.01)

    first = [(0.002, ("repeat", 1, True, 3))]
    each = [(0.002, ("each", b)) for b in (1, 3, 4)]
    expected = first if counted else first + each
    assert calls[:len(expected)] == expected
    assert [h for h in handled if h[1] == 0.003] == [(1, 0.003), (3, 0.003), (4, 0.003)]
    assert calls[len(calls) // 2] == (0.004, ("repeat", 1, True, 3)) and channel.idle()
