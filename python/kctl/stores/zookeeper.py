"""The ZooKeeper state store: Kafka's znode layout on a real ensemble.

:class:`ZooKeeperStore` is Kafka's semantics (:class:`~kctl.stores.kafkazk.KafkaZkClient`, the code
the memory store runs too) over a :class:`~kctl.stores.zkclient.ZooKeeperClient` (kazoo: the
session, pipelined multis and multiReads, ACLs, watch re-arming), with Kafka's JSON
(:mod:`kctl.stores.zkdata`). What it adds to the shared semantics:

- partition states, the hot path (a failover reads every one, a controlled shutdown writes tens of
  thousands), go through ``kctl._engine``'s ZooKeeper codec: it builds the multi and multiRead
  requests, decodes the answers and the usual state JSON, and runs the chunk-and-retry loop,
  while the client only moves the bytes (``native_*``); the native engine uses that codec
  directly, with no Python object per partition;
- under an :class:`~kctl.stores.zkacl.AclPolicy`, broker registrations carry the proof the policy
  asks for, and registrations it cannot trust are ignored.

kazoo is imported when a store is created, so kctl works without it; install it with
``pip install 'kctl[zookeeper]'``.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kctl._engine import zk_create_partition_states, zk_read_partition_states, zk_write_partition_states
from kctl.errors import ControllerMovedError, StoreError
from kctl.hookspecs import hookimpl
from kctl.model import (
    BrokerInfo,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    TopicPartition,
)
from kctl.stores.base import MATCH_ANY_VERSION, ReadResult, UpdateResult, WatchKind
from kctl.stores.kafkazk import KafkaZkClient, ZnodeFormat
from kctl.stores.zkacl import AclPolicy
from kctl.stores.zkclient import JUTE_MAXBUFFER, ZooKeeperClient
from kctl.stores.zkdata import (
    BrokerIdZNode,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerZNode,
    FeatureZNode,
    IsrChangeNotificationSequenceZNode,
    LogDirEventNotificationSequenceZNode,
    PreferredReplicaElectionZNode,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    TopicPartitionStateZNode,
    TopicZNode,
)
from kctl.stores.znode import Failure, Op, Stat

if TYPE_CHECKING:
    from kctl.registry import StateStoreRegistry

_BAD_VERSION = -103  # ZooKeeper's BADVERSION, as the native codec reports it

JSON = ZnodeFormat(
    controller=ControllerZNode,
    controller_epoch=ControllerEpochZNode,
    broker=BrokerIdZNode,
    cluster_id=ClusterIdZNode,
    feature=FeatureZNode,
    producer_id_block=ProducerIdBlockZNode,
    topic=TopicZNode,
    config=ConfigEntityZNode,
    partition_state=TopicPartitionStateZNode,
    reassignments=ReassignPartitionsZNode,
    preferred_replica_election=PreferredReplicaElectionZNode,
    isr_change_notification=IsrChangeNotificationSequenceZNode,
    log_dir_event_notification=LogDirEventNotificationSequenceZNode,
    config_change_notification=ConfigEntityChangeNotificationSequenceZNode,
)
"""Kafka's JSON for each znode kind."""


class ZooKeeperStore(KafkaZkClient):
    """A session on a ZooKeeper ensemble holding Kafka's znode layout under ``chroot``.

    :param hosts: ZooKeeper's connect string, ``host:port[,host:port…][/chroot]``.
    :param chroot: the znode under which the cluster lives (created if missing).
    :param options: the client's (:class:`~kctl.stores.zkclient.ZooKeeperClient`): the session
        timeout, ``auth``/``sasl``/``tls``, the ``acl`` policy, and the servers' limits.

    :raises StoreUnavailableError: when no server answers within ``connection_timeout``.
    """

    def __init__(self, hosts: str, chroot: str = "", **options: Any) -> None:
        self._client = ZooKeeperClient(hosts, chroot, **options)
        super().__init__(self._client, JSON, secrets.token_bytes)

    @property
    def client(self) -> ZooKeeperClient:
        """The session's znode client."""
        return self._client

    @property
    def hosts(self) -> str:
        return self._client.hosts

    def acl_of(self, path: str) -> list[tuple[int, str, str]]:
        """The ACL of the znode at ``path``: ``(permission bits, scheme, id)`` entries."""
        return self._client.acl_of(path)

    @property
    def chroot(self) -> str:
        return self._client.chroot

    @property
    def identities(self) -> tuple[str, ...]:
        """The identities this store's session has, as policies name them (``user:digest`` for the
        digest scheme, ``sasl:user`` after a SASL login)."""
        return self._client.identities

    @property
    def acl_policy(self) -> AclPolicy | None:
        return self._client.acl_policy

    # --- Session ---------------------------------------------------------------------------------

    def new_session(self) -> ZooKeeperStore:
        """Another client of the same ensemble and chroot (another broker or controller process)."""
        return ZooKeeperStore(self._client.hosts, self._client.chroot, **self._client.options)

    def watch_all(self, kind: WatchKind, keys: Iterable[object]) -> None:
        """See :meth:`ZooKeeperClient.watch_all`: one round of pipelined requests."""
        self._client.watch_all(kind, keys)

    # --- Brokers under an ACL policy -------------------------------------------------------------

    def _create_registration(self, broker_id: int, path: str, data: object) -> int:
        """When the policy gives the id identities of its own, the data is written again in the
        same multi, the proof :meth:`~kctl.stores.zkacl.AclPolicy.genuine_registration` asks for."""
        policy = self._client.acl_policy
        if policy is None or not policy.has_own_identities(broker_id):
            return super()._create_registration(broker_id, path, data)
        outcome = self._client.multi([[Op("create", path, data, ephemeral=True), Op("set", path, data, 0)]],
                                     MATCH_ANY_VERSION)[0]
        if isinstance(outcome, Failure):
            raise outcome.error
        stat = outcome[1]
        assert isinstance(stat, Stat)
        return stat.czxid

    def get_all_brokers(self) -> dict[int, tuple[BrokerInfo, int]]:
        brokers = super().get_all_brokers()
        policy = self._client.acl_policy
        if policy is not None and policy.broker_ids:
            self._client.drop_unproven_registrations(brokers)
        return brokers

    # --- Partition states through the native codec ----------------------------------------------

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> ReadResult[TopicPartition, LeaderIsrAndControllerEpoch]:
        """multiRead requests encoded, and the usual documents decoded, by the native codec."""
        if not self._client.multi_read:
            return super().get_partition_states(partitions)
        keys = list(partitions)
        answers = zk_read_partition_states(self, [(tp.topic, tp.partition) for tp in keys])
        result: ReadResult[TopicPartition, LeaderIsrAndControllerEpoch] = ReadResult()
        values, errors = result.values, result.errors
        for tp, answer in zip(keys, answers):
            if isinstance(answer, int):
                errors[tp] = self.native_error(TopicPartitionStateZNode.path(tp), answer)
            elif len(answer) == 5:
                leader, isr, leader_epoch, controller_epoch, version = answer
                values[tp] = LeaderIsrAndControllerEpoch(
                    LeaderAndIsr(leader, isr, leader_epoch, version), controller_epoch
                )
            else:
                data, version = answer
                path = TopicPartitionStateZNode.path(tp)
                try:
                    values[tp] = TopicPartitionStateZNode.decode(data, path, version)
                except StoreError as exc:
                    errors[tp] = exc
        return result

    def create_partition_states(self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
                                expected_controller_epoch_version: int) -> dict[TopicPartition, StoreError | None]:
        """Kafka's order (:meth:`KafkaZkClient.create_partition_states`), the requests encoded and
        answered by the native codec; under an ACL policy, which decides each znode's ACL, through
        the client."""
        if self._client.acl_policy is not None:
            return super().create_partition_states(states, expected_controller_epoch_version)
        fence = expected_controller_epoch_version
        parents = self._partition_parents(list(dict.fromkeys(tp.topic for tp in states)), fence)
        results: dict[TopicPartition, StoreError | None] = {}
        encode = self._format.partition_state.encode
        created = []
        for tp, state in states.items():
            existing = parents[tp.topic]
            if isinstance(existing, StoreError):
                results[tp] = existing
            else:
                created.append((tp.topic, tp.partition, str(tp.partition) not in existing, encode(state)))
        outcomes = zk_create_partition_states(self, created, fence)
        for (topic, partition, *_), outcome in zip(created, outcomes):
            results[TopicPartition(topic, partition)] = None if outcome is None else self.native_create_error(*outcome)
        return {tp: results[tp] for tp in states}

    def update_partition_states(self, updates: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int,
                                expected_controller_epoch_version: int) -> UpdateResult:
        """Conditional writes in fenced multis, encoded (JSON and requests) and answered by the
        native codec; the client's chunking and per-item outcomes."""
        entries = list(updates.items())
        recovering = LeaderRecoveryState.RECOVERING
        outcomes = zk_write_partition_states(
            self,
            [
                (tp.topic, tp.partition, leader_and_isr.leader, leader_and_isr.isr, leader_and_isr.leader_epoch,
                 leader_and_isr.leader_recovery_state is recovering, leader_and_isr.partition_epoch)
                for tp, leader_and_isr in entries
            ],
            controller_epoch,
            expected_controller_epoch_version,
        )
        result = UpdateResult()
        successful = result.successful
        for (tp, leader_and_isr), outcome in zip(entries, outcomes):
            if outcome >= 0:
                successful[tp] = LeaderAndIsr(leader_and_isr.leader, leader_and_isr.isr, leader_and_isr.leader_epoch,
                                              outcome, leader_and_isr.leader_recovery_state)
            elif outcome == _BAD_VERSION:
                result.to_retry.append(tp)
            else:
                result.failed[tp] = self.native_error(TopicPartitionStateZNode.path(tp), outcome)
        return result

    # --- The native codec's transport (kctl._engine calls these on the store) -------------------

    def native_zk(self) -> tuple[str, int, int, int, bool, bytes | None]:
        """See :meth:`ZooKeeperClient.native_zk`."""
        return self._client.native_zk()

    def native_exchange(self, opcode: int, requests: Sequence[tuple[bytes, str]]) -> list[bytes]:
        """See :meth:`ZooKeeperClient.native_exchange`."""
        return self._client.native_exchange(opcode, requests)

    def native_error(self, path: str, code: int) -> StoreError:
        return self._client.native_error(path, code)

    def native_create_error(self, path: str, code: int) -> StoreError:
        return self._client.native_create_error(path, code)

    def native_fence_error(self, code: int, fence: int) -> ControllerMovedError:
        return self._client.native_fence_error(code, fence)

    def native_limit_error(self, path: str, size: int) -> StoreError:
        return self._client.native_limit_error(path, size)

    def native_wire_error(self, message: str) -> StoreError:
        return self._client.native_wire_error(message)


@hookimpl
def kctl_register_state_stores(register: StateStoreRegistry) -> None:
    """Register ``zookeeper``; kazoo is imported only when a store is created, so kctl without
    kazoo still lists and uses its other stores."""
    register.add("zookeeper", ZooKeeperStore)


__all__ = ["JSON", "JUTE_MAXBUFFER", "ZooKeeperStore"]
