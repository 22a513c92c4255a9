"""``kctl fleet``: run a benchmark grid on Spark, or show the scenario one of its seeds plays.

- ``kctl fleet run GRID.toml --out DIR [--master URL]``: check the grid and the master, then run
  the PySpark job (:mod:`kctl.bench.job`). Exit 0 when every run ended cleanly, 1 when a run
  raised or violated an invariant (the outputs are written anyway) or Spark cannot run, 2 for an
  invalid grid (nothing is started).
- ``kctl fleet scenario GRID.toml --seed N [--variant K]``: print that seed's scenario as a
  ``kctl sim`` file, to replay one row alone.
- ``kctl fleet import-logs [NAME=]LOGS... --out DIR``: read Kafka clusters' ``controller.log`` and
  ``state-change.log`` with Spark and write each cluster as a scenario (:mod:`kctl.bench.importer`);
  a grid with ``scenarios = "DIR"`` replays them. Exit 2 when a source holds no log file.
- ``kctl fleet report DIR``: write the report again from the dataset under ``DIR`` (after an
  upgrade of kctl's report, or after several runs wrote to it), with Spark SQL, without playing
  anything.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kctl.bench.grid import GridError, load_grid
from kctl.bench.job import run_arguments
from kctl.limits import DocumentError, load_json, load_toml


def fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """``kctl fleet``'s subcommands (registered by :mod:`kctl.cli`)."""
    commands = parser.add_subparsers(dest="fleet_command", metavar="SUBCOMMAND", required=True)
    run = commands.add_parser("run", help="run a grid on Spark: parquet, an HTML report, plots",
                              description="run a benchmark grid on Spark")
    run_arguments(run)
    run.set_defaults(fleet=cmd_fleet_run)
    scenario = commands.add_parser("scenario", help="print the kctl sim scenario of one seed of a grid",
                                   description="print the kctl sim scenario of one seed of a grid")
    scenario.add_argument("grid", metavar="GRID.toml", type=Path, help="the grid file")
    scenario.add_argument("--seed", type=int, required=True, help="the seed")
    scenario.add_argument("--variant", type=int, default=0, help="which variant's properties (0-based, grid order)")
    scenario.set_defaults(fleet=cmd_fleet_scenario)
    report = commands.add_parser("report", help="write a fleet's report again from its runs/ dataset",
                                 description="write report.html, summary.md and plots/ again from DIR/runs/")
    report.add_argument("out", metavar="DIR", help="the output of kctl fleet run (a path or a Hadoop URI)")
    report.add_argument("--master", metavar="URL", default=None,
                        help="Spark master (default: KCTL_SPARK_MASTER, else Spark's own configuration, else local[*])")
    report.set_defaults(fleet=cmd_fleet_report)
    logs = commands.add_parser("import-logs", help="read Kafka clusters' controller and state-change logs as scenarios",
                               description="read Kafka clusters' controller.log and state-change.log files (ZooKeeper "
                                           "mode) with Spark and write each cluster as a kctl sim scenario")
    logs.add_argument("sources", metavar="[NAME=]LOGS", nargs="+",
                      help="one cluster's logs: a directory, file or glob (a path or a Hadoop URI), named NAME or "
                           "after its last component")
    logs.add_argument("--out", metavar="DIR", required=True,
                      help="where NAME.toml for each cluster and import-report.json go (a path or a Hadoop URI)")
    logs.add_argument("--master", metavar="URL", default=None,
                      help="Spark master (default: KCTL_SPARK_MASTER, else Spark's own configuration, else local[*])")
    logs.set_defaults(fleet=cmd_fleet_import_logs)


def cmd_fleet(args: argparse.Namespace) -> int:
    """Benchmark fleets on Spark; see :mod:`kctl.bench.cli`."""
    return int(args.fleet(args))


def _invalid(path: Path, error: GridError) -> int:
    print(f"kctl fleet: {path} is not a valid grid:", file=sys.stderr)
    print("\n".join(f"  {problem}" for problem in error.problems), file=sys.stderr)
    return 2


def cmd_fleet_run(args: argparse.Namespace) -> int:
    """Check everything that can be checked before Spark starts, then run the job."""
    from kctl.bench import job, session
    from kctl.bench.environment import pack_environment

    try:
        grid = load_grid(args.grid)
    except GridError as e:
        return _invalid(args.grid, e)
    if args.seeds is not None and args.seeds < 1:
        print("kctl fleet: --seeds must be at least 1", file=sys.stderr)
        return 2
    session.require_spark()
    master, chosen = session.resolve_master(args.master)
    session.check_master(master)
    archive = None
    if not session.is_local(master):
        archive = args.environment if args.environment is not None else pack_environment()
        if not archive.is_file():
            print(f"kctl fleet: no environment archive at {archive}", file=sys.stderr)
            return 2
    spark = session.build_session(master, chosen, archive)
    try:
        return job.main(spark, args, grid)
    finally:
        spark.stop()


def cmd_fleet_scenario(args: argparse.Namespace) -> int:
    from kctl.bench.scenarios import generate, scenario_toml

    try:
        grid = load_grid(args.grid)
    except GridError as e:
        return _invalid(args.grid, e)
    variants = grid.variants()
    if not 0 <= args.variant < len(variants):
        print(f"kctl fleet: --variant must be 0-{len(variants) - 1}: "
              + "; ".join(f"{i}: {v.label}" for i, v in enumerate(variants)), file=sys.stderr)
        return 2
    sys.stdout.write(scenario_toml(generate(grid, args.seed, variants[args.variant])))
    return 0


def cmd_fleet_report(args: argparse.Namespace) -> int:
    """The report of every run of the output's grid in its dataset, computed by Spark SQL."""
    from kctl.bench import job, session
    from kctl.bench.dataset import FleetPathError, HadoopFiles, uri
    from kctl.bench.grid import parse_grid

    session.require_spark()
    master, chosen = session.resolve_master(args.master)
    session.check_master(master)
    spark = session.build_session(master, chosen, app_name="kctl fleet report")
    try:
        files, base = HadoopFiles(spark), uri(args.out)
        try:
            grid = parse_grid(load_toml(files.read(f"{base}/grid.toml")), f"{base}/grid.toml")
            meta = load_json(files.read(f"{base}/meta.json")) if files.exists(f"{base}/meta.json") else {}
            if not isinstance(meta, dict):
                raise DocumentError(f"{base}/meta.json: not a JSON object")
            _, written = job.report(spark, grid, args.out, {k: str(v) for k, v in meta.items()
                                                             if k not in ("seeds", "runs", "fleet runs")})
        except GridError as e:
            return _invalid(Path(f"{base}/grid.toml"), e)
        except (DocumentError, FleetPathError) as e:
            print(f"kctl fleet: {e}", file=sys.stderr)
            return 2
    finally:
        spark.stop()
    for location in written:
        print(location)
    return 0


def cmd_fleet_import_logs(args: argparse.Namespace) -> int:
    """Import the sources' logs; 1 when a cluster's scenario is not valid (the report says why)."""
    from kctl.bench import importer, session
    from kctl.tables import table

    try:
        sources = [importer.Source.parse(text) for text in args.sources]
    except importer.LogImportError as e:
        print(f"kctl fleet: {e}", file=sys.stderr)
        return 2
    session.require_spark()
    master, chosen = session.resolve_master(args.master)
    session.check_master(master)
    spark = session.build_session(master, chosen, app_name="kctl fleet import-logs")
    try:
        try:
            imported = importer.read_logs(spark, sources)
        except importer.LogImportError as e:
            print(f"kctl fleet: {e}", file=sys.stderr)
            return 2
        written = importer.write(spark, imported, args.out)
    finally:
        spark.stop()
    print(table(["CLUSTER", "STEPS", "LEADER CHANGES", "LINES", "UNPARSED"], importer.summary(imported)))
    for name, problems in sorted(imported.invalid.items()):
        print(f"kctl fleet: {name}: the reconstructed scenario is not valid:", file=sys.stderr)
        print("\n".join(f"  {problem}" for problem in problems), file=sys.stderr)
    for location in written:
        print(location)
    return 1 if imported.invalid else 0
