"""TrainConfig: TOML + --set overrides, and failures that name the field before any work starts."""

import subprocess
import sys

import pytest

from collapsewatch.trainer.config import build_params, clip_settings, load_config


def test_toml_then_set_then_kwargs(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('objective = "llds"\nsteps = 7\n[objective_params]\nlam = 0.5\n')
    cfg = load_config(f, ["steps=9", "objective_params.eps_high=0.3", "stop_on=['accelerated_collapse']"],
                      run="x")
    assert (cfg.objective, cfg.steps, cfg.run_name, cfg.stop_on) == ("llds", 9, "x", ("accelerated_collapse",))
    params = build_params(cfg.objective, cfg.objective_params)
    assert params.lam == 0.5 and params.base.eps_high == 0.3  # GRPO-clip keys go to the base objective
    assert clip_settings(params) == (0.2, 0.3, None)


@pytest.mark.parametrize("override, needle", [
    ("objective=sapo", "objective: unknown 'sapo'"),
    ("objective_params.bogus=1", "grpo has no ['bogus']"),
    ("group_size=1", "group_size"),
    ("mini_batches=0", "mini_batches: must be >= 1"),
    ("aggregation=dapo", "aggregation: unknown 'dapo'"),
    ("nonsense=3", "unknown config field(s) ['nonsense']"),
    ("dtype=float8", "dtype"),
    ("lr=-1e-4", "lr: must be > 0, got -0.0001"),
    ("temperature=0", "temperature: must be > 0"),
    ("max_grad_norm=nan", "max_grad_norm: must be > 0, got nan"),
    ("top_p=1.5", "top_p: must be in (0, 1], got 1.5"),
    ("dynamic_sampling=-1", "dynamic_sampling: must be >= 0"),
    ("advantages=gae", "advantages: unknown 'gae'; known: group_norm, group_mean, gigpo"),
    ("advantage_params.gamma=0.9", "advantage_params: group_norm takes none"),
])
def test_invalid_values_name_the_field(override, needle):
    with pytest.raises(ValueError) as e:
        load_config(overrides=[override])
    assert needle in str(e.value)


def test_cli_fails_in_one_line_before_work(tmp_path, capsys, monkeypatch):
    # one real `python -m collapsewatch train` process (≈ 10 CPU s: it imports the trainer), the other cases through
    # the same top-level CLI in this process: `collapsewatch.cli.main` is all that process runs
    p = subprocess.run([sys.executable, "-m", "collapsewatch", "train", "--steps", "1", "--objective", "sapo"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 1 and "unknown 'sapo'" in p.stderr and "Traceback" not in p.stderr, p.stderr
    from collapsewatch.cli import main

    monkeypatch.chdir(tmp_path)
    for args, needle in ((["--model", str(tmp_path / "nope")], "does not exist"),
                         (["--store", "/proc/forbidden/x"], "cannot be written"),
                         (["--on-phase", "colapse=stop"], "unknown phase or detector 'colapse'")):
        with pytest.raises(SystemExit) as e:
            main(["train", "--steps", "1", *args])
        err = capsys.readouterr().err
        assert e.value.code == 1 and needle in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("override, needle", [
    ("lr=abc", "lr: expected a number, got 'abc'"),  # was a raw TypeError ('>' between str and int)
    ("temperature=hot", "temperature: expected a number, got 'hot'"),
    ("steps=2.5", "steps: expected an integer, got 2.5"),
    ("progress=maybe", "progress: expected true/false"),
    ("progress=2", "progress: expected true/false"),
    ("monitor='sometimes'", "monitor: expected true/false"),
    ("objective_params=3", "objective_params: expected a table"),
    ("stop_on=accelerated_colapse", "stop_on: unknown phase(s) ['accelerated_colapse']"),  # the typo never fired
])
def test_wrong_types_and_unknown_phases_name_the_field(override, needle):
    with pytest.raises(ValueError) as e:
        load_config(overrides=[override])
    assert needle in str(e.value)


@pytest.mark.parametrize("text, expected", [
    ("no", False), ("No", False), ("off", False), ("0", False), ("false", False),  # "no" read as true before
    ("yes", True), ("ON", True), ("1", True), ("true", True),
])
def test_booleans_parse_strictly(text, expected):
    assert load_config(overrides=[f"progress={text}"]).progress is expected


def test_stop_on_takes_phases_and_detectors_from_the_detectors_registry():
    from collapsewatch.detectors import PHASES
    from collapsewatch.detectors.suite import REGISTRY
    from collapsewatch.trainer.config import stop_on_names

    # every registered detector and each of its phases is a valid name, and nothing else is
    assert set(PHASES) == set(REGISTRY)
    expected = set(REGISTRY) | {p for det in REGISTRY.values() for p in det.phases}
    assert set(stop_on_names()) == expected and {"lld", "accelerated_collapse", "drift", "starvation"} <= expected
    cfg = load_config(stop_on=("accelerated_collapse", "grad"))
    assert cfg.stop_on == ("accelerated_collapse", "grad")
    assert load_config(overrides=["run=123", "lr=1"]).run == "123"  # a str field keeps the text; 1 is a float lr
    assert load_config(overrides=["lr=1"]).lr == 1.0 and isinstance(load_config(overrides=["lr=1"]).lr, float)


def test_cli_misuse_is_one_line(tmp_path, capsys):
    from collapsewatch.trainer.cli import main

    for args, needle in ((["--stop-on", "colapse"], "stop_on: unknown phase(s) ['colapse']"),
                         (["--set", "lr=abc"], "lr: expected a number, got 'abc'"),
                         (["--set", "temperature=hot"], "temperature: expected a number")):
        assert main(["--steps", "1", "--store", str(tmp_path / "s"), *args]) == 1
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1, err


def test_gigpo_settings_are_checked_and_parsed():
    cfg = load_config(overrides=["advantages=gigpo", "advantage_params.gamma=0.9", "advantage_params.std_norm=false"])
    assert cfg.advantage_params == {"gamma": 0.9, "std_norm": False}
    with pytest.raises(ValueError, match=r"advantage_params: gigpo has no \['lam'\]"):
        load_config(overrides=["advantages=gigpo", "advantage_params.lam=0.9"])
    with pytest.raises(ValueError, match="advantage_params: GiGPO needs 0 <= gamma <= 1"):
        load_config(overrides=["advantages=gigpo", "advantage_params.gamma=2"])


def test_an_object_store_needs_a_checkpoint_dir_for_what_writes_or_reads_a_checkpoint():
    # a URL is no folder: checkpoint_every, --resume and a checkpoint action are refused, naming each (no server
    # is reached: the config is checked before anything starts)
    with pytest.raises(ValueError, match=r"^checkpoint_every, --resume, --on-phase grad=checkpoint: the store "
                                         r"'s3://b/p' is an object store, .* pass --checkpoint-dir DIR"):
        load_config(store="s3://b/p", checkpoint_every=5, resume=True, on_phase=("grad=checkpoint", "grad=stop"))
    cfg = load_config(store="s3://b/p", checkpoint_every=5, checkpoint_dir="ck", on_phase=("grad=checkpoint",))
    assert cfg.checkpoint_dir == "ck"
    assert load_config(store="s3://b/p").checkpoint_every == 0  # only the final checkpoint, skipped: allowed
