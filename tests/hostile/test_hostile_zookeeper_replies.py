"""The ZooKeeper store's own decoder of multiRead replies (kazoo has none) against hostile replies:
a length or count the reply cannot hold is an error, so a reply cannot make it loop or allocate
beyond its size. (The native decoder of the same replies has its tests in ``rust/src/zkwire.rs``.)"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kctl.stores.zkclient import _GET_CHILDREN, _GET_DATA, _MULTI_END, _MULTI_HEADER, _MultiRead, kazoo_modules

from tests.support.hostile_inputs import fuzz

READS = [(_GET_DATA, "/a"), (_GET_CHILDREN, "/b")]
STAT = bytes(68)


def decode(reply: bytes) -> list[object]:
    return _MultiRead(READS, kazoo_modules()).deserialize(reply, 0)


def test_well_formed_reply() -> None:
    reply = (
        _MULTI_HEADER.pack(_GET_DATA, False, 0) + struct.pack("!i", 2) + b"{}" + STAT
        + _MULTI_HEADER.pack(_GET_CHILDREN, False, 0) + struct.pack("!ii", 1, 1) + b"c"
        + _MULTI_END
    )
    data, children = decode(reply)
    assert data[0] == b"{}" and children == ["c"]


@pytest.mark.parametrize("reply", [
    # a thousand children announced, each with the length -4: the offset never moved on
    _MULTI_HEADER.pack(_GET_CHILDREN, False, 0) + struct.pack("!ii", 1000, -4) + _MULTI_END,
    # 2 GiB of data announced in a reply of a few bytes
    _MULTI_HEADER.pack(_GET_DATA, False, 0) + struct.pack("!i", 2**31 - 1) + STAT + _MULTI_END,
    # a negative length other than -1 (null)
    _MULTI_HEADER.pack(_GET_DATA, False, 0) + struct.pack("!i", -5) + STAT + _MULTI_END,
], ids=["negative_child_lengths", "huge_data", "negative_data_length"])
def test_lengths_the_reply_cannot_hold_are_errors(reply: bytes) -> None:
    with pytest.raises(ValueError, match="multiRead reply announces"):
        decode(reply)


@fuzz(300)
@given(st.binary(max_size=200))
def test_random_replies_end(reply: bytes) -> None:
    try:
        results = decode(reply + _MULTI_END)
    except (ValueError, struct.error, RuntimeError):  # RuntimeError: kazoo's for an unknown error code
        return
    assert len(results) <= len(reply) // _MULTI_HEADER.size
