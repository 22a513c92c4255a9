"""Who may write what in a secured cluster: ZooKeeper ACLs for Kafka's znodes, by role.

Kafka's ``zookeeper.set.acl=true`` gives every znode it creates the ACL "the creator may do
everything, everyone may read" (``CREATOR_ALL_ACL`` + ``READ_ACL_UNSAFE``), except the old
consumers' ``/consumers`` (open) and the credential paths under ``/config/users`` (not readable).
All brokers share one identity there, so any broker may act as the controller. kctl keeps that
model and splits the identity into three roles, each a set of ZooKeeper digest identities:

- the **controller** identity (every ``kctl controller`` candidate: any may become active) is the
  only one that can create ``/controller``, write ``/controller_epoch``, create and write
  partition state znodes and their parents, create Kafka's persistent paths, and delete what
  the controller deletes (topics, admin requests, notifications);
- **brokers** may register under ``/brokers/ids`` (and change their own registration), announce
  ISR changes and log-dir failures (children of ``/isr_change_notification`` and
  ``/log_dir_event_notification``), use the ``zkqueue`` transport's queues, and, only when
  ``brokers_write_isr`` is set (inter-broker protocol before 2.7-IV2, where partition leaders
  write their ISR to ZooKeeper themselves), write partition state znodes;
- **admins** (``kctl topics / reassign / elect-leaders``) may create topics and their configs
  (``/brokers/topics/<t>``, ``/config/topics/<t>``, ``/config/changes``), change topic configs
  and assignments (Kafka's tools add partitions by writing the assignment znode), and create,
  change and delete the admin znodes ``/admin/reassign_partitions``,
  ``/admin/preferred_replica_election`` and ``/admin/delete_topics/<t>``.

Everything is readable by anyone (``world:anyone:r``), as in Kafka, except ``/config/users``.
A znode gets its ACL from this policy whoever creates it, so every process of a cluster is
given the same policy: the roles' digest identities (``user:base64(sha1(user:password))``,
never a password; :func:`digest` computes one, ``kctl zk-digest`` prints it).

A secured cluster's persistent paths are created by its controller identity; a broker or admin
tool that starts first waits for them (``ZooKeeperStore`` does).
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from kctl.errors import IllegalArgumentError
from kctl.stores import paths

AUTH_ENV = "KCTL_ZK_AUTH"
"""The process's own ZooKeeper identity, ``USER:PASSWORD`` (instead of ``--zk-auth``)."""
ACL_ENV = "KCTL_ZK_ACL"
"""The cluster's ACL policy, ``controller=USER:DIGEST,broker=USER:DIGEST,admin=USER:DIGEST``
(instead of ``--zk-acl``)."""

READ, WRITE, CREATE, DELETE, ADMIN = 1, 2, 4, 8, 16  # ZooKeeper's permission bits
ALL = READ | WRITE | CREATE | DELETE | ADMIN

ROLES = ("controller", "broker", "admin")

CONTROLLER_CREATED_PATHS = (*paths.PERSISTENT_PATHS, paths.BROKER_STATE, paths.CONTROLLER_STATE)
"""What a secured cluster's controller identity creates at startup, so that no other identity
ever needs to create a znode at the top of the tree (Kafka's persistent paths, and the parents
of the ``zkqueue`` transport's queues)."""


@dataclass(frozen=True, order=True)
class AclEntry:
    """One ZooKeeper ACL entry: permission bits for an id of a scheme."""

    perms: int
    scheme: str
    id: str


WORLD_READ = AclEntry(READ, "world", "anyone")
OPEN = (AclEntry(ALL, "world", "anyone"),)


def digest(user: str, password: str) -> str:
    """ZooKeeper's digest identity of ``user:password``: ``user:base64(sha1("user:password"))``."""
    hashed = hashlib.sha1(f"{user}:{password}".encode()).digest()
    return f"{user}:{base64.b64encode(hashed).decode()}"


def parse_auth(text: str) -> tuple[str, str]:
    """``USER:PASSWORD`` (the password may contain ``:``)."""
    user, sep, password = text.partition(":")
    if not sep or not user or not password:
        raise IllegalArgumentError("expected USER:PASSWORD for ZooKeeper's digest authentication")
    return user, password


def _digest_id(text: str, role: str) -> str:
    user, sep, hashed = text.partition(":")
    try:
        valid = bool(sep and user) and len(base64.b64decode(hashed, validate=True)) == 20
    except ValueError:
        valid = False
    if not valid:
        raise IllegalArgumentError(
            f"{role}={text!r}: expected USER:DIGEST, the digest identity `kctl zk-digest USER:PASSWORD` prints "
            "(base64 of a SHA-1; never the password itself)"
        )
    return text


@dataclass(frozen=True)
class AclPolicy:
    """The digest identities of each role, and the ACL each znode gets (see the module's table).

    :param controllers: digest identities (``user:digest``) of the controller candidates.
    :param brokers: digest identities of the brokers.
    :param admins: digest identities of the admin tools.
    :param brokers_write_isr: partition leaders write their ISR to the state znodes (IBP < 2.7-IV2).
    """

    controllers: tuple[str, ...]
    brokers: tuple[str, ...] = ()
    admins: tuple[str, ...] = ()
    brokers_write_isr: bool = False
    _cache: dict[str, tuple[AclEntry, ...]] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.controllers:
            raise IllegalArgumentError("an ACL policy names the controller identity (controller=USER:DIGEST)")
        for role, ids in (("controller", self.controllers), ("broker", self.brokers), ("admin", self.admins)):
            for text in ids:
                _digest_id(text, role)

    @classmethod
    def parse(cls, text: str, *, brokers_write_isr: bool = False) -> AclPolicy:
        """``controller=USER:DIGEST,broker=USER:DIGEST,admin=USER:DIGEST``; a role may appear
        several times (several identities) or not at all (except the controller)."""
        found: dict[str, list[str]] = {role: [] for role in ROLES}
        for item in filter(None, (part.strip() for part in text.split(","))):
            role, sep, identity = item.partition("=")
            if not sep or role.strip() not in found:
                raise IllegalArgumentError(
                    f"{item!r}: expected ROLE=USER:DIGEST with ROLE one of {', '.join(ROLES)}"
                )
            found[role.strip()].append(_digest_id(identity.strip(), role.strip()))
        return cls(
            tuple(found["controller"]), tuple(found["broker"]), tuple(found["admin"]), brokers_write_isr
        )

    def format(self) -> str:
        """The policy as :meth:`parse` reads it."""
        return ",".join(
            f"{role}={identity}"
            for role, ids in (("controller", self.controllers), ("broker", self.brokers), ("admin", self.admins))
            for identity in ids
        )

    def is_controller(self, identity: str | None) -> bool:
        return identity is not None and identity in self.controllers

    def acl(self, path: str) -> tuple[AclEntry, ...]:
        """The ACL of the znode at ``path`` (under the chroot; ``""`` is the chroot itself)."""
        found = self._cache.get(path)
        if found is None:
            found = self._acl(path)
            if len(self._cache) < 4096:  # parents and kinds repeat; partition paths would not
                self._cache[path] = found
        return found

    def _acl(self, path: str) -> tuple[AclEntry, ...]:
        parts = path.strip("/").split("/") if path.strip("/") else []
        top = parts[0] if parts else ""
        if top == "consumers":
            return OPEN  # Kafka keeps the old consumers' path open
        grants: list[tuple[Iterable[str], int]] = []  # (identities, permissions) beyond the controller's
        brokers, admins = self.brokers, self.admins
        depth = len(parts)
        if top == "brokers" and depth >= 2:
            kind = parts[1]
            if kind == "ids":
                grants.append((brokers, CREATE) if depth == 2 else (brokers, ALL))
            elif kind == "topics":
                if depth == 2:
                    grants.append((admins, CREATE))
                elif depth == 3:
                    grants.append((admins, WRITE))  # Kafka's tools add partitions by writing it
                elif depth == 6 and parts[5] == "state" and self.brokers_write_isr:
                    grants.append((brokers, WRITE))
            elif kind == "state":  # zkqueue: the controller's requests to each broker
                grants.append((brokers, ALL))
        elif top == "controller_state":  # zkqueue: brokers' requests and answers to a controller
            grants.append((brokers, ALL))
        elif top == "admin" and depth >= 1:
            if depth == 1:
                grants.append((admins, CREATE | DELETE))
            elif parts[1] == "delete_topics" and depth == 2:
                grants.append((admins, CREATE))
            else:
                grants.append((admins, ALL))
        elif top == "config" and depth >= 2:
            grants.append((admins, CREATE) if depth == 2 else (admins, ALL))
        elif top in ("isr_change_notification", "log_dir_event_notification") and depth >= 1:
            grants.append((brokers, CREATE) if depth == 1 else (brokers, ALL))
        entries = {AclEntry(ALL, "digest", identity) for identity in self.controllers}
        for identities, perms in grants:
            for identity in identities:
                if identity not in self.controllers:
                    entries.add(AclEntry(perms | READ, "digest", identity))
        readable = not (top == "config" and depth >= 2 and parts[1] == "users")  # credentials: Kafka's sensitive path
        return tuple(sorted(entries)) + ((WORLD_READ,) if readable else ())


def from_environment(auth: str | None = None, acl: str | None = None) -> tuple[tuple[str, str] | None, str | None]:
    """The ``--zk-auth`` / ``--zk-acl`` values, or else ``KCTL_ZK_AUTH`` / ``KCTL_ZK_ACL``: the
    identity as ``(user, password)`` and the policy's text (both None when not given)."""
    auth = auth if auth is not None else os.environ.get(AUTH_ENV) or None
    acl = acl if acl is not None else os.environ.get(ACL_ENV) or None
    return (parse_auth(auth) if auth else None), acl


__all__ = [
    "ACL_ENV",
    "CONTROLLER_CREATED_PATHS",
    "AUTH_ENV",
    "AclEntry",
    "AclPolicy",
    "digest",
    "from_environment",
    "parse_auth",
]
