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
given the same policy: the roles' identities, each either a digest identity
(``user:base64(sha1(user:password))``, never a password; :func:`digest` computes one,
``kctl zk-digest`` prints it) or ``sasl:user``, the identity of a session that authenticated
with SASL (:mod:`kctl.stores.zkclient`).

ZooKeeper's CREATE permission on ``/brokers/ids`` lets its holder create a child of any name, so
with one broker identity any broker may register any id. A policy can instead give a broker id
identities of its own (``broker.7=…``): only they then get the ACL of ``/brokers/ids/7``, and a
registration is genuine only if its ACL is still the one the policy gives (never changed since
creation) and its data was written again after creation, which under that ACL only broker 7's
identity (or the controller's) can do. ZooKeeper cannot stop another broker identity from
creating the znode, so readers check (:meth:`AclPolicy.genuine_registration`) and ignore the
others; registering writes the data twice in one transaction to pass that check.

A secured cluster's persistent paths are created by its controller identity; a broker or admin
tool that starts first waits for them (``ZooKeeperStore`` does).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kctl.errors import IllegalArgumentError
from kctl.stores import paths

AUTH_ENV = "KCTL_ZK_AUTH"
"""The process's own ZooKeeper identity, ``USER:PASSWORD`` (instead of ``--zk-auth``)."""
ACL_ENV = "KCTL_ZK_ACL"
"""The cluster's ACL policy, ``controller=USER:DIGEST,broker=USER:DIGEST,admin=USER:DIGEST``
(instead of ``--zk-acl``)."""
SASL_SCHEME = "sasl:"
"""The prefix of a policy identity that is a SASL user (``sasl:USER``) rather than a digest."""
_MAX_BROKER_ID = 2**31 - 1

READ, WRITE, CREATE, DELETE, ADMIN = 1, 2, 4, 8, 16  # ZooKeeper's permission bits
ALL = READ | WRITE | CREATE | DELETE | ADMIN

ROLES = ("controller", "broker", "admin")

CONTROLLER_CREATED_PATHS = (*paths.PERSISTENT_PATHS, paths.CLUSTER_ID.rpartition("/")[0], paths.BROKER_STATE,
                            paths.CONTROLLER_STATE)
"""What a secured cluster's controller identity creates at startup, so that no other identity
ever needs to create a znode at the top of the tree (Kafka's persistent paths, the parent of
``/cluster/id``, which the first broker creates, and the parents of the ``zkqueue`` transport's
queues)."""


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
        raise IllegalArgumentError("expected USER:PASSWORD for a ZooKeeper login (digest or SASL)")
    return user, password


def _identity(text: str, role: str) -> str:
    """A policy identity as the policy keeps it: ``user:digest`` (a ``digest:`` prefix dropped)
    or ``sasl:user``."""
    if text.startswith(SASL_SCHEME):
        if not text.removeprefix(SASL_SCHEME):
            raise IllegalArgumentError(f"{role}={text!r}: expected sasl:USER, the user a SASL session authenticates as")
        return text
    text = text.removeprefix("digest:")
    user, sep, hashed = text.partition(":")
    try:
        valid = bool(sep and user) and len(base64.b64decode(hashed, validate=True)) == 20
    except ValueError:
        valid = False
    if not valid:
        raise IllegalArgumentError(
            f"{role}={text!r}: expected USER:DIGEST, the digest identity `kctl zk-digest USER:PASSWORD` prints "
            "(base64 of a SHA-1; never the password itself), or sasl:USER"
        )
    return text


def acl_entry(perms: int, identity: str) -> AclEntry:
    """The ACL entry granting ``perms`` to a policy identity (``user:digest`` or ``sasl:user``)."""
    if identity.startswith(SASL_SCHEME):
        return AclEntry(perms, "sasl", identity.removeprefix(SASL_SCHEME))
    return AclEntry(perms, "digest", identity)


@dataclass(frozen=True)
class AclPolicy:
    """The identities of each role, and the ACL each znode gets (see the module's table).

    :param controllers: identities (``user:digest`` or ``sasl:user``) of the controller candidates.
    :param brokers: identities of the brokers that may register any broker id.
    :param admins: identities of the admin tools.
    :param brokers_write_isr: partition leaders write their ISR to the state znodes (IBP < 2.7-IV2).
    :param broker_ids: ``(broker id, identity)`` pairs: identities that may register only that id
        (``broker.<id>=…``); an id named here is registered by its own identities only.
    """

    controllers: tuple[str, ...]
    brokers: tuple[str, ...] = ()
    admins: tuple[str, ...] = ()
    brokers_write_isr: bool = False
    broker_ids: tuple[tuple[int, str], ...] = ()
    _cache: dict[str, tuple[AclEntry, ...]] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.controllers:
            raise IllegalArgumentError("an ACL policy names the controller identity (controller=USER:DIGEST)")
        for role, ids in (("controller", self.controllers), ("broker", self.brokers), ("admin", self.admins),
                          ("broker.<id>", tuple(identity for _, identity in self.broker_ids))):
            for text in ids:
                if _identity(text, role) != text:
                    raise IllegalArgumentError(f"{role}={text!r}: give a digest identity without its digest: prefix")
        for broker_id, _ in self.broker_ids:
            if not 0 <= broker_id <= _MAX_BROKER_ID:
                raise IllegalArgumentError(f"broker.{broker_id}: a broker id is in [0, {_MAX_BROKER_ID}]")

    @classmethod
    def parse(cls, text: str, *, brokers_write_isr: bool = False) -> AclPolicy:
        """``controller=USER:DIGEST,broker=USER:DIGEST,broker.7=sasl:USER,admin=USER:DIGEST``; a
        role may appear several times (several identities) or not at all (except the controller)."""
        found: dict[str, list[str]] = {role: [] for role in ROLES}
        broker_ids: list[tuple[int, str]] = []
        for item in filter(None, (part.strip() for part in text.split(","))):
            role, sep, identity = (part.strip() for part in item.partition("="))
            suffix = role.removeprefix("broker.")
            if sep and suffix != role and suffix.isascii() and suffix.isdigit() and int(suffix) <= _MAX_BROKER_ID:
                broker_ids.append((int(suffix), _identity(identity, role)))
            elif sep and role in found:
                found[role].append(_identity(identity, role))
            else:
                raise IllegalArgumentError(
                    f"{item!r}: expected ROLE=USER:DIGEST or ROLE=sasl:USER with ROLE one of {', '.join(ROLES)} "
                    "or broker.<id> (a broker id)"
                )
        return cls(
            tuple(found["controller"]), tuple(found["broker"]), tuple(found["admin"]), brokers_write_isr,
            tuple(broker_ids),
        )

    def format(self) -> str:
        """The policy as :meth:`parse` reads it."""
        roles = [("controller", self.controllers), ("broker", self.brokers), ("admin", self.admins)]
        roles += [(f"broker.{broker_id}", (identity,)) for broker_id, identity in self.broker_ids]
        return ",".join(f"{role}={identity}" for role, ids in roles for identity in ids)

    def is_controller(self, identities: Iterable[str]) -> bool:
        """Whether a session with these identities is a controller of the cluster."""
        return any(identity in self.controllers for identity in identities)

    def all_brokers(self) -> tuple[str, ...]:
        """Every broker identity: those of any id and those of one id."""
        return tuple(dict.fromkeys((*self.brokers, *(identity for _, identity in self.broker_ids))))

    def registrants(self, broker_id: int) -> tuple[str, ...]:
        """The identities that may register ``broker_id``: its own if the policy names any, else
        the broker identities of any id."""
        own = tuple(identity for owner, identity in self.broker_ids if owner == broker_id)
        return own or self.brokers

    def has_own_identities(self, broker_id: int) -> bool:
        """Whether ``broker_id`` is registered by identities of its own (``broker.<id>=…``)."""
        return any(owner == broker_id for owner, _ in self.broker_ids)

    def genuine_registration(self, broker_id: int, acl: Iterable[AclEntry], version: int, acl_version: int,
                             reader: Iterable[str] = ()) -> str | None:
        """Why the registration znode of ``broker_id`` (its ACL and its stat's ``version`` and
        ``aversion``) cannot be trusted to be that broker's, or None when it can.

        Only ids with identities of their own are checked (any broker identity may register the
        others). ZooKeeper shows digest identities in full only to a reader with ADMIN on the
        znode (the controller, under the policy); for others (``reader``: their identities) it
        replaces each hash with ``x``, so they can only compare users.
        """
        if not self.has_own_identities(broker_id):
            return None
        expected_acl = self.acl(paths.broker(broker_id))
        readers = {(e.scheme, e.id) for e in map(functools.partial(acl_entry, ADMIN), reader)}
        full_view = any(entry.perms & ADMIN and (entry.scheme, entry.id) in readers for entry in expected_acl)
        shown: Callable[[AclEntry], AclEntry] = (lambda entry: entry) if full_view else _redacted
        expected = sorted({shown(entry) for entry in expected_acl})
        found = sorted({shown(entry) for entry in acl})
        if found != expected:
            return (f"its ACL {_show(found)} is not the one broker {broker_id}'s identities get ({_show(expected)}): "
                    "another identity created it")
        if acl_version != 0:
            return f"its ACL was changed after it was created (aversion {acl_version})"
        if version < 1:
            return (f"its data was never written after it was created (version {version}), which would prove "
                    f"that broker {broker_id}'s identity holds it")
        return None

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
        brokers, admins = self.all_brokers(), self.admins
        depth = len(parts)
        if top == "brokers" and depth >= 2:
            kind = parts[1]
            if kind == "ids":
                if depth == 2:
                    grants.append((brokers, CREATE))
                else:
                    name = parts[2]
                    registered = int(name) if name.isascii() and name.isdigit() else -1
                    grants.append((self.registrants(registered), ALL))
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
        elif top == "cluster" and depth == 1:  # the first broker creates /cluster/id
            grants.append((brokers, CREATE))
        elif top in ("isr_change_notification", "log_dir_event_notification") and depth >= 1:
            grants.append((brokers, CREATE) if depth == 1 else (brokers, ALL))
        entries = {acl_entry(ALL, identity) for identity in self.controllers}
        for identities, perms in grants:
            for identity in identities:
                if identity not in self.controllers:
                    entries.add(acl_entry(perms | READ, identity))
        readable = not (top == "config" and depth >= 2 and parts[1] == "users")  # credentials: Kafka's sensitive path
        return tuple(sorted(entries)) + ((WORLD_READ,) if readable else ())


def _redacted(entry: AclEntry) -> AclEntry:
    return AclEntry(entry.perms, entry.scheme, entry.id.partition(":")[0] + ":x") if entry.scheme == "digest" else entry


def _show(entries: Iterable[AclEntry]) -> str:
    return "[" + ", ".join(f"{e.scheme}:{e.id.partition(':')[0] if e.scheme == 'digest' else e.id}:{e.perms}"
                           for e in entries) + "]"


def from_environment(auth: str | None = None, acl: str | None = None) -> tuple[tuple[str, str] | None, str | None]:
    """The ``--zk-auth`` / ``--zk-acl`` values, or else ``KCTL_ZK_AUTH`` / ``KCTL_ZK_ACL``: the
    identity as ``(user, password)`` and the policy's text (both None when not given)."""
    auth = auth if auth is not None else os.environ.get(AUTH_ENV) or None
    acl = acl if acl is not None else os.environ.get(ACL_ENV) or None
    return (parse_auth(auth) if auth else None), acl


__all__ = [
    "ACL_ENV",
    "SASL_SCHEME",
    "CONTROLLER_CREATED_PATHS",
    "AUTH_ENV",
    "AclEntry",
    "AclPolicy",
    "acl_entry",
    "digest",
    "from_environment",
    "parse_auth",
]
