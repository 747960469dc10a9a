"""pyproject's package list against the folders it maps: setuptools (≥ 80, in an editable or a wheel build) warns —
"Package would be ignored" — about each folder inside a shipped package whose name Python could import but the list
leaves out. The data folders (the sample runs' table folders) are listed for that reason; this test fails when a
folder is added (a new sample run, a new table) and the list is not.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def importable_folders() -> set[str]:
    """Every dotted name under a listed package whose folder has an importable name (what setuptools checks)."""
    conf = _setuptools()
    dirs = conf["package-dir"]
    out: set[str] = set()
    for package in conf["packages"]:
        # a package's folder: its own package-dir entry, else its parent's folder joined with its last name
        head, tail = package, []
        while head not in dirs:
            head, _, last = head.rpartition(".")
            tail.insert(0, last)
        folder = ROOT / dirs[head] / Path(*tail)
        for sub in folder.rglob("*"):
            parts = sub.relative_to(folder).parts
            if sub.is_dir() and "__pycache__" not in parts and all(p.isidentifier() for p in parts):
                out.add(".".join((package, *parts)))
    return out


def test_every_importable_data_folder_is_listed() -> None:
    listed = set(_setuptools()["packages"])
    missing = sorted(importable_folders() - listed)
    assert not missing, f"add to pyproject.toml [tool.setuptools] packages: {missing}"


def test_the_sample_runs_table_folders_are_among_them() -> None:
    # sample_runs/store/_schema/events holds empty.parquet: the store's schema for the events table, a folder that
    # must ship (collapsewatch demo copies the store) and whose name is importable
    assert "collapsewatch.sample_runs._schema.events" in importable_folders()
