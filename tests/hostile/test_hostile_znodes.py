"""Every znode codec of ``kctl.stores.zkdata`` against hostile data: random bytes, any JSON, valid
documents with a value replaced or bytes mutated, deep nesting and oversized data. Only
``CorruptDataError``, naming the znode's path, may come out."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kctl.errors import CorruptDataError
from kctl.stores import zkdata

from tests.support.hostile_inputs import deep_json, fuzz, hostile_json, mutated, valid_json_documents, with_a_replaced_value

PATH = "/hostile/znode"

DECODERS: dict[str, Callable[[bytes | None], object]] = {
    "controller": lambda d: zkdata.ControllerZNode.decode(d, PATH),
    "controller_epoch": lambda d: zkdata.ControllerEpochZNode.decode(d, PATH),
    "broker": lambda d: zkdata.BrokerIdZNode.decode(d, PATH, 1),
    "topic": lambda d: zkdata.TopicZNode.decode(d, PATH),
    "partition_state": lambda d: zkdata.TopicPartitionStateZNode.decode(d, PATH, 3),
    "reassign_partitions": lambda d: zkdata.ReassignPartitionsZNode.decode(d, PATH),
    "preferred_replica_election": lambda d: zkdata.PreferredReplicaElectionZNode.decode(d, PATH),
    "isr_change": lambda d: zkdata.IsrChangeNotificationSequenceZNode.decode(d, PATH),
    "log_dir_event": lambda d: zkdata.LogDirEventNotificationSequenceZNode.decode(d, PATH),
    "config": lambda d: zkdata.ConfigEntityZNode.decode(d, PATH),
    "config_change": lambda d: zkdata.ConfigEntityChangeNotificationSequenceZNode.decode(d, PATH),
    "cluster_id": lambda d: zkdata.ClusterIdZNode.decode(d, PATH),
    "feature": lambda d: zkdata.FeatureZNode.decode(d, PATH),
    "producer_id_block": lambda d: zkdata.ProducerIdBlockZNode.decode(d, PATH),
}


def decodes_cleanly(decode: Callable[[bytes | None], object], data: bytes | None) -> None:
    try:
        decode(data)
    except CorruptDataError as exc:
        assert exc.path == PATH and str(exc).startswith(f"{PATH}: field '")


def test_every_decoder_of_the_module_is_fuzzed() -> None:
    decoded = {name for name in zkdata.__all__ if hasattr(getattr(zkdata, name), "decode")}
    assert len(decoded) == len(DECODERS)


@pytest.mark.parametrize("decode", DECODERS.values(), ids=DECODERS.keys())
def test_deep_oversized_and_non_utf8_data_is_corrupt(decode: Callable[[bytes | None], object]) -> None:
    for data in (
        deep_json(100_000),
        b'{"version":1,"partitions":' + deep_json(990) + b"}",
        b'{"version":1,"partitions":[],"x":"' + b"y" * zkdata.MAX_ZNODE_BYTES + b'"}',
        b'{"version":1,"brokerid":1,"id":"\xff"}',
        b'{"version":1,"brokerid":1' + b"1" * 5000 + b"}",
    ):
        with pytest.raises(CorruptDataError, match=f"^{PATH}: field '"):
            decode(data)


def test_numbers_in_strings_too_long_to_convert_are_corrupt() -> None:
    for decode, data in (
        (DECODERS["controller_epoch"], b"9" * 5000),
        (DECODERS["producer_id_block"], b'{"version":1,"broker":0,"block_start":"' + b"9" * 5000 + b'","block_end":"1"}'),
        (DECODERS["topic"], b'{"version":3,"partitions":{"' + b"9" * 5000 + b'":[1]}}'),
        (DECODERS["topic"], '{"version":3,"partitions":{"²":[1]}}'.encode()),
        (DECODERS["broker"], b'{"version":4,"endpoints":["PLAINTEXT://h:' + b"9" * 5000 + b'"]}'),
    ):
        with pytest.raises(CorruptDataError):
            decode(data)


@pytest.mark.parametrize("decode", DECODERS.values(), ids=DECODERS.keys())
@fuzz(60)
@given(data=hostile_json | st.none())
def test_hostile_bytes(decode: Callable[[bytes | None], object], data: bytes | None) -> None:
    decodes_cleanly(decode, data)


@pytest.mark.parametrize("decode", DECODERS.values(), ids=DECODERS.keys())
@fuzz(60)
@given(data=with_a_replaced_value(valid_json_documents()) | mutated(valid_json_documents()))
def test_mutated_documents(decode: Callable[[bytes | None], object], data: bytes) -> None:
    decodes_cleanly(decode, data)
