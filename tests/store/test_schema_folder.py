"""Readers' typed empty files live in one folder per schema under $COLLAPSEWATCH_CACHE, shared and kept between
processes; nothing is left in the temporary folder (each process used to leave a collapsewatch-schema-* folder)."""

import os
import subprocess
import sys

CODE = ("from collapsewatch.store.segments import schema_file; "
        "print(schema_file(__import__('pathlib').Path('.'), 'sequences'))")


def _reader(cache, tmp) -> str:
    env = {**os.environ, "COLLAPSEWATCH_CACHE": str(cache), "TMPDIR": str(tmp)}
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_two_processes_share_one_schema_folder_and_leave_no_temporary_folder(tmp_path):
    cache, tmp = tmp_path / "cache", tmp_path / "tmp"
    tmp.mkdir()
    first, second = _reader(cache, tmp), _reader(cache, tmp)
    # both processes read the same file, under CACHE/schema/<digest>/_schema/sequences/empty.parquet
    assert first == second
    assert first.startswith(str(cache / "schema")) and first.endswith(os.path.join("sequences", "empty.parquet"))
    assert os.path.getsize(first) > 0
    assert list(tmp.iterdir()) == []


def test_an_unwritable_cache_falls_back_to_a_temporary_folder_removed_at_exit(tmp_path):
    # the cache path is a file, so no folder can be made under it: the reader uses TMPDIR and removes it at exit
    cache, tmp = tmp_path / "not-a-folder", tmp_path / "tmp"
    cache.write_text("x")
    tmp.mkdir()
    path = _reader(cache, tmp)
    assert path.startswith(str(tmp / "collapsewatch-schema-"))
    assert list(tmp.iterdir()) == []


def test_a_damaged_or_swapped_file_in_the_shared_folder_is_rewritten(tmp_path):
    # a reader trusts the shared folder without building the migrations' schemas only while every file is readable,
    # empty and stamped with its own table; here one is cut short and another is a copy of a different table's file
    import shutil

    from collapsewatch.store.writer import _is_template, arrow_schemas

    cache, tmp = tmp_path / "cache", tmp_path / "tmp"
    tmp.mkdir()
    sequences = _reader(cache, tmp)
    schema_dir = os.path.dirname(os.path.dirname(sequences))
    tokens = os.path.join(schema_dir, "tokens", "empty.parquet")
    with open(sequences, "r+b") as f:
        f.truncate(os.path.getsize(sequences) // 2)
    shutil.copyfile(os.path.join(schema_dir, "events", "empty.parquet"), tokens)
    assert not _is_template(sequences, arrow_schemas()["sequences"])
    assert not _is_template(tokens, arrow_schemas()["tokens"])
    assert _reader(cache, tmp) == sequences
    assert _is_template(sequences, arrow_schemas()["sequences"])  # both rewritten whole by the next reader
    assert _is_template(tokens, arrow_schemas()["tokens"])
