"""``collapsewatch ingest --map KEY=COLUMN``, through the real CLI on a real store: a log that names its metrics its
own way (data/rfs-tracking.csv: the first five rows of a public run's tracking CSV — ``reward_avg``, ``entropy_avg``,
``avg_response_len``, which the key table does not know) fills the catalogue's columns without being rewritten; a
map wins over the file's own key; a key the file lacks is said and the rest ingested; bad maps are usage errors
(exit 2, one line each, nothing written); ``--follow`` takes the maps too; the run's config records them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collapsewatch import connect
from collapsewatch.cli import app
from collapsewatch.ingest import MapError, Tail, ingest_file

RFS = Path(__file__).resolve().parent / "data" / "rfs-tracking.csv"
MAPS = ("--map", "reward_avg=reward_mean", "--map", "entropy_avg=entropy_mean",
        "--map", "avg_response_len=response_length_mean")


def _cli(*args: str, code: int = 0):
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result


def _sql(store: Path, query: str) -> list[tuple]:
    return connect(store).execute(query).fetchall()


def test_maps_fill_the_catalogue_columns_from_the_logs_own_names(tmp_path):
    store = tmp_path / "st"
    out = _cli("ingest", str(store), str(RFS), "--run", "rfs", "--no-detect", *MAPS).stdout
    # the three mapped keys fill their columns; `loss` (a catalogue name) and `eval_acc` (an evaluation key: at step
    # 1 only) fill loss and eval_score as without maps; catalogue order
    assert "catalogue columns filled: entropy_mean, reward_mean, response_length_mean, loss, eval_score\n" in out
    assert ("--map reward_avg=reward_mean: filled reward_mean at 5 step(s)\n"
            "--map entropy_avg=entropy_mean: filled entropy_mean at 5 step(s)\n"
            "--map avg_response_len=response_length_mean: filled response_length_mean at 5 step(s)\n") in out
    assert "no key filled reward_mean" not in out
    # the CSV's columns, row by row (reward_avg, entropy_avg, avg_response_len)
    assert _sql(store, "SELECT step, reward_mean, entropy_mean, response_length_mean FROM steps ORDER BY step") == [
        (1, 0.0, 1.329654, 6.375), (2, 0.125, 1.235328, 6.625), (3, 0.25, 1.200351, 25.625),
        (4, 0.375, 0.317999, 82.25), (5, 0.25, 0.372649, 357.625)]
    # every key is still kept under its own name
    assert _sql(store, "SELECT step, value FROM scalars WHERE key = 'reward_avg' ORDER BY step")[1] == (2, 0.125)
    # the run's config says how it was read
    config = json.loads(_sql(store, "SELECT config FROM runs WHERE run = 'rfs'")[0][0])
    assert config["format"] == "csv" and config["maps"] == {
        "reward_avg": "reward_mean", "entropy_avg": "entropy_mean", "avg_response_len": "response_length_mean"}


def test_without_maps_the_same_log_fills_no_reward_and_the_hint_names_map(tmp_path):
    store = tmp_path / "st"
    out = _cli("ingest", str(store), str(RFS), "--run", "rfs", "--no-detect").stdout
    assert "map the reward's key with --map KEY=reward_mean" in out and "avg_response_len" in out
    assert _sql(store, "SELECT count(reward_mean) FROM steps") == [(0,)]
    assert "maps" not in json.loads(_sql(store, "SELECT config FROM runs")[0][0])


def test_the_users_map_wins_over_the_files_own_key(tmp_path):
    # TRL's `reward` fills reward_mean by the key table; the user says reward_avg is the reward to judge
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"step": s, "reward": 0.5, "reward_avg": s / 4}) + "\n" for s in (1, 2, 3)))
    store = tmp_path / "st"
    out = _cli("ingest", str(store), str(log), "--run", "r", "--no-detect", "--map", "reward_avg=reward_mean").stdout
    assert ("--map reward_avg=reward_mean: filled reward_mean at 3 step(s), replacing what 'reward' gave it at 3 "
            "(your map wins)\n") in out
    # reward_avg = step / 4: 0.25, 0.5, 0.75 (not reward's 0.5); `reward` still kept in scalars
    assert _sql(store, "SELECT step, reward_mean FROM steps ORDER BY step") == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert _sql(store, "SELECT count(*) FROM scalars WHERE key = 'reward'") == [(3,)]


def test_a_map_onto_a_column_the_log_writes_under_its_own_name_says_it_is_not_applied(tmp_path):
    # the CSV logs `loss` itself: the store keeps it under that name and the steps view reads it as loss
    store = tmp_path / "st"
    out = _cli("ingest", str(store), str(RFS), "--run", "rfs", "--no-detect", "--map", "adv_std=loss").stdout
    assert ("--map adv_std=loss: not applied at the 5 step(s) that also log 'loss' itself: the store keeps every key "
            "under its own name, and the steps view reads that one as loss\n") in out
    assert _sql(store, "SELECT loss FROM steps WHERE step = 3") == [(7.695891,)]  # the CSV's loss, not adv_std


def test_a_mapped_key_the_log_lacks_is_said_and_the_rest_ingested(tmp_path):
    store = tmp_path / "st"
    out = _cli("ingest", str(store), str(RFS), "--run", "rfs", "--no-detect", "--map", "reward_avgg=reward_mean",
               "--map", "entropy_avg=entropy_mean").stdout
    assert ("--map reward_avgg=reward_mean: the file logs no key 'reward_avgg', nothing mapped; did you mean "
            "'reward_avg'?\n") in out
    assert _sql(store, "SELECT count(entropy_mean), count(reward_mean) FROM steps") == [(5, 0)]


@pytest.mark.parametrize(("maps", "lines"), [
    (["foo"], ["--map 'foo' is not KEY=COLUMN (e.g. --map reward_avg=reward_mean)"]),
    (["=reward_mean", "x="], ["--map '=reward_mean' is not KEY=COLUMN (e.g. --map reward_avg=reward_mean)",
                              "--map 'x=' is not KEY=COLUMN (e.g. --map reward_avg=reward_mean)"]),
    (["reward_avg=rewrd_mean"], ["--map 'reward_avg=rewrd_mean': 'rewrd_mean' is not a catalogue step column; did "
                                 "you mean 'reward_mean'?"]),
    (["x=on_policy"], ["--map 'x=on_policy': 'on_policy' is a BOOLEAN column the monitor measures itself, not one a "
                       "logged number fills"]),
    (["reward_avg=reward_mean", "adv_avg=reward_mean", "entropy_avg=entropy_mean"],
     ["--map 'reward_avg=reward_mean' and --map 'adv_avg=reward_mean' both fill 'reward_mean': keep one"]),
    (["reward_avg=reward_mean", "reward_avg=reward_std"],
     ["--map 'reward_avg=reward_mean' and --map 'reward_avg=reward_std' both map 'reward_avg': keep one"]),
])
@pytest.mark.parametrize("follow", [False, True])
def test_bad_maps_are_usage_errors_that_write_nothing(tmp_path, maps, lines, follow):
    store = tmp_path / "st"
    args = [a for m in maps for a in ("--map", m)] + (["--follow"] if follow else [])
    result = _cli("ingest", str(store), str(RFS), "--run", "rfs", *args, code=2)
    assert result.stderr == "".join(f"error: {line}\n" for line in lines)
    assert result.stdout == "" and not store.exists()


def test_the_library_refuses_bad_maps_before_writing(tmp_path):
    store = tmp_path / "st"
    for start in (lambda: ingest_file(store, RFS, "rfs", maps={"reward_avg": "reward"}),
                  lambda: Tail(store, RFS, "rfs", maps={"reward_avg": "reward"})):
        with pytest.raises(MapError, match="'reward' is not a catalogue step column"):
            start()
    assert not store.exists()


@pytest.mark.parametrize("name", ["live.jsonl", "live.csv"])  # a growing text log; a file re-read whole
def test_follow_takes_the_maps(tmp_path, name):
    log, store = tmp_path / name, tmp_path / "st"
    rows = [{"step": s, "reward_avg": s / 8} for s in (1, 2, 3)]
    text = (lambda rs: "".join(json.dumps(r) + "\n" for r in rs)) if name.endswith("jsonl") else (
        lambda rs: "step,reward_avg\n" + "".join(f"{r['step']},{r['reward_avg']}\n" for r in rs))
    log.write_text(text(rows[:2]))
    tail = Tail(store, log, "live", maps={"reward_avg": "reward_mean"})
    tail.poll()
    log.write_text(text(rows))
    tail.poll()
    done = tail.close()
    # reward_avg = step / 8: 0.125, 0.25, 0.375
    assert _sql(store, "SELECT step, reward_mean FROM steps ORDER BY step") == [(1, 0.125), (2, 0.25), (3, 0.375)]
    assert "--map reward_avg=reward_mean: filled reward_mean at 3 step(s)" in done.message(store, "live")


def test_a_step_logged_in_several_rows_counts_once(tmp_path):
    # each step logged in two rows (a trainer's train and eval logs at one step), reward_avg in both
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"step": s, "reward_avg": v}) + "\n" for s in (1, 2) for v in (0.25, 0.5)))
    store = tmp_path / "st"
    out = _cli("ingest", str(store), str(log), "--run", "r", "--no-detect", "--map", "reward_avg=reward_mean").stdout
    assert "--map reward_avg=reward_mean: filled reward_mean at 2 step(s)\n" in out
    # a step column logged twice keeps the largest value (catalogue.merge_logged): 0.5
    assert _sql(store, "SELECT step, reward_mean FROM steps ORDER BY step") == [(1, 0.5), (2, 0.5)]
