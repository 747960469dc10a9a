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
])
def test_invalid_values_name_the_field(override, needle):
    with pytest.raises(ValueError) as e:
        load_config(overrides=[override])
    assert needle in str(e.value)


def test_cli_fails_in_one_line_before_work(tmp_path):
    for args, needle in ((["--objective", "sapo"], "unknown 'sapo'"),
                         (["--model", str(tmp_path / "nope")], "does not exist"),
                         (["--store", "/proc/forbidden/x"], "cannot be written")):
        p = subprocess.run([sys.executable, "-m", "collapsewatch", "train", "--steps", "1", *args],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert p.returncode == 1, p.stderr
        assert needle in p.stderr and "Traceback" not in p.stderr, p.stderr
