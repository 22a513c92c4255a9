"""``kctl topics``, ``kctl reassign`` and ``kctl elect-leaders``: Kafka's admin tools on ``--zk``.

Each command opens an :class:`~kctl.tools.client.AdminClient` on the ensemble, does one thing and
prints what Kafka's ``kafka-topics``, ``kafka-reassign-partitions`` and ``kafka-leader-election``
print. The ``format_*`` functions produce those lines from the client's results, so the output
is the same whichever cluster the client runs on. Invalid input is a :class:`~kctl.errors.KctlError`
(``kctl: error: …``, exit status 1) raised before anything is written.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from kctl.errors import AdminCommandFailedError, ElectionNotNeededError, KctlError, UnknownTopicOrPartitionError
from kctl.model import ReplicaAssignment, TopicPartition
from kctl.config import ControllerConfig
from kctl.process import ZooKeeperSecurity, add_zookeeper_arguments, int_argument, quiet_zookeeper_client, seconds_argument
from kctl.tools.client import (
    DEFAULT_TIMEOUT,
    AdminClient,
    Cancellation,
    ElectionType,
    PartitionFilter,
    ReassignmentStatus,
    TopicDescription,
    VerifiedReassignment,
)
from kctl.tools.files import (
    format_reassignment,
    parse_election_partitions,
    parse_reassignment,
    parse_topics_to_move,
    read_json,
)


def _ids(brokers: Iterable[int]) -> str:
    return ",".join(map(str, brokers))


def _client(args: argparse.Namespace, min_insync_replicas: int = 1) -> AdminClient:
    quiet_zookeeper_client()
    security = ZooKeeperSecurity.from_arguments(args, ControllerConfig())
    return AdminClient.connect(args.zk, args.zk_timeout, min_insync_replicas=min_insync_replicas,
                               **security.transport_options())


def _property(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f'Invalid topic config: all configs to be added must be in the format "key=val", got {text!r}')
    return name.strip(), value.strip()


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """``--replica-assignment 1:2,2:3``: partition i's replicas are the i-th comma-separated list."""
    assignment: dict[int, list[int]] = {}
    for partition, brokers in enumerate(text.split(",")):
        try:
            replicas = [int(b.strip()) for b in brokers.split(":")]
        except ValueError:
            raise AdminCommandFailedError(
                f"--replica-assignment: partition {partition}: expected broker ids separated by ':', got {brokers!r}"
            ) from None
        duplicates = sorted({r for r in replicas if replicas.count(r) > 1})
        if duplicates:
            raise AdminCommandFailedError(
                f"--replica-assignment: partition {partition}: partition replica lists may not contain duplicate "
                f"entries: {_ids(duplicates)}"
            )
        if len(replicas) != len(assignment.get(0, replicas)):
            raise AdminCommandFailedError(
                f"--replica-assignment: partition {partition} has different replication factor: {replicas}"
            )
        assignment[partition] = replicas
    return assignment


def _replica_assignment_argument(text: str) -> dict[int, list[int]]:
    try:
        return parse_replica_assignment(text)
    except KctlError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# --- kctl topics ---------------------------------------------------------------------------------


def format_description(
    topic: TopicDescription, filters: Collection[PartitionFilter] = (), live_brokers: Collection[int] = ()
) -> list[str]:
    """``kafka-topics --describe`` as Kafka 3.9 prints it on a ZooKeeper cluster: a line for the
    topic, then one per partition (with no ELR there, ``Elr: N/A``). Given ``filters``
    (``--under-replicated-partitions`` …), only the partitions matching any of them, without the
    topic's line; ``live_brokers`` is for :attr:`PartitionFilter.UNAVAILABLE`."""
    deletion = "\tMarkedForDeletion: true" if topic.marked_for_deletion else ""
    lines = []
    if not filters:
        configs = ",".join(f"{k}={v}" for k, v in topic.config.items())
        topic_id = f"\tTopicId: {topic.topic_id}" if topic.topic_id else ""
        lines.append(f"Topic: {topic.name}{topic_id}\tPartitionCount: {len(topic.partitions)}\t"
                     f"ReplicationFactor: {topic.replication_factor}\tConfigs: {configs}{deletion}")
    for p in topic.filtered(filters, live_brokers) if filters else topic.partitions:
        line = (f"\tTopic: {topic.name}\tPartition: {p.partition}\t"
                f"Leader: {p.leader if p.has_leader else 'none'}\tReplicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}")
        if p.adding_replicas or p.removing_replicas:
            line += f"\tAdding Replicas: {_ids(p.adding_replicas)}\tRemoving Replicas: {_ids(p.removing_replicas)}"
        lines.append(f"{line}\tElr: N/A\tLastKnownElr: N/A{deletion}")
    return lines


_FILTER_HELP = {
    PartitionFilter.UNDER_REPLICATED: "only the partitions with fewer in-sync replicas than replicas",
    PartitionFilter.UNDER_MIN_ISR: "only the partitions without a leader or with fewer in-sync replicas than the "
                                   "topic's min.insync.replicas",
    PartitionFilter.AT_MIN_ISR: "only the partitions with exactly min.insync.replicas in-sync replicas",
    PartitionFilter.UNAVAILABLE: "only the partitions without a leader or whose leader is not a live broker",
}


def topics_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, text: str) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=text, description=text)
        add_zookeeper_arguments(sub)
        return sub

    action("list", "list the topics (those marked for deletion say so)")
    create = action("create", "create a topic")
    create.add_argument("--topic", required=True, help="the topic's name")
    create.add_argument("--partitions", type=int_argument("a partition count", 1),
                        help="the partition count (with --replication-factor)")
    create.add_argument("--replication-factor", type=int_argument("a replication factor", 1), help="replicas per partition")
    create.add_argument("--replica-assignment", type=_replica_assignment_argument, metavar="B1:B2,B3:B4",
                        help="explicit replicas: partition i's brokers are the i-th comma-separated list")
    create.add_argument("--config", type=_property, action="append", default=[], metavar="NAME=VALUE",
                        help="a topic config override (repeatable)")
    create.add_argument("--if-not-exists", action="store_true", help="do nothing if the topic exists")
    describe = action("describe", "describe topics as kafka-topics --describe does")
    describe.add_argument("--topic", action="append", help="a topic to describe (repeatable; default: all)")
    describe.add_argument("--if-exists", action="store_true", help="leave out the --topic topics that do not exist")
    for kind, text in _FILTER_HELP.items():
        describe.add_argument(f"--{kind.value}", dest="filters", action="append_const", const=kind, default=[],
                              help=f"{text} (filters may be combined: a partition matching any is shown)")
    describe.add_argument("--min-insync-replicas", type=int_argument("a replica count", 1), default=1, metavar="N",
                          help="the brokers' min.insync.replicas, for topics without an override (default: 1, "
                               "Kafka's); kctl reads ZooKeeper only, where the brokers' own configs are not")
    alter = action("alter", "add partitions to a topic")
    alter.add_argument("--topic", required=True, help="the topic's name")
    alter.add_argument("--partitions", type=int_argument("a partition count", 1), required=True,
                       help="the new partition count")
    alter.add_argument("--replica-assignment", type=_replica_assignment_argument, metavar="B1:B2,B3:B4",
                       help="replicas of every partition, existing ones first (only the new ones are used)")
    delete = action("delete", "delete a topic, waiting until the controller has deleted it")
    delete.add_argument("--topic", required=True, help="the topic's name")
    delete.add_argument("--if-exists", action="store_true", help="do nothing if the topic does not exist")
    delete.add_argument("--timeout", type=seconds_argument, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"how long to wait for the deletion (default: {DEFAULT_TIMEOUT:g})")


def cmd_topics(args: argparse.Namespace) -> int:
    """Kafka's ``kafka-topics --zookeeper``: list, create, describe, alter (add partitions), delete."""
    with _client(args, getattr(args, "min_insync_replicas", 1)) as client:
        action: Callable[[AdminClient, argparse.Namespace], int] = _TOPIC_ACTIONS[args.action]
        return action(client, args)


def _list(client: AdminClient, args: argparse.Namespace) -> int:
    deleting = set(client.store.get_topic_deletions())
    for topic in client.list_topics():
        print(f"{topic} - marked for deletion" if topic in deleting else topic)
    return 0


def _create(client: AdminClient, args: argparse.Namespace) -> int:
    if "." in args.topic or "_" in args.topic:
        print("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
              "collide. To avoid issues it is best to use either, but not both.")
    if args.topic in client.list_topics() and args.if_not_exists:
        return 0
    client.create_topic(args.topic, args.partitions, args.replication_factor, args.replica_assignment,
                        dict(args.config))
    print(f"Created topic {args.topic}.")
    return 0


def _describe(client: AdminClient, args: argparse.Namespace) -> int:
    topics = args.topic
    if topics is not None and args.if_exists:
        topics = sorted(set(topics) & set(client.list_topics()))
    live = client.live_brokers()
    for topic in client.describe_topics(topics):
        for line in format_description(topic, args.filters, live):
            print(line)
    return 0


def _alter(client: AdminClient, args: argparse.Namespace) -> int:
    manual = None
    if args.replica_assignment is not None:
        existing = len(client.describe_topics([args.topic])[0].partitions)
        manual = {p: r for p, r in args.replica_assignment.items() if p >= existing}
    print("WARNING: If partitions are increased for a topic that has a key, the partition logic or ordering of "
          "the messages will be affected")
    client.create_partitions(args.topic, args.partitions, manual)
    print("Adding partitions succeeded!")
    return 0


def _delete(client: AdminClient, args: argparse.Namespace) -> int:
    """Kafka 3.9's ``--delete``: nothing printed once the topic is deleted."""
    if args.topic not in client.list_topics():
        if args.if_exists:
            return 0
        raise UnknownTopicOrPartitionError(f"Topic '{args.topic}' does not exist as expected")
    client.delete_topic(args.topic, args.timeout)
    return 0


_TOPIC_ACTIONS = {"list": _list, "create": _create, "describe": _describe, "alter": _alter, "delete": _delete}


# --- kctl reassign -----------------------------------------------------------------------------


def format_verification(statuses: Mapping[TopicPartition, VerifiedReassignment]) -> list[str]:
    """``kafka-reassign-partitions --verify``: one line per partition."""
    lines = ["Status of partition reassignment:"]
    for tp, verified in sorted(statuses.items()):
        if verified.status is ReassignmentStatus.COMPLETE:
            lines.append(f"Reassignment of partition {tp} is completed.")
        elif verified.status is ReassignmentStatus.IN_PROGRESS:
            lines.append(f"Reassignment of partition {tp} is still in progress.")
        else:
            lines.append(f"There is no active reassignment of partition {tp}, but replica set is "
                         f"{_ids(verified.current)} rather than {_ids(verified.target)}.")
    return lines


def format_cancellation(cancellation: Cancellation) -> list[str]:
    """``kafka-reassign-partitions --cancel``."""
    if not cancellation.cancelled:
        return ["None of the specified partition reassignments are active."]
    plural = "s" if len(cancellation.cancelled) > 1 else ""
    return [f"Successfully cancelled partition reassignment{plural} for: {','.join(map(str, cancellation.cancelled))}"]


def format_reassignments(reassignments: Mapping[TopicPartition, ReplicaAssignment]) -> list[str]:
    """``kafka-reassign-partitions --list``."""
    if not reassignments:
        return ["No partition reassignments found."]
    lines = ["Current partition reassignments:"]
    for tp, ra in sorted(reassignments.items()):
        adding = f" adding: {_ids(ra.adding_replicas)}." if ra.adding_replicas else ""
        removing = f" removing: {_ids(ra.removing_replicas)}." if ra.removing_replicas else ""
        lines.append(f"{tp}: replicas: {_ids(ra.replicas)}.{adding}{removing}")
    return lines


def _broker_list(text: str) -> list[int]:
    """``--broker-list 1,2,3``."""
    parse = int_argument("a broker id")
    brokers = [parse(b) for b in text.split(",")]
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise argparse.ArgumentTypeError(f"Broker list contains duplicate entries: {duplicates}")
    return brokers


_FILE_ACTIONS = ("execute", "verify", "cancel")
_REASSIGN_OPTIONS = {
    "reassignment_json_file": "reassignment-json-file",
    "topics_to_move_json_file": "topics-to-move-json-file",
    "broker_list": "broker-list",
    "disable_rack_aware": "disable-rack-aware",
}
"""Kafka's per-action options, by argparse destination."""
_REQUIRED = {"generate": ("topics_to_move_json_file", "broker_list"), "list": (),
             **{a: ("reassignment_json_file",) for a in _FILE_ACTIONS}}
_PERMITTED = {"generate": ("disable_rack_aware",)}


def reassign_arguments(parser: argparse.ArgumentParser) -> None:
    add_zookeeper_arguments(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    for name, text in (("execute", "start the reassignment of the --reassignment-json-file"),
                       ("verify", "report the status of the reassignment of the --reassignment-json-file"),
                       ("cancel", "cancel the reassignment of the partitions of the --reassignment-json-file")):
        action.add_argument(f"--{name}", nargs="?", const="", metavar="FILE",
                            help=f"{text} (kctl also takes the file here: --{name} FILE)")
    action.add_argument("--generate", action="store_true",
                        help="propose moving the partitions of the --topics-to-move-json-file topics onto "
                             "the --broker-list brokers (nothing is written)")
    action.add_argument("--list", action="store_true", help="list the reassignments in progress")
    parser.add_argument("--reassignment-json-file", metavar="FILE",
                        help='the reassignment, as {"version":1,"partitions":[{"topic":"foo","partition":1,'
                             '"replicas":[1,2,3],"log_dirs":["any","any","any"]}]} (log_dirs optional)')
    parser.add_argument("--topics-to-move-json-file", metavar="FILE",
                        help='with --generate: the topics to move, as {"version":1,"topics":[{"topic":"foo"}]}')
    parser.add_argument("--broker-list", type=_broker_list, metavar="B1,B2,…",
                        help="with --generate: the brokers to move the topics onto")
    parser.add_argument("--disable-rack-aware", action="store_true",
                        help="with --generate: place replicas without regard to the brokers' racks")


def _reassign_action(args: argparse.Namespace) -> str:
    """The action, with Kafka's checks of which options it requires and permits."""
    action = next(a for a in ("generate", "list", *_FILE_ACTIONS) if getattr(args, a) not in (None, False))
    if action in _FILE_ACTIONS and getattr(args, action):
        given = getattr(args, action)
        if args.reassignment_json_file not in (None, given):
            raise AdminCommandFailedError(f"--{action} {given} and --reassignment-json-file "
                                          f"{args.reassignment_json_file} name different files")
        args.reassignment_json_file = given
    for dest, name in _REASSIGN_OPTIONS.items():
        used = getattr(args, dest) not in (None, False)
        if not used and dest in _REQUIRED[action]:
            raise AdminCommandFailedError(f'Missing required argument "[{name}]"')
        if used and dest not in (*_REQUIRED[action], *_PERMITTED.get(action, ())):
            raise AdminCommandFailedError(f'Option "[{name}]" can\'t be used with action "[{action}]"')
    return action


def cmd_reassign(args: argparse.Namespace) -> int:
    """Kafka's ``kafka-reassign-partitions``; ``--verify`` exits 1 if a reassignment failed."""
    action = _reassign_action(args)
    if action == "generate":
        topics = parse_topics_to_move(read_json(args.topics_to_move_json_file), args.topics_to_move_json_file)
        with _client(args) as client:
            current, proposed = client.generate_reassignment(topics, args.broker_list, not args.disable_rack_aware)
        print(f"Current partition replica assignment\n{format_reassignment(current)}\n")
        print(f"Proposed partition reassignment configuration\n{format_reassignment(proposed)}")
        return 0
    if action == "list":
        with _client(args) as client:
            print("\n".join(format_reassignments(client.list_reassignments())))
        return 0
    path = args.reassignment_json_file
    targets = parse_reassignment(read_json(path), path)
    with _client(args) as client:
        if action == "execute":
            current = client.execute_reassignment(targets)
            print("Current partition replica assignment\n")
            print(format_reassignment(current))
            print("\nSave this to use as the --reassignment-json-file option during rollback")
            plural = "s" if len(targets) > 1 else ""
            print(f"Successfully started partition reassignment{plural} for {','.join(map(str, sorted(targets)))}")
            return 0
        if action == "verify":
            statuses = client.verify_reassignment(targets)
            print("\n".join(format_verification(statuses)))
            return 1 if any(v.status is ReassignmentStatus.FAILED for v in statuses.values()) else 0
        print("\n".join(format_cancellation(client.cancel_reassignment(targets))))
        return 0


# --- kctl elect-leaders ------------------------------------------------------------------------


def format_election(election_type: ElectionType, results: Mapping[TopicPartition, int | KctlError]) -> list[str]:
    """``kafka-leader-election``'s report: successes, partitions that needed no election, errors."""
    kind = election_type.name
    succeeded = [str(tp) for tp, r in sorted(results.items()) if not isinstance(r, KctlError)]
    not_needed = [str(tp) for tp, r in sorted(results.items()) if isinstance(r, ElectionNotNeededError)]
    failed = [(tp, r) for tp, r in sorted(results.items()) if isinstance(r, KctlError) and not isinstance(r, ElectionNotNeededError)]
    lines = []
    if succeeded:
        lines.append(f"Successfully completed leader election ({kind}) for partitions {', '.join(succeeded)}")
    if not_needed:
        lines.append(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    for tp, error in failed:
        lines.append(f"Error completing leader election ({kind}) for partition: {tp}: {error.error.name}: {error}")
    return lines


def elect_leaders_arguments(parser: argparse.ArgumentParser) -> None:
    add_zookeeper_arguments(parser)
    parser.add_argument("--election-type", required=True, choices=[t.value for t in ElectionType],
                        type=str.lower, help="preferred or unclean")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic of the partition (with --partition)")
    which.add_argument("--path-to-json-file", metavar="FILE",
                       help='the partitions, as {"partitions":[{"topic":"foo","partition":1}]}')
    which.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    parser.add_argument("--partition", type=int_argument("a partition id"), help="the partition id (with --topic)")
    parser.add_argument("--timeout", type=seconds_argument, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"how long to wait for the controller (default: {DEFAULT_TIMEOUT:g})")


def _election_partitions(args: argparse.Namespace) -> Sequence[TopicPartition] | None:
    if args.topic is not None:
        if args.partition is None:
            raise AdminCommandFailedError("--partition is required with --topic")
        return [TopicPartition(args.topic, args.partition)]
    if args.partition is not None:
        raise AdminCommandFailedError("--partition is only valid with --topic")
    if args.path_to_json_file is not None:
        return parse_election_partitions(read_json(args.path_to_json_file), args.path_to_json_file)
    return None


def cmd_elect_leaders(args: argparse.Namespace) -> int:
    """Kafka's ``kafka-leader-election``; exit status 1 if any partition could not be elected."""
    partitions = _election_partitions(args)
    election_type = ElectionType(args.election_type)
    with _client(args) as client:
        results = client.elect_leaders(election_type, partitions, args.timeout)
    for line in format_election(election_type, results):
        print(line)
    failures = [r for r in results.values() if isinstance(r, KctlError) and not isinstance(r, ElectionNotNeededError)]
    return 1 if failures else 0


__all__ = [
    "cmd_elect_leaders",
    "cmd_reassign",
    "cmd_topics",
    "elect_leaders_arguments",
    "format_cancellation",
    "format_description",
    "format_election",
    "format_reassignments",
    "format_verification",
    "parse_replica_assignment",
    "reassign_arguments",
    "topics_arguments",
]
