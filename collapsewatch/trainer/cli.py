"""`collapsewatch train`: parse options into a TrainConfig (failing before any work) and train."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from ..cli_common import APP, HelpCommand

app = typer.Typer(**APP)


@app.command(cls=HelpCommand)
def train_command(
    objective: Annotated[str | None, typer.Option(help="A registered objective, e.g. grpo, sapo_search, llds (an unknown name lists them all).")] = None,
    steps: Annotated[int | None, typer.Option(help="Optimizer steps.")] = None,
    store: Annotated[str | None, typer.Option(help="Store folder or s3://bucket/prefix.")] = None,
    run: Annotated[str | None, typer.Option("--run", "--run-name",
                                            help="Run name (under torchrun write --run-name).")] = None,
    model: Annotated[str | None, typer.Option(help="builtin:tiny | builtin:small | smollm2 | HF folder")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML file of TrainConfig fields.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="key=value override (repeatable).")] = None,
    stop_on: Annotated[list[str] | None, typer.Option(
        help="Stop when a detector enters this phase (or any phase of this detector); repeatable.")] = None,
    on_phase: Annotated[list[str] | None, typer.Option(
        help="RULE=ACTION (repeatable): act when a detector flags a phase; ACTION is checkpoint, stop, "
             "rollback[:lr=1e-4,objective=llds,…] or notify:URL (see collapsewatch/trainer/actions.py).")] = None,
    resume: Annotated[bool, typer.Option(
        help="Continue from the run's last checkpoint, with its saved settings (options given change only "
             "--steps, logging, evaluation and the like; docs/trainer.md).")] = False,
    checkpoint_dir: Annotated[str | None, typer.Option(
        help="Checkpoint folder (default: <store>/<run>/checkpoint; needed for checkpoints with an s3:// store).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed.")] = None,
    device: Annotated[str | None, typer.Option(help="cpu | cuda | auto")] = None,
    detectors: Annotated[str | None, typer.Option(help="Detector settings TOML (`lab calibrate --out`).")] = None,
) -> None:
    """Train a search agent with the built-in trainer, watched by the monitor."""
    from .config import TrainConfig

    given = given_values(config=config, set_=set_, objective=objective, steps=steps, store=store, run=run,
                         model=model, stop_on=stop_on, on_phase=on_phase, resume=resume, seed=seed, device=device,
                         detectors=detectors, checkpoint_dir=checkpoint_dir)
    rank = int(os.environ.get("RANK", "0"))
    if given.get("resume"):
        from .resume import nothing_to_train, resume_config

        cfg, done = resume_config(given)
        if done >= cfg.steps:
            if rank == 0:
                typer.echo(nothing_to_train(cfg.run_name, done))
            return
    else:
        cfg = TrainConfig(**given)
    _check_store(cfg.store, cfg.run_name, rank, refuse=not cfg.resume)
    from ..verdict import n_steps_text
    from .checkpoint import keeps_checkpoint
    from .loop import train

    result = train(cfg)
    if rank == 0:  # torchrun: one summary line, from rank 0
        typer.echo(f"run {result.run}: {n_steps_text(result.steps)}"
                   + (" (stopped by a detector)" if result.stopped_early else "")
                   + ("" if keeps_checkpoint(cfg) else " (no checkpoint kept: pass --checkpoint-dir for one)"))


def given_values(*, config: Path | None, set_: list[str] | None, stop_on: list[str] | None,
                 on_phase: list[str] | None, resume: bool, **options: Any) -> dict[str, Any]:
    """The TrainConfig fields the command line gives (its parsed options): the file, then ``--set``, then options."""
    from .config import config_values

    return config_values(config, set_, stop_on=tuple(stop_on) if stop_on else None,
                         on_phase=tuple(on_phase) if on_phase else None, resume=resume or None, **options)


def _check_store(store: str, run: str, rank: int, *, refuse: bool) -> None:
    """Make the store (a folder, or an object store's local spool: store/location.py) a writable store, and with
    ``refuse`` refuse a run name it already holds, before the model loads; the Monitor checks again (runlock)."""
    from ..runlock import refuse_reuse
    from ..store import location
    from ..store.writer import init_store

    where = location.writer(store)
    p = where.local
    try:
        init_store(p)  # a valid empty store from the start: a kill before step 0 leaves no folder readers reject
        probe = p / ".write-test"
        probe.write_text("")
        probe.unlink()
        if where.remote is not None:  # this rank's run row, if the bucket holds one: refuse_reuse reads it
            rel = f"{run}/runs/r{rank}.parquet"
            if rel in where.remote.list(f"{run}/runs"):
                where.remote.get(rel, p / rel)
    except OSError as e:
        raise ValueError(f"store {store!r} cannot be written: {e.strerror or e}") from e
    if refuse:
        refuse_reuse(p, run, rank, where.show(p))


def main(argv: list[str]) -> int:
    try:
        app(args=argv, prog_name="collapsewatch train", standalone_mode=False)
    except typer.Exit as e:
        return e.exit_code
    except (ValueError, FileNotFoundError, OSError, ImportError) as e:  # ImportError: an opt-in model's package
        typer.echo(f"error: {str(e).splitlines()[0]}", err=True)
        return 1
    except Exception as e:  # click usage errors
        import click

        if isinstance(e, click.ClickException):
            e.show()
            return e.exit_code
        raise
    return 0
