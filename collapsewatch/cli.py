"""The ``collapsewatch`` command line: thin Typer commands over the library.

Library errors (bad paths, unknown runs, malformed or writing SQL) become one line on stderr and exit
code 1; tracebacks are for bugs only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from .cli_common import (
    APP,
    CliError,
    CsvOpt,
    HelpGroup,
    JsonOpt,
    RunOpt,
    StoreArg,
    ctrl_c_ends_it,
    friendly,
    one_format,
    print_arrow,
    print_frame,
    print_rows,
)
from .lab.cli import app as lab_app

app = typer.Typer(**APP, no_args_is_help=True, cls=HelpGroup,
                  help="Watch GRPO-style RL runs for ISDD and lazy-likelihood-displacement collapse.")


def _open_store(store: str):
    from .store import Store

    return Store(store)


@app.command()
@friendly
def runs(store: StoreArg, csv: CsvOpt = False, as_json: JsonOpt = False,
         workers: Annotated[int | None, typer.Option(
             "--workers", min=1, help="Processes that judge the runs whose verdict must be computed (a store new to "
             "this machine, or every run after the detector rules changed); 1: all in this process. Default: the "
             "CPUs this process may use.")] = None) -> None:
    """List the runs of a store with status, steps and verdict (every summary column with --csv / --json).

    The verdict is one of four values: healthy, warning, collapsed, or "no steps" for a run with no step recorded
    (a live run before its first step, a run that crashed before it; its n_steps is 0)."""
    one_format(csv, as_json)
    if not (csv or as_json):  # every run's line kept: the table from those records alone (no pandas, no DuckDB)
        from . import runlines
        from .runlines import computed_footnote
        from .store.opening import open_location

        lines, keys = runlines.kept_lines(open_location(store).local)
        if len(lines) == len(keys):
            print_rows(list(runlines.COMPACT_COLUMNS), runlines.table_rows(lines))
            starred = [r for r, line in lines.items() if str(line["compact"]["verdict"]).endswith("*")]
            if starred:
                typer.echo(computed_footnote(store, starred))
            return
    from .report import runs_table, workers_default
    from .runlines import computed_footnote

    compact, full = runs_table(_open_store(store), workers_default() if workers is None else workers)
    print_frame(full if csv or as_json else compact, csv, as_json)
    starred = compact.loc[compact["verdict"].str.endswith("*"), "run"].tolist() if not (csv or as_json) else []
    if starred:
        typer.echo(computed_footnote(store, starred))


@app.command()
@friendly
def sql(store: StoreArg, query: Annotated[str, typer.Argument(help="Read-only SQL over the views runs, steps, "
                                                              "scalars, sequences, tokens, events.")],
        csv: CsvOpt = False, as_json: JsonOpt = False,
        max_rows: Annotated[int, typer.Option(help="Rows printed at most.")] = 100_000,
        max_mb: Annotated[float, typer.Option(help="Result size limit in MiB (Arrow bytes).")] = 256.0,
        timeout: Annotated[float, typer.Option(help="Seconds before the query is interrupted.")] = 60.0) -> None:
    """Run a read-only SQL query against the store: plain SELECTs over the views only, on a throwaway
    connection with a time and a size limit (writes, DDL, EXPLAIN ANALYZE, file access are refused)."""
    from .store import sqlproc
    from .store.limits import Limits

    one_format(csv, as_json)
    if max_rows < 1 or max_mb <= 0 or timeout <= 0:
        raise CliError("--max-rows, --max-mb and --timeout must be positive")
    limits = Limits(max_rows=max_rows, max_bytes=int(max_mb * 2**20), timeout_s=timeout)
    sqlproc.prestart(limits.process_bytes)  # the worker imports DuckDB while this process starts
    from .store.opening import open_location

    # no Store (its connection is not needed) and no DuckDB here: the worker checks the query before it lists a file
    table, cut = sqlproc.user_query(open_location(store).local, query, limits)
    print_arrow(table, csv, as_json)
    if cut:
        typer.echo(f"warning: result cut at {table.num_rows:,} rows (--max-rows {max_rows:,} / --max-mb "
                   f"{max_mb:g})", err=True)


@app.command()
@friendly
def compact(store: StoreArg) -> None:
    """Merge the segments of every finished or crashed run and export each to <run>/<run>.duckdb."""
    from .store.compact import compact_store

    done = compact_store(store)
    typer.echo(f"compacted {len(done)} run(s): {', '.join(done) if done else '-'}")


@app.command()
@friendly
def export(store: StoreArg,
           catalog_uri: Annotated[str | None, typer.Option(help="The Iceberg catalog: sqlite:///PATH (a SQL catalog "
                                                           "in a SQLite file), http(s)://… (REST), thrift://… (Hive).")
                                  ] = None,
           warehouse: Annotated[str | None, typer.Option(help="Where the tables' files go: a folder or "
                                                         "s3://bucket/prefix (endpoint and keys from AWS_ENDPOINT_URL, "
                                                         "AWS_*).")] = None,
           catalog: Annotated[str | None, typer.Option(help="A catalog by name from ~/.pyiceberg.yaml or "
                                                       "PYICEBERG_CATALOG__<NAME>__* variables (Glue, Hive, REST …).")
                              ] = None,
           prop: Annotated[list[str] | None, typer.Option("--catalog-property", "-p", help="KEY=VALUE: a pyiceberg "
                                                          "catalog property (repeatable), e.g. type=glue, "
                                                          "s3.region=eu-west-1, credential=…")] = None,
           namespace: Annotated[str, typer.Option(help="Iceberg namespace of the tables.")] = "collapsewatch",
           run: Annotated[list[str] | None, typer.Option("--run", "-r", help="Only these runs (repeatable).")] = None,
           crashed: Annotated[bool, typer.Option("--crashed", help="Also export crashed runs (a run resumed and "
                                                 "finished later is rewritten).")] = False) -> None:
    """Write the finished runs not exported yet (steps, sequences, tokens, events, runs) into Apache Iceberg tables,
    for Spark, Trino, Athena, Snowflake or DuckDB (docs/store.md "Export to Apache Iceberg")."""
    from .store.iceberg import export_store, open_catalog

    props = {}
    for item in prop or ():
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise CliError(f"--catalog-property {item!r}: expected KEY=VALUE")
        props[key.strip()] = value
    from .store.opening import store_root

    store_root(store)  # not a store: said before any catalog is opened
    cat = open_catalog(catalog, catalog_uri, warehouse, props)
    typer.echo(export_store(store, cat, namespace, run, crashed).message(namespace))


@app.command()
@friendly
def check(store: StoreArg, quarantine: Annotated[bool, typer.Option(
        "--quarantine", help="Move the bad files to <store>/_quarantine/<run>/<table>/.")] = False,
        repair: Annotated[bool, typer.Option(
            "--repair", help="Rewrite missing or corrupt _schema files from this package's migrations.")] = False
        ) -> None:
    """List segment files that cannot be read as their table (empty, truncated, not Parquet, wrong columns),
    missing or corrupt _schema files and published flushes missing a segment; every command already reads around
    them. Exit code 1 while any remain."""
    from .store.health import check_store

    lines, ok = check_store(store, quarantine=quarantine, repair=repair)
    for line in lines:
        typer.echo(line)
    if not ok:
        raise typer.Exit(1)


@app.command()
@friendly
def detect(store: StoreArg, run: RunOpt = None,
           rank: Annotated[int | None, typer.Option(help="Rank to read (default: the run's lowest).")] = None,
           write: Annotated[bool, typer.Option("--write", help="Also store the events (as the run's "
                                               "offline-r<rank> event segment, the rank read); off by default: "
                                               "reading a store never changes it.")] = False,
           detectors: Annotated[Path | None, typer.Option(help="Detector settings TOML (e.g. from `lab "
                                                          "calibrate`); default: built-in.")] = None,
           evidence: Annotated[bool, typer.Option("--evidence", help="Add each episode's evidence.")] = False,
           recorded: Annotated[bool, typer.Option("--recorded", help="List the stored episodes, whatever rules "
                                                  "found them.")] = False,
           csv: CsvOpt = False, as_json: JsonOpt = False) -> None:
    """Each run's verdict and its episodes under the detector rules (stored ones when these rules found them,
    else computed now; with --write they are stored)."""
    from .cli_detect import detect_cmd
    from .detectors import DetectorConfig

    one_format(csv, as_json)
    config = DetectorConfig.from_file(detectors) if detectors is not None else None
    detect_cmd(store, run, rank, write, config, evidence, recorded, csv, as_json)


@app.command()
@friendly
def watch(store: StoreArg, run: RunOpt = None,
          severity: Annotated[str, typer.Option(help="Least severity reported: info | warning | critical.")] = "warning",
          notify: Annotated[str | None, typer.Option(help="POST each reported event to this http(s) URL (Slack and "
                                                     "Discord in their own shape; slack:/discord: prefix).")] = None,
          to: Annotated[list[str] | None, typer.Option("--to", help="Also send the events and verdicts to a tracker "
                                                       "or webhook (repeatable): tensorboard:DIR, mlflow[:URI], "
                                                       "wandb[:PROJECT], trackio[:PROJECT], swanlab[:PROJECT], "
                                                       "slack:URL, discord:URL.")] = None,
          as_json: Annotated[bool, typer.Option("--json", help="One JSON object per event (JSON lines).")] = False,
          once: Annotated[bool, typer.Option("--once", help="Report the events there now, then exit.")] = False,
          interval: Annotated[float, typer.Option(help="Seconds between polls of the store.")] = 2.0) -> None:
    """Follow live runs and report each new detector event once (again if its severity rises).

    A run whose reward collapses while it runs is reported too, once, at the first poll that sees it (its verdict
    line). Ends when every watched run has finished or crashed. Exit code: 0 no critical event, 2 a critical event
    was reported, 3 every sink (--to, --notify) failed to deliver (2 wins; some failing is a line, exit 0), 1 an
    error."""
    from .follow import follow

    ctrl_c_ends_it()
    raise typer.Exit(follow(store, run=run, severity=severity, notify=notify, as_json=as_json, once=once,
                            interval=interval, sinks=to or ()))


@app.command()
@friendly
def dash(store: StoreArg, host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
         port: Annotated[int, typer.Option(help="Port, 1 to 65535.")] = 8050) -> None:
    """Serve the live dashboard on a store."""
    from collapsewatch.dashboard.app import serve

    # serve() refuses an address it cannot listen on, waits for a store a run has not created yet, then says where
    ctrl_c_ends_it()
    serve(str(store), host=host, port=port, say=typer.echo)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                               "help_option_names": []})
@friendly
def train(ctx: typer.Context) -> None:
    """Train with the built-in trainer (see `collapsewatch train --help`)."""
    from .trainer.cli import main as train_main

    raise typer.Exit(train_main(list(ctx.args)))


@app.command()
@friendly
def ingest(store: StoreArg, file: Annotated[Path, typer.Argument(help="A run's logs: trainer_state.json (HF / TRL), "
                                                                  "a JSON list of log dicts (TRL's log_history "
                                                                  "dumped alone, step_logs.json), a JSON object of "
                                                                  "per-step lists, JSONL (verl's file logger too), a wide CSV "
                                                                  "of per-step metrics (a W&B history or panel "
                                                                  "export), console text "
                                                                  "(verl / TRL, saved with tee), a TensorBoard "
                                                                  "event file or log dir, an MLflow mlflow.db or "
                                                                  "mlruns folder, a trackio project .db, a W&B "
                                                                  "run's .wandb file, run folder or wandb/ folder, "
                                                                  "a SwanLab run's .swanlab file, run folder or log "
                                                                  "dir, or a ClearML offline session (folder, .zip, "
                                                                  "metrics.jsonl) or offline/ folder.")],
           run: Annotated[str, typer.Option("--run", "-r", help="Run name to create.")],
           fmt: Annotated[str | None, typer.Option("--format", help="Force a format: trainer_state, log_history, "
                                                      "json_columns, jsonl, csv, "
                                                      "console, tensorboard, mlflow, trackio, wandb, swanlab, "
                                                      "clearml (default: detected).")] = None,
           source_run: Annotated[str | None, typer.Option(help="The run to read from an MLflow store, a trackio "
                                                             "project, a wandb/ folder, a SwanLab log dir, a "
                                                             "W&B panel CSV or a ClearML offline/ folder holding several (name or id; "
                                                             "W&B: run id or run folder; SwanLab: experiment name, "
                                                             "run id or run folder; ClearML: task name or id).")
                      ] = None,
           follow: Annotated[bool, typer.Option("--follow", help="Keep ingesting what a live run adds to FILE, "
                                                             "in any format, until Ctrl+C (a FILE not created yet "
                                                             "is waited for).")] = False,
           detect: Annotated[bool, typer.Option(help="Run the detectors over the ingested run and store their "
                                                     "episodes (the dashboard shows them); with --follow, once it stops.")] = True,
           interval: Annotated[float, typer.Option(help="Seconds between reads with --follow.")] = 2.0,
           maps: Annotated[list[str] | None, typer.Option(
               "--map", metavar="KEY=COLUMN", help="Read the logged KEY as the catalogue column COLUMN, e.g. --map "
               "reward_avg=reward_mean (repeatable; it wins over what the log's own keys give COLUMN).")] = None
           ) -> None:
    """Import the logged step scalars of a run made without the monitor (docs/ingest.md)."""
    from .ingest import MapError, Tail, ingest_file, parse_maps, wait_for_file

    try:  # a usage error: said before anything is read, waited for or written
        mapped = parse_maps(maps or [])
    except MapError as e:
        for line in e.lines:
            typer.echo(f"error: {line}", err=True)
        raise typer.Exit(2) from None
    if not follow:
        typer.echo(ingest_file(store, file, run, fmt, source_run, detect, mapped).message(store, run))
        return
    if interval <= 0:
        raise ValueError(f"--interval must be > 0 seconds, got {interval!r}")
    ctrl_c_ends_it()
    try:  # started before the trainer: its logger creates FILE later
        wait_for_file(file, interval, lambda line: typer.echo(line, err=True))
    except KeyboardInterrupt:
        return
    tail = Tail(store, file, run, fmt, source_run, mapped)
    try:
        while True:
            tail.poll()
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        done = tail.close(run_detectors=detect)
    typer.echo(done.message(store, run))


@app.command()
@friendly
def demo(store: Annotated[Path, typer.Option(help="Store for the demo run.")] = Path("demo_runs"),
         steps: Annotated[int, typer.Option(help="Training steps.")] = 30,
         serve_dash: Annotated[bool, typer.Option("--dash/--no-dash", help="Serve the dashboard (live while the run trains, and after).")] = True,
         port: Annotated[int, typer.Option(help="Dashboard port.")] = 8050) -> None:
    """A short real training run with the monitor, watched live on the dashboard (with the sample runs)."""
    from .demo import run_demo

    ctrl_c_ends_it()
    run_demo(store, steps=steps, serve=serve_dash, port=port)


app.add_typer(lab_app, name="lab")


def main(argv: list[str] | None = None) -> None:
    app(args=argv, prog_name="collapsewatch")


if __name__ == "__main__":
    main()

