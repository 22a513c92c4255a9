"""What a transport provides (registered through ``kctl_register_transports``).

A transport connects three kinds of endpoint: the controller's channel to every broker (Kafka's
ControllerChannelManager: one FIFO queue per broker, a request retried until it is delivered or the
broker is removed), brokers receiving controller requests, and controllers receiving broker requests
(ControlledShutdown, AlterPartition). Handlers run on the transport's delivery thread or scheduler
step; they must not block.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

from kctl.errors import Errors
from kctl.model import BrokerInfo
from kctl.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerToControllerRequest,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ControllerRequest,
    ControllerResponse,
)

logger = logging.getLogger(__name__)

BrokerHandler = Callable[[ControllerRequest], ControllerResponse]
"""A broker's answer to a controller request (computed synchronously)."""

ControllerHandler = Callable[[BrokerToControllerRequest, Callable[[Any], None]], None]
"""A controller takes a broker request and calls back with the response when it has one."""

H = TypeVar("H", bound=Callable[..., Any])


def answers_fan_outs(handler: H) -> H:
    """Mark a broker handler that takes an :class:`~kctl.messages.UpdateMetadataFanOut` as its
    broker's UpdateMetadata request (``fan_out.request(broker_id)``, which it builds only if it
    needs it): a transport that hands fan-outs over hands any other handler the built request."""
    setattr(handler, _ANSWERS_FAN_OUTS, True)
    return handler


def takes_fan_outs(handler: BrokerHandler) -> bool:
    """Whether ``handler`` was marked with :func:`answers_fan_outs` (a method: its function was)."""
    return getattr(handler, _ANSWERS_FAN_OUTS, False) is True


_ANSWERS_FAN_OUTS = "kctl_answers_fan_outs"

C = TypeVar("C", bound=Callable[[Any], None])

Repeat = Callable[[int, Any, int], bool]
"""``repeat(broker, response, times)``: see :func:`repeatable`."""


def repeatable(callback: C, repeat: Repeat) -> C:
    """Mark a response callback as one of those sharing ``repeat``: ``repeat(broker, response,
    times)`` stands for ``times`` calls of such callbacks, in a row, with ``response``, the first
    for ``broker``'s answer, and returns False when it cannot (the callbacks are then called one
    by one). A channel may make that one call for consecutive answers so marked (a fan-out's
    UpdateMetadata answers, counted at once), handing them over before it sends the brokers'
    next requests: marked callbacks must leave the channel alone."""
    setattr(callback, REPEAT, repeat)
    return callback


REPEAT = "kctl_repeat"
"""The attribute :func:`repeatable` sets (a channel reads it with ``getattr(callback, REPEAT, None)``)."""


def error_response(
    request: BrokerToControllerRequest, error: Errors
) -> ControlledShutdownResponse | AlterPartitionResponse | AllocateProducerIdsResponse:
    """The answer to a broker request that reached no controller (``NOT_CONTROLLER`` …)."""
    if isinstance(request, ControlledShutdownRequest):
        return ControlledShutdownResponse(error)
    if isinstance(request, AlterPartitionRequest):
        return AlterPartitionResponse(error)
    if isinstance(request, AllocateProducerIdsRequest):
        return AllocateProducerIdsResponse(error)
    raise TypeError(f"not a broker-to-controller request: {request!r}")


def deliver_response(callback: Callable[[Any], None], response: Any, controller_id: int) -> None:
    """Hand a broker's response to the controller's callback; a failing callback is logged, never
    allowed to stop the channel's sender."""
    try:
        callback(response)
    except Exception:
        logger.exception("Controller %d: response callback failed", controller_id)


class ControllerChannel(Protocol):
    """The controller side: a queue per registered broker."""

    def add_broker(self, broker: BrokerInfo) -> None: ...

    def remove_broker(self, broker_id: int) -> None:
        """Drop the broker's queue; requests still queued for it are discarded."""

    def send_request(self, broker_id: int, request: ControllerRequest, callback: Callable[[Any], None] | None) -> None:
        """Queue a request; requests to a broker without a queue are dropped with a warning."""

    def shutdown(self) -> None: ...


@runtime_checkable
class AdvertisedController(Protocol):
    """A transport whose brokers find their controller as a broker entry (the ``kafka`` transport:
    Kafka's brokers look the controller id up among live brokers); the controller registers the
    entry while it is active and deletes it when it resigns."""

    def controller_registration(self, controller_id: int) -> BrokerInfo | None:
        """The entry (controller-only, :attr:`~kctl.model.BrokerInfo.controller_only`), or None
        when the controller is not reachable yet."""


class Transport(Protocol):
    def controller_channel(self, controller_id: int) -> ControllerChannel: ...

    def bind_broker(self, broker_id: int, handler: BrokerHandler) -> None:
        """Start accepting controller requests for ``broker_id`` (the broker process is up)."""

    def unbind_broker(self, broker_id: int) -> None: ...

    def bind_controller(self, controller_id: int, handler: ControllerHandler) -> None: ...

    def unbind_controller(self, controller_id: int) -> None: ...

    def send_to_controller(
        self, controller_id: int, request: BrokerToControllerRequest, callback: Callable[[Any], None]
    ) -> None:
        """Deliver a broker request; the callback gets the response or a
        :class:`~kctl.errors.BrokerNotAvailableError` when no such controller is reachable."""

    def close(self) -> None: ...
