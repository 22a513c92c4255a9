"""A controller process keeps Python's collector out of the way of large transitions."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from kctl.process import YOUNG_COLLECTION_THRESHOLD, keep_collector_aside


@pytest.fixture
def restored_collector() -> Iterator[None]:
    saved = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*saved)


@pytest.mark.usefixtures("restored_collector")
def test_what_exists_is_frozen_and_young_collections_are_rarer() -> None:
    survivor = [object()]
    _, older, oldest = gc.get_threshold()
    keep_collector_aside()
    assert gc.get_freeze_count() > 0
    assert all(found is not survivor for generation in range(3) for found in gc.get_objects(generation))
    assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, older, oldest)  # the older ones still collected
