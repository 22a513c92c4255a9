"""``kctl plugins``, ``kctl config`` and ``kctl zk-digest``: what this kctl is made of and how to
configure it, printed without a cluster."""

from __future__ import annotations

import argparse
import json
from typing import Any

from kctl.config import property_docs
from kctl.errors import IllegalArgumentError
from kctl.plugins import PluginHost, get_plugin_host
from kctl.stores import zkacl
from kctl.tables import markdown_table, table
from kctl.topic_config import TOPIC_CONFIGS

# --- kctl plugins --------------------------------------------------------------------------------


def plugins_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _plugins_report(host: PluginHost) -> dict[str, list[dict[str, Any]]]:
    return {
        "plugins": [
            {"name": i.name, "distribution": i.distribution, "version": i.version, "hooks": list(i.hooks)}
            for i in host.plugin_infos()
        ],
        "leader_selectors": [
            {"name": e.name, "kind": e.kind.value, "plugin": e.plugin} for e in host.leader_selectors()
        ],
        "state_stores": [{"name": e.name, "plugin": e.plugin} for e in host.state_stores()],
        "transports": [{"name": e.name, "plugin": e.plugin} for e in host.transports()],
    }


def cmd_plugins(args: argparse.Namespace) -> int:
    """List loaded plugins with their hooks, then what each registry holds and which plugin added it."""
    report = _plugins_report(get_plugin_host())
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    sections = [
        table(
            ("PLUGIN", "SOURCE", "HOOKS"),
            [
                (p["name"], f"{p['distribution']} {p['version']}" if p["distribution"] else "built-in",
                 ", ".join(p["hooks"]))
                for p in report["plugins"]
            ],
        ),
        table(
            ("LEADER SELECTOR", "KIND", "PLUGIN"),
            [(e["name"], e["kind"], str(e["plugin"])) for e in report["leader_selectors"]],
        ),
        table(("STATE STORE", "PLUGIN"), [(e["name"], str(e["plugin"])) for e in report["state_stores"]]),
        table(("TRANSPORT", "PLUGIN"), [(e["name"], str(e["plugin"])) for e in report["transports"]]),
    ]
    print("\n\n".join(sections))
    return 0


# --- kctl config -----------------------------------------------------------------------------------


def config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table (as in docs/user-guide.md)")
    parser.add_argument("--topic", action="store_true",
                        help="list the topic configs (Kafka 3.9's LogConfig) instead of the broker properties")


def _property_text(value: Any) -> str:
    if value is None:
        return "(none)"
    return str(value).lower() if isinstance(value, bool) else str(value)


def cmd_config(args: argparse.Namespace) -> int:
    """List the broker properties the controller reads, with Kafka's names and defaults (with
    ``--topic``: the topic configs, their types and valid values)."""
    rows: list[tuple[str, ...]]
    if args.topic:
        rows = [(k.name, k.type.value, k.default or "(empty)", k.valid_values) for k in TOPIC_CONFIGS.values()]
        header: tuple[str, ...] = ("CONFIG", "TYPE", "KAFKA DEFAULT", "VALID VALUES")
    else:
        rows = [(name, _property_text(default), doc) for name, (default, doc) in property_docs().items()]
        header = ("PROPERTY", "DEFAULT", "DESCRIPTION")
    print(markdown_table([h.lower() for h in header], rows) if args.markdown else table(header, rows))
    return 0


# --- kctl zk-digest --------------------------------------------------------------------------------


def zk_digest_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("identity", nargs="?", default=None, metavar="USER:PASSWORD",
                        help=f"the identity (default: ${zkacl.AUTH_ENV}, which keeps the password off the command line)")


def cmd_zk_digest(args: argparse.Namespace) -> int:
    """Print ZooKeeper's digest identity ``USER:DIGEST`` of ``USER:PASSWORD``, for ``--zk-acl``."""
    auth, _ = zkacl.from_environment(args.identity, "")
    if auth is None:
        raise IllegalArgumentError(f"give USER:PASSWORD, or set {zkacl.AUTH_ENV}")
    print(zkacl.digest(*auth))
    return 0


__all__ = [
    "cmd_config",
    "cmd_plugins",
    "cmd_zk_digest",
    "config_arguments",
    "plugins_arguments",
    "zk_digest_arguments",
]
