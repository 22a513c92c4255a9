"""The ``rust`` engine: the public engine-backed classes on top of ``kctl._engine.Engine``.

The native engine holds the context, the request batches and both state machines; these classes
convert at the boundary and route state-change log lines and requests as the reference does.

Importing this package hands the extension the Python classes it builds and recognises
(``kctl._engine.bind``), once: the extension imports no kctl module by its path.
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kctl import _engine, errors, messages, model

if TYPE_CHECKING:
    from kctl.stores.base import NativeStateTable, NativeZooKeeperCodec
    from kctl.stores.memory import MemoryStore
    from kctl.stores.zookeeper import ZooKeeperStore

    def _fast_paths(memory: MemoryStore, zookeeper: ZooKeeperStore) -> tuple[NativeStateTable, NativeZooKeeperCodec]:
        """mypy's check that the two stores offer the fast paths the engine takes for them."""
        return memory, zookeeper

_engine.bind(
    topic_partition=model.TopicPartition,
    leader_and_isr=model.LeaderAndIsr,
    leader_isr_and_controller_epoch=model.LeaderIsrAndControllerEpoch,
    leader_recovery_state=model.LeaderRecoveryState,
    leader_and_isr_partition_state=messages.LeaderAndIsrPartitionState,
    update_metadata_partition_state=messages.UpdateMetadataPartitionState,
    stop_replica_partition_state=messages.StopReplicaPartitionState,
    kafka_errors=errors.Errors,
    kctl_error=errors.KctlError,
    store_error=errors.StoreError,
    no_node_error=errors.NoNodeError,
    controller_moved_error=errors.ControllerMovedError,
    state_change_failed_error=errors.StateChangeFailedError,
    illegal_state_error=errors.IllegalStateError,
    illegal_argument_error=errors.IllegalArgumentError,
    plugin_error=errors.PluginError,
)
Mapping.register(_engine.PartitionErrors)  # a broker's answers per partition, read as any mapping
