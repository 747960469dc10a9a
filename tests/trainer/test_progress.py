"""The trainer's progress line at the end of a default run (mini_batches 2: every other step on-policy, its ratio
and clip fields NULL) shows the last off-policy step's ratio, marked with its step, instead of `—`."""

from __future__ import annotations

from collapsewatch import connect
from collapsewatch.trainer.config import load_config
from collapsewatch.trainer.loop import train
from collapsewatch.trainer.progress import Progress

SMALL = ["prompts_per_rollout=2", "group_size=4", "max_turn_tokens=24", "max_response_tokens=120", "sentinels=0"]


def test_the_progress_line_keeps_the_last_off_policy_ratio_marked_with_its_step(store):
    cfg = load_config(overrides=SMALL, steps=3, store=str(store), run="p", progress=False)
    train(cfg)
    con = connect(store)
    cur = con.execute("SELECT * FROM steps ORDER BY step")
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]  # each step's row: the monitor's `latest`
    assert [r["on_policy"] for r in rows] == [True, False, True]  # the first mini-batch after each rollout
    progress = Progress(cfg, enabled=False)
    first, second, third = (progress.stats(0.5, r) for r in rows)
    assert "r p05(A>0) —  clip lo/hi —/—" in first  # step 0: no off-policy step yet
    step1 = f"r p05(A>0) {rows[1]['ratio_p05_pos']:.3f}  clip lo/hi {rows[1]['clip_low_frac']:.3f}/" \
            f"{rows[1]['clip_high_frac']:.3f}"
    assert second.endswith(step1)  # step 1's own values: no mark
    assert third.endswith(f"{step1} (step 1)")  # step 2 is on-policy (NULL): step 1's, marked (was `—/—`)
