"""``builtin:PRESET?target_nll=X`` sources: parsed into a spec, bad options named, each setting cached apart."""

import pytest

from collapsewatch.models import BuiltinSpec, WarmStartConfig, load_policy
from collapsewatch.models.builtin import parse_builtin_source
from collapsewatch.trainer.config import load_config


def test_plain_source_is_the_default_spec():
    # no options -> exactly the spec load_policy used before options existed, so the cached tiny-0 stays valid
    assert parse_builtin_source("builtin:tiny") == BuiltinSpec()
    assert parse_builtin_source("builtin:small", seed=3) == BuiltinSpec(preset="small", seed=3)
    assert parse_builtin_source("builtin:tiny").dir_name() == "tiny-0"


def test_target_nll_option_sets_the_warm_start_target():
    spec = parse_builtin_source("builtin:tiny?target_nll=0.6")
    # only the stopping loss changes: steps, lr, batch size keep WarmStartConfig's defaults (600, None, 8)
    assert spec.warm_start == WarmStartConfig(target_nll=0.6)
    assert spec.preset == "tiny" and spec.seed == 0
    assert parse_builtin_source("builtin:tiny?target_nll=1").warm_start.target_nll == 1.0


def test_cache_key_differs_per_target_and_is_stable():
    light = parse_builtin_source("builtin:tiny?target_nll=0.6").dir_name()
    lighter = parse_builtin_source("builtin:tiny?target_nll=1.0").dir_name()
    # "tiny-0-" + 8 hex digits of the spec's digest; the default spec alone keeps the bare "tiny-0"
    assert light.startswith("tiny-0-") and len(light) == len("tiny-0-") + 8
    assert len({light, lighter, "tiny-0"}) == 3
    assert parse_builtin_source("builtin:tiny?target_nll=0.6").dir_name() == light  # same spec, same directory
    # "0.2" is the default target: the same spec and the same cache entry as plain builtin:tiny
    assert parse_builtin_source("builtin:tiny?target_nll=0.2").dir_name() == "tiny-0"


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("builtin:tiny?target_nll=abc", "target_nll must be a finite number >= 0, got 'abc'"),
        ("builtin:tiny?target_nll=-0.5", "target_nll must be a finite number >= 0, got '-0.5'"),
        ("builtin:tiny?target_nll=nan", "target_nll must be a finite number >= 0"),
        ("builtin:tiny?target_nll=inf", "target_nll must be a finite number >= 0"),
        ("builtin:tiny?target_nll=", "target_nll must be a finite number >= 0, got ''"),
        ("builtin:tiny?lr=0.1", "unknown option 'lr'; known: target_nll"),
        ("builtin:tiny?target_nll", "option target_nll needs a value (target_nll=VALUE)"),
        ("builtin:tiny?target_nll=0.5&target_nll=0.6", "option target_nll given twice"),
        ("builtin:huge?target_nll=0.5", "unknown built-in preset 'huge'"),
    ],
)
def test_bad_options_are_named(source, named):
    with pytest.raises(ValueError) as e:
        parse_builtin_source(source)
    assert named in str(e.value) and repr(source) in str(e.value)
    # the trainer config rejects it up front, naming the field and the option
    with pytest.raises(ValueError) as e:
        load_config(model=source)
    assert str(e.value).startswith("model: ") and named in str(e.value)


def test_config_accepts_the_option_and_load_policy_parses_it():
    assert load_config(model="builtin:tiny?target_nll=0.6").model == "builtin:tiny?target_nll=0.6"
    # load_policy goes through the same parser: the bad value fails before any build starts
    with pytest.raises(ValueError, match="target_nll must be a finite number"):
        load_policy("builtin:tiny?target_nll=-1")


def test_shipped_natural_grid_validates_with_the_option():
    # lab/natural.toml is the grid behind docs/lab/detectors-evaluation.md's "A lighter warm start" table: every run is checked as
    # a TrainConfig (so its model option is parsed) and the names are those the table reports
    from pathlib import Path

    from collapsewatch.lab.grid import load_grid

    runs = load_grid(Path(__file__).parents[2] / "lab" / "natural.toml")
    names = {r.name for r in runs}
    # 0.6: 4 seeds × (undrilled, isdd, lld) = 12; 0.4: 2 × 3 = 6; 0.2 undrilled: 2; 0.6 and 0.4 at 8 × 8, 0.4 at 8 × 8
    # and τ 1.3: 2 × 3 each = 18 -> 38
    assert len(runs) == 38
    assert {"isdd-grpo-nll06-s3", "lld-grpo-nll04-s1", "healthy-grpo-nll02-s0", "lld-grpo-nll06-8x8-s1", "lld-grpo-nll04-8x8-s0"} <= names
    models = {r.fields.get("model", "builtin:tiny") for r in runs}
    assert models == {"builtin:tiny", "builtin:tiny?target_nll=0.4", "builtin:tiny?target_nll=0.6"}
