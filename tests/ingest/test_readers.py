"""The ingest formats' one contract: every module in ``FORMATS`` declares all of :class:`Reader` (no name checks in
the registry: what a format does differently is one of these globals)."""

from __future__ import annotations

from types import ModuleType

from collapsewatch.ingest import (
    FORMATS,
    console,
    csv_table,
    json_columns,
    jsonl,
    log_history,
    tensorboard,
    trainer_state,
    wandb_run,
)
from collapsewatch.ingest.records import Reader

DECLARED = [name for name in Reader.__annotations__] + ["sniff", "read"]


def missing(module: ModuleType) -> list[str]:
    return [name for name in DECLARED if not hasattr(module, name)]


def test_every_format_declares_the_whole_reader():
    assert set(DECLARED) == {"NAME", "GROWS", "SNIFF_FORCED", "Parser", "Snapshot", "sniff", "read"}
    for name, reader in FORMATS.items():
        assert reader.NAME == name and not missing(reader), (name, missing(reader))
        assert callable(reader.sniff) and callable(reader.read)
        if reader.GROWS:  # --follow feeds a growing log's new lines to its parser
            assert reader.Parser is not None and callable(reader.Parser().feed), name
        if reader.Parser is not None:  # ingest_file adds what the parser left out to the account
            assert isinstance(reader.Parser().notes(), list), name


def test_the_flags_say_what_the_name_checks_said():
    # before the protocol: a forced format was sniffed when its name was jsonl, console, trainer_state or log_history; a parser's
    # notes were read for console, wandb, swanlab and clearml (jsonl's parser now reports none); Snapshot was looked up.
    # csv and json_columns (added later) are text formats too: forced, they are still sniffed
    assert {n for n, r in FORMATS.items() if r.SNIFF_FORCED} == {jsonl.NAME, console.NAME, trainer_state.NAME,
                                                                 log_history.NAME, csv_table.NAME, json_columns.NAME}
    assert {n for n, r in FORMATS.items() if r.Snapshot is not None} == {tensorboard.NAME, wandb_run.NAME}
    assert {n for n, r in FORMATS.items() if r.GROWS} == {jsonl.NAME, console.NAME}


def test_a_module_without_a_declaration_is_found():
    bare = ModuleType("bare")
    bare.NAME, bare.GROWS = "bare", False  # type: ignore[attr-defined]
    assert missing(bare) == ["SNIFF_FORCED", "Parser", "Snapshot", "sniff", "read"]
