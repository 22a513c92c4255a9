"""Kafka's admin tools: ``kctl topics``, ``kctl reassign``, ``kctl elect-leaders`` and their Python API.

:class:`~kctl.tools.client.AdminClient` (the API, on a ZooKeeper ensemble or an embedded cluster),
:mod:`kctl.tools.files` (the tools' JSON files) and :mod:`kctl.tools.commands` (the commands).
"""

from kctl.tools.client import AdminClient, ElectionType, PartitionFilter, ReassignmentStatus

__all__ = ["AdminClient", "ElectionType", "PartitionFilter", "ReassignmentStatus"]
