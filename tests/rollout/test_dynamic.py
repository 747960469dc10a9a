"""Dynamic sampling (rollout/dynamic.py) on batches built by the engine's own ``collate``, rewards chosen by hand."""

from __future__ import annotations

import pytest
import torch

from collapsewatch.rollout.batch import RolloutBatch, SequenceBuilder, collate, concat_batches, select_rows
from collapsewatch.rollout.dynamic import dynamic_rollout

PAD = 0


def _batch(groups: list[list[float]], n_tokens: int) -> RolloutBatch:
    """One row per reward; every response is one model turn of ``n_tokens`` tokens (id 7, log-prob −0.5) after a
    2-token prompt, so batches of different ``n_tokens`` have different widths L = 2 + n_tokens."""
    seqs = []
    for g, rewards in enumerate(groups):
        for r in rewards:
            s = SequenceBuilder(prompt_ids=[1, 2], group_id=g, task_id=f"q{g}")
            s.add_model_turn([7] * n_tokens, [-0.5] * n_tokens)
            s.reward, s.done = r, True
            seqs.append(s)
    return collate(seqs, [f"{r}" for rs in groups for r in rs], PAD, 1.0)


def _tries(*batches: RolloutBatch):
    it = iter(batches)
    return lambda: next(it)


def test_keeps_unequal_groups_across_tries_and_counts_what_it_did():
    # 2 groups of 2 wanted, ≤ 3 tries. try 1: [1, 1] all equal, [0, 1] kept -> 1 group, 1 filtered;
    # try 2: [0, 0], [1, 1] both equal -> 2 more filtered; try 3 (last): [1, 0] kept -> 2 groups; its [0, 0] is
    # left out -> 4 filtered. Resampled = (3 − 1) × 2 groups = 4.
    tries = _tries(_batch([[1, 1], [0, 1]], 3), _batch([[0, 0], [1, 1]], 1), _batch([[1, 0], [0, 0]], 5))
    out, stats = dynamic_rollout(tries, n_groups=2, max_tries=3, pad_id=PAD)
    assert (stats.tries, stats.resampled_groups, stats.filtered_groups) == (3, 4, 4)
    assert out.rewards.tolist() == [0, 1, 1, 0]
    assert out.group_ids.tolist() == [0, 0, 1, 1]  # renumbered in the order kept
    assert out.task_ids == ["q1", "q1", "q0", "q0"] and out.texts == ["0", "1", "1", "0"]
    # widths 5 (try 1) and 7 (try 3) -> L = 7; try 1's rows are right-padded: pad id, turn id −1, masks 0
    assert out.input_ids.shape == (4, 7)
    assert out.input_ids[0].tolist() == [1, 2, 7, 7, 7, PAD, PAD]
    assert out.turn_ids[0].tolist() == [-1, -1, 0, 0, 0, -1, -1]
    assert out.loss_mask[0].tolist() == [0, 0, 1, 1, 1, 0, 0] and out.attention_mask[0, 5:].tolist() == [0, 0]
    assert out.logp_rollout[0].tolist() == [0, 0, -0.5, -0.5, -0.5, 0, 0]


def test_last_try_fills_with_all_equal_groups_in_order():
    # ≤ 2 tries: try 1 keeps [0, 1]; try 2 has no unequal group, so its first all-equal group [0, 0] fills the
    # gap (ARL-Arena's last_try); filtered = 1 (try 1's [1, 1]) + 1 (try 2's [1, 1]) = 2
    tries = _tries(_batch([[1, 1], [0, 1]], 2), _batch([[0, 0], [1, 1]], 2))
    out, stats = dynamic_rollout(tries, n_groups=2, max_tries=2, pad_id=PAD)
    assert (stats.tries, stats.resampled_groups, stats.filtered_groups) == (2, 2, 2)
    assert out.rewards.tolist() == [0, 1, 0, 0] and out.group_ids.tolist() == [0, 0, 1, 1]


def test_a_first_rollout_with_enough_signal_is_kept_whole():
    first = _batch([[1, 0], [0, 1], [1, 1]], 2)  # 3 groups rolled, 2 wanted: the first 2 unequal ones
    out, stats = dynamic_rollout(_tries(first), n_groups=2, max_tries=3, pad_id=PAD)
    assert (stats.tries, stats.resampled_groups, stats.filtered_groups) == (1, 0, 1)
    assert torch.equal(out.input_ids, first.input_ids[:4]) and out.rewards.tolist() == [1, 0, 0, 1]


def test_nan_rewards_follow_the_advantages_rule():
    # a group with one scored reward has no signal (batch.group_zero_std): [nan, 1] is filtered, [nan, 0, 1] kept
    out, stats = dynamic_rollout(_tries(_batch([[float("nan"), 1], [float("nan"), 0, 1]], 1)), n_groups=1,
                                 max_tries=1, pad_id=PAD)
    assert stats.filtered_groups == 1 and out.rewards[1:].tolist() == [0, 1]


def test_batch_helpers_name_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        concat_batches([], PAD)
    a, b = _batch([[1, 0]], 1), _batch([[1, 0]], 1)
    b.temperature = 0.7
    with pytest.raises(ValueError, match="temperatures"):
        concat_batches([a, b], PAD)
    with pytest.raises(ValueError, match="max_tries"):
        dynamic_rollout(_tries(a), n_groups=1, max_tries=0, pad_id=PAD)
    assert select_rows(a, [1]).rewards.tolist() == [0]
