"""Kafka's admin tools: ``kctl topics``, ``kctl reassign``, ``kctl elect-leaders`` and their Python API.

:class:`~kctl.tools.client.AdminClient` (the API, on a ZooKeeper ensemble or an embedded cluster),
:mod:`kctl.tools.files` (the tools' JSON files), :mod:`kctl.tools.commands` (the commands) and
:mod:`kctl.tools.status` (``kctl cluster status`` and :func:`~kctl.tools.status.cluster_status`).
"""

from kctl.tools.client import AdminClient, ElectionType, ReassignmentStatus
from kctl.tools.status import ClusterStatus, cluster_status

__all__ = ["AdminClient", "ClusterStatus", "ElectionType", "ReassignmentStatus", "cluster_status"]
