"""kctl's wire codec against hostile bytes: every input decodes to a bounded message or is one
``WireError``, and the nested extension values of issue 11 (defect 1) no longer kill the process."""

from __future__ import annotations

from typing import Any

import msgpack  # type: ignore[import-untyped]
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kctl import wire
from kctl.limits import check_depth

from tests.support.hostile_inputs import (
    fuzz,
    msgpack_values,
    mutated,
    nested_arrays,
    nested_extensions,
    valid_frames,
)


def decodes_cleanly(data: bytes) -> Any:
    """The decoded message (None after a WireError): nothing else may come out, and what comes
    out is no deeper than the limits allow."""
    try:
        message = wire.decode(data)
    except wire.WireError as exc:
        assert str(exc)
        return None
    # At most the extension depth times the container depth of each payload, and then some.
    check_depth(message, (wire.MAX_EXTENSION_DEPTH + 1) * wire.MAX_CONTAINER_DEPTH, (tuple, dict))
    return message


@pytest.mark.parametrize("code", [1, 2, 3, 4, 99])
def test_extension_depth_is_bounded_for_every_code(code: int) -> None:
    too_deep = nested_extensions(wire.MAX_EXTENSION_DEPTH + 1, code)
    with pytest.raises(wire.WireError, match="nested more than"):
        wire.decode(too_deep)
    with pytest.raises(wire.WireError, match="nested more than"):
        wire.decode(nested_extensions(10_000, code))


def test_container_depth_is_bounded_inside_and_outside_extensions() -> None:
    deepest: Any = None
    for _ in range(wire.MAX_CONTAINER_DEPTH):
        deepest = (deepest,)
    assert wire.decode(nested_arrays(wire.MAX_CONTAINER_DEPTH)) == deepest
    with pytest.raises(wire.WireError, match="nested more than"):
        wire.decode(nested_arrays(wire.MAX_CONTAINER_DEPTH + 1))
    with pytest.raises(wire.WireError):
        wire.decode(nested_arrays(100_000))  # deeper than msgpack's own stack too
    inside = msgpack.packb(msgpack.ExtType(2, nested_arrays(wire.MAX_CONTAINER_DEPTH + 1)))
    with pytest.raises(wire.WireError, match="nested more than"):
        wire.decode(inside)
    under_a_key = msgpack.packb({msgpack.ExtType(2, msgpack.packb(["t", 0])): list(deepest)})
    with pytest.raises(wire.WireError, match="nested more than"):
        wire.decode(under_a_key)  # the map adds a level to the deepest nesting allowed
    assert wire.decode(msgpack.packb({deepest[0]: 1})) == {deepest[0]: 1}  # a key as deep as allowed


def test_lengths_are_bounded() -> None:
    too_long = msgpack.packb("x" * (wire.MAX_STRING_BYTES + 1))
    with pytest.raises(wire.WireError):
        wire.decode(too_long)
    announced = b"\xdd\xff\xff\xff\xff"  # an array of 2**32 - 1 items in 5 bytes
    with pytest.raises(wire.WireError):
        wire.decode(announced)
    with pytest.raises(wire.WireError):
        wire.decode(b"\xdb\x7f\xff\xff\xff")  # a 2 GiB string announced
    with pytest.raises(wire.WireError, match="frame announces"):
        wire.split_frames(wire.FRAME_HEADER.pack(wire.MAX_FRAME_BYTES + 1) + b"x")


def test_the_deepest_messages_kctl_sends_still_decode() -> None:
    for body in valid_frames():
        assert wire.encode(wire.decode(body)) == body


@fuzz(400)
@given(st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    decodes_cleanly(data)


@fuzz(400)
@given(msgpack_values)
def test_any_msgpack_value(value: Any) -> None:
    decodes_cleanly(msgpack.packb(value, use_bin_type=True))


@fuzz(400)
@given(mutated(valid_frames()))
def test_mutated_frames(data: bytes) -> None:
    decodes_cleanly(data)


@fuzz(200)
@given(st.lists(st.binary(max_size=40) | mutated(valid_frames()), max_size=4), st.binary(max_size=6))
def test_split_frames_of_hostile_frames(bodies: list[bytes], tail: bytes) -> None:
    stream = b"".join(wire.FRAME_HEADER.pack(len(body)) + body for body in bodies) + tail
    try:
        messages, rest = wire.split_frames(stream)
    except wire.WireError:
        return
    assert len(messages) >= len(bodies) and stream.endswith(rest)


@fuzz(300)
@given(st.binary(max_size=200))
def test_split_frames_of_random_streams(stream: bytes) -> None:
    try:
        messages, rest = wire.split_frames(stream)
    except wire.WireError:
        return
    assert stream.endswith(rest)
