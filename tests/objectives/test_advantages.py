"""Group advantages on hand-built, non-contiguous groups; parity with verl's loop and TRL's formula."""

import math

import pytest
import torch

from collapsewatch.objectives import compute_advantages, group_stats

from .references import verl_grpo_advantage

# Positions:        0    1    2    3    4    5    6    7
REWARDS = torch.tensor([1.0, 0.0, 3.0, 0.5, 4.0, 2.0, 0.5, 5.0])
GROUPS = torch.tensor([7, 3, 7, 9, 3, 7, 9, 11])
# Group 7 at {0, 2, 5}: R = 1, 3, 2 → mean 2, unbiased var = (1 + 1 + 0)/2 = 1 → std 1 → A = −1, +1, 0
# Group 3 at {1, 4}:    R = 0, 4    → mean 2, unbiased var = (4 + 4)/1 = 8 → std 2√2 → A = ∓2/(2√2) = ∓0.707107
#                       (a biased std would be 2 → ∓1: the test tells them apart)
# Group 9 at {3, 6}:    R = 0.5, 0.5 → zero std → A = 0 exactly
# Group 11 at {7}:      one sequence → no baseline → A = 0 (verl would give R = 5)


def test_group_norm_by_hand():
    adv = compute_advantages(REWARDS, GROUPS, "group_norm", eps=0.0)
    s = 1.0 / math.sqrt(2.0)
    expected = torch.tensor([-1.0, -s, 1.0, 0.0, s, 0.0, 0.0, 0.0])
    torch.testing.assert_close(adv, expected)


def test_group_mean_by_hand():
    # Dr. GRPO: R − mean only. Group 7: −1, 1, 0; group 3: −2, +2; groups 9 and 11: 0.
    adv = compute_advantages(REWARDS, GROUPS, "group_mean")
    torch.testing.assert_close(adv, torch.tensor([-1.0, -2.0, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0]))


def test_eps_in_denominator():
    # Group 3 with eps = 0.1: ∓2 / (2√2 + 0.1).
    adv = compute_advantages(REWARDS, GROUPS, eps=0.1)
    assert adv[4].item() == pytest.approx(2.0 / (2.0 * math.sqrt(2.0) + 0.1))


def test_group_stats():
    st = group_stats(REWARDS, GROUPS)
    torch.testing.assert_close(st.mean, torch.tensor([2.0, 2.0, 2.0, 0.5, 2.0, 2.0, 0.5, 5.0]))
    torch.testing.assert_close(st.std, torch.tensor([1.0, 8**0.5, 1.0, 0.0, 8**0.5, 1.0, 0.0, 0.0]))
    assert st.size.tolist() == [3, 2, 3, 2, 2, 3, 2, 1]
    assert st.zero_std.tolist() == [False, False, False, True, False, False, True, True]


def test_zero_std_group_is_exactly_zero_despite_rounding():
    # 0.1 is not representable; the group mean can differ from 0.1 in the last bit, (R − mean)/(0 + eps) would
    # then be a spurious non-zero. The all-equal test makes it exactly 0.
    rewards = torch.tensor([0.1, 0.1, 0.1, 0.7, 0.7, 0.7, 0.7], dtype=torch.float64)
    adv = compute_advantages(rewards, torch.tensor([0, 0, 0, 1, 1, 1, 1]), eps=1e-12)
    assert torch.all(adv == 0)


def test_parity_with_verl_loop():
    # verl's per-sample loop (torch.std, eps 1e-6), on shuffled, non-contiguous groups of size ≥ 2.
    g = torch.Generator().manual_seed(6)
    group_ids = torch.randperm(24, generator=g) % 6  # 6 groups of 4, interleaved
    rewards = torch.randint(0, 3, (24,), generator=g).double() + 0.1 * torch.randn(24, generator=g, dtype=torch.float64)
    expected = verl_grpo_advantage(rewards, group_ids.tolist(), epsilon=1e-6)
    torch.testing.assert_close(compute_advantages(rewards, group_ids, eps=1e-6), expected)
    expected_mean = verl_grpo_advantage(rewards, group_ids.tolist(), norm_adv_by_std_in_grpo=False)
    torch.testing.assert_close(compute_advantages(rewards, group_ids, "group_mean"), expected_mean)


def test_parity_with_trl_formula():
    # TRL 1.16 (_generate_and_score_completions): contiguous groups of num_generations, nanstd (unbiased), eps 1e-4.
    trl_utils = pytest.importorskip("trl.trainer.utils")
    g = torch.Generator().manual_seed(7)
    G = 4
    rewards = torch.rand(5 * G, generator=g)
    mean = rewards.view(-1, G).mean(dim=1).repeat_interleave(G)
    std = trl_utils.nanstd(rewards.view(-1, G), dim=1).repeat_interleave(G)
    expected = (rewards - mean) / (std + 1e-4)
    torch.testing.assert_close(compute_advantages(rewards, torch.arange(5 * G) // G, eps=1e-4), expected)


def test_validation():
    with pytest.raises(ValueError, match="group_norm"):
        compute_advantages(REWARDS, GROUPS, "rloo")
    with pytest.raises(ValueError):
        compute_advantages(REWARDS, GROUPS[:3])


def test_scattered_groups_match_a_per_group_loop():
    # 2,000 sequences in 500 non-contiguous groups: the vectorised result equals a straight per-group loop of the
    # formula (A = (R − mean_G) / (std_G + eps), unbiased std, 0 for a constant group). No timing: values only.
    g = torch.Generator().manual_seed(8)
    rewards = torch.rand(2_000, generator=g, dtype=torch.float64)
    groups = torch.randint(0, 500, (2_000,), generator=g)
    adv = compute_advantages(rewards, groups)
    expected = torch.empty_like(rewards)
    for gid in groups.unique().tolist():
        idx = (groups == gid).nonzero().flatten()
        r = rewards[idx]
        std = r.std() if len(idx) > 1 else torch.tensor(0.0, dtype=torch.float64)
        expected[idx] = 0.0 if len(idx) == 1 or bool((r == r[0]).all()) else (r - r.mean()) / (std + 1e-6)
    torch.testing.assert_close(adv, expected)
