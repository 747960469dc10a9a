"""GiGPO's step-level advantage (objectives/gigpo.py): by hand, and against verl-agent's code (references.py)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from collapsewatch.objectives import GigpoParams, anchor_ids, gigpo_advantages, turn_returns
from tests.objectives import references as ref

# One group of 3 responses (γ = 0.5). Anchor = what the env showed before the turn: "Q" (the question) or "P1"
# (the passages both searches got back).
#   resp 0: turn 0 from Q searches, turn 1 from P1 answers right:  turn rewards [0, 1], R = 1
#   resp 1: turn 0 from Q searches, turn 1 from P1 answers wrong:  turn rewards [0, 0], R = 0
#   resp 2: turn 0 from Q answers right:                           turn rewards [1],    R = 1
# Tokens: resp 0 / 1 = [turn 0, its observation (turn id 0, mask 0), turn 1]; resp 2 = [turn 0, pad, pad].
TURN_REWARDS = [[0.0, 1.0], [0.0, 0.0], [1.0]]
ANCHORS = [["Q", "P1"], ["Q", "P1"], ["Q"]]
REWARDS = torch.tensor([1.0, 0.0, 1.0])
GROUPS = torch.tensor([0, 0, 0])
TURN_IDS = torch.tensor([[0, 0, 1], [0, 0, 1], [0, -1, -1]])


def _adv(**params):
    p = GigpoParams(gamma=0.5, **params)
    return gigpo_advantages(REWARDS, GROUPS, TURN_IDS, turn_returns(TURN_REWARDS, p.gamma), anchor_ids(ANCHORS), p)


def test_returns_and_anchor_ids_by_hand():
    # R^k = Σ_{l≥k} γ^{l−k} r^l: resp 0 [0 + 0.5·1, 1] = [0.5, 1]; resp 1 [0, 0]; resp 2 [1] (0 past its end)
    assert turn_returns(TURN_REWARDS, 0.5).tolist() == [[0.5, 1.0], [0.0, 0.0], [1.0, 0.0]]
    assert anchor_ids(ANCHORS).tolist() == [[0, 1], [0, 1], [0, -1]]


def test_mean_norm_by_hand():
    # episode part over step rows (verl-agent's cross-steps mean): R per row [1, 1, 0, 0, 1] -> mean 0.6;
    #   A^E = [0.4, −0.6, 0.4]
    # step groups: Q = {0.5, 0, 1} mean 0.5 -> A^S [0, −0.5, 0.5]; P1 = {1, 0} mean 0.5 -> [0.5, −0.5]
    # A = A^E + A^S: resp 0 [0.4, 0.4, 0.9]; resp 1 [−1.1, −1.1, −1.1]; resp 2 [0.9, then A^E 0.4 on padding]
    a = _adv(std_norm=False)
    assert a.flatten().tolist() == pytest.approx([0.4, 0.4, 0.9, -1.1, -1.1, -1.1, 0.9, 0.4, 0.4])
    # ω scales only the step part: ω = 0 is the episode advantage alone
    assert _adv(std_norm=False, step_weight=0.0).flatten().tolist() == pytest.approx([0.4] * 3 + [-0.6] * 3 + [0.4] * 3)


def test_mean_std_norm_by_hand():
    # episode: Σ(R − 0.6)² = 3·0.16 + 2·0.36 = 1.2 over 5 rows -> std = √(1.2/4) = √0.3
    # step Q: Σ dev² = 0 + 0.25 + 0.25 = 0.5 -> std √(0.5/2) = 0.5 -> A^S [0, −1, 1]; P1: std √0.5 -> ±√0.5
    se, e = math.sqrt(0.3) + 1e-6, 1e-6
    ae = [0.4 / se, -0.6 / se, 0.4 / se]
    a = _adv()
    expected = [[ae[0] + 0 / (0.5 + e), ae[0] + 0, ae[0] + 0.5 / (math.sqrt(0.5) + e)],
                [ae[1] - 0.5 / (0.5 + e), ae[1] - 0.5 / (0.5 + e), ae[1] - 0.5 / (math.sqrt(0.5) + e)],
                [ae[2] + 0.5 / (0.5 + e), ae[2], ae[2]]]
    assert a.flatten().tolist() == pytest.approx([x for row in expected for x in row], abs=1e-9)


def test_a_group_of_one_row_and_singleton_steps():
    # group 1 holds one response with one turn: the code gives it mean 0 and std 1 -> A^E = R / (1 + ε) = 2/(1+ε)
    # and its only step group has one member -> A^S = 0
    p = GigpoParams(gamma=1.0)
    a = gigpo_advantages(torch.tensor([2.0]), torch.tensor([7]), torch.tensor([[0]]), turn_returns([[2.0]], 1.0),
                         anchor_ids([["Q"]]), p)
    assert a.flatten().tolist() == pytest.approx([2.0 / (1 + 1e-6)])


def _random_rollout(seed: int):
    """Groups of 1–4 responses, 1–3 turns each, anchors drawn from a 3-word vocabulary (so turns of a group
    collide), per-turn rewards from {0, 0.5, 1}; one group is a single one-turn response."""
    rng = random.Random(seed)
    rewards, groups, turn_rewards, anchors = [], [], [], []
    for g in range(4):
        for _ in range(1 if g == 0 else rng.randint(2, 4)):
            n = 1 if g == 0 else rng.randint(1, 3)
            tr = [rng.choice([0.0, 0.5, 1.0]) for _ in range(n)]
            turn_rewards.append(tr)
            anchors.append([f"q{g}"] + [rng.choice(["a", "b", "c"]) for _ in range(n - 1)])
            rewards.append(sum(tr))
            groups.append(g)
    return rewards, groups, turn_rewards, anchors


@pytest.mark.parametrize("mode", ["mean_norm", "mean_std_norm"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_with_verl_agents_gigpo(seed, mode):
    rewards, groups, turn_rewards, anchors = _random_rollout(seed)
    gamma, w = 0.95, 0.7
    # verl-agent's layout: one row per (response, turn), the episode reward on the row's (one) token
    rows = [(i, k) for i, tr in enumerate(turn_rewards) for k in range(len(tr))]
    traj = np.array([i for i, _ in rows])
    step_rewards = ref.gigpo_step_discounted_returns([turn_rewards[i][k] for i, k in rows], traj, gamma)
    expected, _ = ref.gigpo_outcome_advantage(
        token_level_rewards=torch.tensor([[rewards[i]] for i, _ in rows]), step_rewards=step_rewards,
        response_mask=torch.ones(len(rows), 1), anchor_obs=np.array([anchors[i][k] for i, k in rows], dtype=object),
        index=np.array([groups[i] for i, _ in rows]), traj_index=traj, step_advantage_w=w, mode=mode)
    # ours: one row per response, one token per turn
    K = max(len(tr) for tr in turn_rewards)
    turn_ids = torch.tensor([list(range(len(tr))) + [-1] * (K - len(tr)) for tr in turn_rewards])
    p = GigpoParams(gamma=gamma, step_weight=w, std_norm=mode == "mean_std_norm")
    returns = turn_returns(turn_rewards, gamma)
    assert [float(returns[i, k]) for i, k in rows] == pytest.approx(step_rewards.tolist(), abs=1e-6)
    a = gigpo_advantages(torch.tensor(rewards), torch.tensor(groups), turn_ids, returns, anchor_ids(anchors), p)
    assert [float(a[i, k]) for i, k in rows] == pytest.approx(expected[:, 0].tolist(), abs=1e-5)
    shared = len({(groups[i], anchors[i][k]) for i, k in rows}) < len(rows)
    assert shared  # the draw has step groups of more than one turn


def test_bad_shapes_and_params_are_named():
    with pytest.raises(ValueError, match="disagree"):
        gigpo_advantages(REWARDS, GROUPS, TURN_IDS, torch.zeros(3, 5), anchor_ids(ANCHORS), GigpoParams())
    with pytest.raises(ValueError, match="gamma"):
        GigpoParams(gamma=1.5)
