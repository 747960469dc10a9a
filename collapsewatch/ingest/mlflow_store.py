"""MLflow's local tracking stores, read with MLflow's own ``MlflowClient``: every metric's full history
(``get_metric_history``) at its step and timestamp. One reader for both stores: they hold the same runs and MLflow's
client reads either; only finding the store differs.

FILE is either

* the SQLite store — ``mlflow.db``, MLflow 3's default (a run that sets no tracking URI writes
  ``sqlite:///mlflow.db`` in its working directory; TRL / HF Trainer's ``report_to="mlflow"`` too), recognised by
  SQLite's header and MLflow's tables, whatever the file's name; or
* the folder store — the ``mlruns`` folder, one experiment's folder, or one run's folder
  (``mlruns/<experiment id>/<run id>``).

A store holding several runs (in one or several experiments) is refused, naming them, unless ``source_run``
(``--source-run``) names one by id or name.

Reading never writes the user's files. ``MlflowClient`` on a ``sqlite:///`` URI migrates an older-schema database in
place (an alembic upgrade on open when one of its tables is missing; seen with mlflow-skinny 3.17.2 on a database
downgraded five revisions) and adds the default experiment when it is missing, so the database is copied first —
SQLite's backup API from a read-only connection, consistent while a run is still writing — and the copy is upgraded
and read. MLflow ≥ 3.7 refuses the folder store unless ``MLFLOW_ALLOW_FILE_STORE`` is set: set for the read (reading
changes nothing in the folder).
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..sinks.base import folder_store_allowed
from .records import IngestError, Record, needs, one_run, sqlite_tables

NAME = "mlflow"
GROWS = False
SNIFF_FORCED = False  # a forced --format still sniffs the file (collapsewatch.ingest.records.Reader)
TABLES = {"experiments", "runs", "metrics", "alembic_version"}
"""Tables every MLflow tracking database has (MLflow 1.x on): a SQLite file without them is not MLflow's."""


def _is_run(p: Path) -> bool:
    return (p / "meta.yaml").is_file() and (p / "metrics").is_dir()


def _root(path: Path) -> tuple[Path, str | None, str | None]:
    """(tracking root, experiment id, run id) that a folder ``path`` points at."""
    if _is_run(path):
        return path.parent.parent, path.parent.name, path.name
    if (path / "meta.yaml").is_file() and any(_is_run(c) for c in path.iterdir()):
        return path.parent, path.name, None
    return path, None, None


def _is_folder(path: Path) -> bool:
    if not path.is_dir():
        return False
    root, _, _ = _root(path)
    return any((e / "meta.yaml").is_file() for e in root.iterdir() if e.is_dir())


def _is_db(path: Path) -> bool:
    return TABLES <= (sqlite_tables(path) or set())


def sniff(path: Path, head: str) -> bool:
    return _is_db(path) or _is_folder(path)


def read(path: Path, source_run: str | None = None, **_: Any) -> Iterator[Record]:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise needs("mlflow", "an MLflow store") from None
    if _is_db(path):
        with _copy(path) as uri:
            yield from _records(MlflowClient(tracking_uri=uri), path, None, None, source_run)
    elif _is_folder(path):
        root, exp, run_id = _root(path)
        with folder_store_allowed():
            records = _records(MlflowClient(tracking_uri=root.resolve().as_uri()), path, exp, run_id, source_run)
        yield from records
    else:
        tables = sqlite_tables(path)
        what = (f"a SQLite database without MLflow's tables ({', '.join(sorted(TABLES - tables))} missing)"
                if tables is not None else "not an MLflow tracking store")
        raise IngestError(f"{str(path)!r} is {what}: give mlflow.db, mlruns/, an experiment or a run folder")


def _records(client: Any, path: Path, exp: str | None, run_id: str | None, source_run: str | None) -> list[Record]:
    """Every metric's history of the one run ``path`` holds or ``source_run`` names, one record per step."""
    if run_id is None:
        exps = [exp] if exp else [e.experiment_id for e in client.search_experiments()]
        runs = [(r.info.run_id, r.info.run_name) for r in client.search_runs(exps)]
        run_id = one_run(path, "MLflow", runs, source_run)
    steps: dict[int, dict[str, float]] = defaultdict(dict)
    times: dict[int, float] = {}
    for key in client.get_run(run_id).data.metrics:
        for m in client.get_metric_history(run_id, key):
            steps[m.step][key] = m.value
            times[m.step] = max(times.get(m.step, 0.0), m.timestamp / 1000)
    return [Record(f"step {step}", step, steps[step], times[step]) for step in sorted(steps)]


@contextmanager
def _copy(path: Path) -> Iterator[str]:
    """A ``sqlite:///`` URI of a temporary copy of the database at ``path``, upgraded to the installed MLflow's
    schema; removed on exit. The user's file is only ever opened read-only."""
    try:
        import alembic  # noqa: F401  MlflowClient imports both lazily, deep inside its first call
        import sqlalchemy
    except ImportError:
        raise needs("sqlalchemy and alembic", "an MLflow database (mlflow.db)") from None
    from mlflow.store.db import utils as db  # private helpers of `mlflow db upgrade`, there since MLflow 1.x

    with tempfile.TemporaryDirectory(prefix="collapsewatch-mlflow-") as tmp:
        copy = Path(tmp) / "mlflow.db"
        src, dst = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True), sqlite3.connect(copy)
        try:
            src.backup(dst)
        except sqlite3.Error as e:
            raise IngestError(f"{str(path)!r} could not be read as SQLite: {e}") from None
        finally:
            src.close()
            dst.close()
        uri = f"sqlite:///{copy}"
        engine = sqlalchemy.create_engine(uri)
        found, head = db._get_schema_version(engine), db._get_latest_schema_revision()
        try:
            if found != head:
                db._upgrade_db(engine)
        except Exception as e:  # alembic's "Can't locate revision": a schema this MLflow does not know
            import mlflow

            raise IngestError(f"{str(path)!r} has MLflow schema {found!r}, which MLflow {mlflow.__version__} cannot "
                              f"upgrade to {head!r} (written by a newer MLflow? pip install -U mlflow-skinny): "
                              f"{str(e).splitlines()[0]}") from None
        finally:
            engine.dispose()
        try:
            yield uri
        except IngestError:
            raise
        except Exception as e:  # MlflowException, SQLAlchemy errors: one line naming the user's file
            raise IngestError(f"{str(path)!r} could not be read as an MLflow database: "
                              f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        finally:
            _forget(uri)


def _forget(uri: str) -> None:
    """Close the engine MLflow's SqlAlchemyStore caches per URI, so the temporary copy is not held open."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    engine = getattr(SqlAlchemyStore, "_engine_map", {}).pop(uri, None)
    if engine is not None:
        engine.dispose()


Parser = None  # no parser of its own (collapsewatch.ingest.records.Reader)
Snapshot = None  # re-read whole at each poll of --follow (collapsewatch.ingest.records.Reader)
