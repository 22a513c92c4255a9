"""ZooKeeper's transaction log, read back: every write the server committed, in order.

A ZooKeeper server appends each transaction to ``<dataDir>/version-2/log.<first zxid>`` before it
answers (``FileTxnLog``): creates, deletes, data changes, multis (a refused multi too, as error
entries), and the creation and closing of sessions, each with its zxid and the session that asked.
That is the complete history of a cluster's znodes, including the writes of a controller since
deposed, so the fault tests judge what really landed rather than what a poller happened to see
(:mod:`kctl.testing.zkhistory` replays it in Kafka's terms).

The format is jute's: a file header (``ZKLG``, version 2, database id), then per entry an Adler-32
checksum, the length-prefixed entry (a ``TxnHeader`` and the record its type names, possibly
followed by a digest this reader ignores) and a ``B`` end-of-record byte. Files are preallocated
with zeros, so an empty entry ends a file; so does a partial last entry (the server was writing
it). The bytes are outside input: every length is checked against what is left, an entry is at
most :data:`MAX_ENTRY_BYTES`, and a multi cannot nest; anything else is a
:class:`TransactionLogError` naming the file and offset.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from kctl.errors import KctlError

T = TypeVar("T")

MAGIC = b"ZKLG"
MAX_ENTRY_BYTES = 64 * 1024 * 1024
"""The largest entry accepted (ZooKeeper's own limit, ``jute.maxbuffer``, is 1 MiB by default)."""
_FILE_HEADER = struct.Struct(">4siq")  # magic, version, database id
_ENTRY_HEADER = struct.Struct(">qi")  # checksum, entry length
_TXN_HEADER = struct.Struct(">qiqqi")  # session, cxid, zxid, time, type
_END_OF_RECORD = b"B"


class TransactionLogError(KctlError):
    """A file that is not a ZooKeeper transaction log, or a corrupt one."""


class OpCode(enum.IntEnum):
    """ZooKeeper's operation codes of the transactions that reach the log."""

    ERROR = -1
    CREATE = 1
    DELETE = 2
    SET_DATA = 5
    SET_ACL = 7
    CHECK = 13
    MULTI = 14
    CREATE2 = 15
    RECONFIG = 16
    CREATE_CONTAINER = 19
    DELETE_CONTAINER = 20
    CREATE_TTL = 21
    CREATE_SESSION = -10
    CLOSE_SESSION = -11


CREATES = frozenset({OpCode.CREATE, OpCode.CREATE2, OpCode.CREATE_CONTAINER, OpCode.CREATE_TTL})
DELETES = frozenset({OpCode.DELETE, OpCode.DELETE_CONTAINER})


@dataclass(frozen=True)
class Operation:
    """One change: a transaction of its own, or one operation of a multi.

    ``version`` is the znode's version after a ``SET_DATA`` (the log holds the new one) and what a
    ``CHECK`` recorded; ``error`` is ZooKeeper's error code of an ``ERROR`` entry (in a refused
    multi, the failed operation has its own code and the others ``-2``, runtime inconsistency);
    ``paths`` are the ephemerals a ``CLOSE_SESSION`` removed. ``code`` is None for a type this
    reader does not decode (``raw_type`` keeps it).
    """

    code: OpCode | None
    raw_type: int
    path: str | None = None
    data: bytes | None = None
    version: int | None = None
    ephemeral: bool = False
    error: int | None = None
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class Transaction:
    """One entry of the log. ``session`` is the client session that asked (for ``CLOSE_SESSION``
    the session closed or expired); a multi lists its operations, anything else has one."""

    zxid: int
    session: int
    time_ms: int
    operations: tuple[Operation, ...]
    multi: bool = False

    @property
    def failed(self) -> bool:
        """ZooKeeper refused the write: nothing of it changed the tree."""
        return any(op.code is OpCode.ERROR for op in self.operations)


class _Reader:
    """jute's binary encoding: big-endian integers, length-prefixed buffers, strings and vectors."""

    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.offset = 0
        self.where = where

    def remaining(self) -> int:
        return len(self.data) - self.offset

    def take(self, size: int) -> bytes:
        if size < 0 or size > self.remaining():
            raise TransactionLogError(
                f"{self.where}: a {size}-byte field at offset {self.offset} overruns its {len(self.data)}-byte record"
            )
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def int(self) -> int:
        return int.from_bytes(self.take(4), "big", signed=True)

    def bool(self) -> bool:
        return self.take(1) != b"\x00"

    def buffer(self) -> bytes | None:
        size = self.int()
        return None if size == -1 else self.take(size)

    def string(self) -> str:
        data = self.buffer()
        try:
            return "" if data is None else data.decode()
        except UnicodeDecodeError as exc:
            raise TransactionLogError(f"{self.where}: a string that is not UTF-8 ({exc})") from None

    def vector(self, item: Callable[[], T]) -> list[T]:
        count = self.int()
        if count == -1:
            return []
        if not 0 <= count <= self.remaining():  # every item takes a byte at least
            raise TransactionLogError(f"{self.where}: a vector of {count} items cannot fit in its record")
        return [item() for _ in range(count)]

    def acl(self) -> None:
        self.int()  # permissions
        self.string()  # scheme
        self.string()  # id


def _operation(raw_type: int, reader: _Reader) -> Operation:
    """Decode the record of one (non-multi) transaction type."""
    try:
        code = OpCode(raw_type)
    except ValueError:
        return Operation(None, raw_type)
    if code in CREATES:
        path, data = reader.string(), reader.buffer()
        reader.vector(reader.acl)
        ephemeral = reader.bool() if code in (OpCode.CREATE, OpCode.CREATE2) else False
        return Operation(code, raw_type, path, data, ephemeral=ephemeral)
    if code in DELETES:
        return Operation(code, raw_type, reader.string())
    if code in (OpCode.SET_DATA, OpCode.RECONFIG):
        path, data = reader.string(), reader.buffer()
        return Operation(code, raw_type, path, data, version=reader.int())
    if code is OpCode.CHECK:
        path = reader.string()
        return Operation(code, raw_type, path, version=reader.int())
    if code is OpCode.SET_ACL:
        path = reader.string()
        reader.vector(reader.acl)
        return Operation(code, raw_type, path, version=reader.int())
    if code is OpCode.ERROR:
        return Operation(code, raw_type, error=reader.int())
    if code is OpCode.CLOSE_SESSION:  # ZooKeeper 3.6+ lists the ephemerals it removes
        return Operation(code, raw_type, paths=tuple(reader.vector(reader.string)) if reader.remaining() else ())
    if code is OpCode.MULTI:
        raise TransactionLogError(f"{reader.where}: a multi inside a multi")
    return Operation(code, raw_type)  # CREATE_SESSION: its timeout is of no interest here


def decode_entry(entry: bytes, where: str = "entry") -> Transaction:
    """One entry's bytes (a ``TxnHeader`` and its record) as a :class:`Transaction`."""
    reader = _Reader(entry, where)
    session, _cxid, zxid, time_ms, raw_type = _TXN_HEADER.unpack(reader.take(_TXN_HEADER.size))
    if raw_type != OpCode.MULTI:
        return Transaction(zxid, session, time_ms, (_operation(raw_type, reader),))
    parts = reader.vector(lambda: (reader.int(), reader.buffer() or b""))
    operations = tuple(_operation(sub_type, _Reader(body, where)) for sub_type, body in parts)
    return Transaction(zxid, session, time_ms, operations, multi=True)


def read_file(path: Path) -> Iterator[Transaction]:
    """The transactions of one log file, in order, up to its preallocated or partial end."""
    with path.open("rb") as file:
        header = file.read(_FILE_HEADER.size)
        if len(header) < _FILE_HEADER.size:
            return  # created, header not written yet
        magic, version, _dbid = _FILE_HEADER.unpack(header)
        if magic != MAGIC or version != 2:
            raise TransactionLogError(f"{path}: not a ZooKeeper transaction log (magic {magic!r}, version {version})")
        while True:
            offset = file.tell()
            head = file.read(_ENTRY_HEADER.size)
            if len(head) < _ENTRY_HEADER.size:
                return
            checksum, length = _ENTRY_HEADER.unpack(head)
            if length == 0:
                return  # the zeros of preallocation
            where = f"{path} at offset {offset}"
            if not 0 < length <= MAX_ENTRY_BYTES:
                raise TransactionLogError(f"{where}: an entry of {length} bytes (at most {MAX_ENTRY_BYTES})")
            entry = file.read(length)
            end = file.read(1)
            if len(entry) < length or not end:
                return  # the server is still writing it
            if zlib.adler32(entry) != checksum & 0xFFFFFFFF or end != _END_OF_RECORD:
                raise TransactionLogError(f"{where}: checksum or end-of-record mismatch")
            yield decode_entry(entry, where)


def log_files(data_dir: Path) -> list[Path]:
    """The log files of a server's data directory, oldest first (named by their first zxid)."""
    found = []
    for path in (data_dir / "version-2").glob("log.*"):
        try:
            found.append((int(path.suffix[1:], 16), path))
        except ValueError:
            continue
    return [path for _, path in sorted(found)]


def read_transactions(data_dir: Path) -> list[Transaction]:
    """Every transaction a server logged in ``data_dir``, in zxid order (a restarted server
    starts a new file; an entry repeated across files is kept once)."""
    seen: set[int] = set()
    transactions = []
    for path in log_files(data_dir):
        for txn in read_file(path):
            if txn.zxid not in seen:
                seen.add(txn.zxid)
                transactions.append(txn)
    transactions.sort(key=lambda t: t.zxid)
    return transactions


__all__ = [
    "CREATES",
    "DELETES",
    "MAX_ENTRY_BYTES",
    "OpCode",
    "Operation",
    "Transaction",
    "TransactionLogError",
    "decode_entry",
    "log_files",
    "read_file",
    "read_transactions",
]
