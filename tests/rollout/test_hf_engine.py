"""HF rollout engine on real tiny models: logp parity with a full forward, masks, turns, budgets."""

import itertools

import pytest
import torch

from collapsewatch.env import task_messages
from collapsewatch.rollout import HFRolloutEngine, RolloutConfig, encode_prompt, recompute_logprobs


def _runs(mask_row):
    """[(start, end, is_model)] maximal runs of equal loss-mask value."""
    out, start = [], 0
    for key, grp in itertools.groupby(mask_row):
        n = len(list(grp))
        out.append((start, start + n, bool(key)))
        start += n
    return out


def _replay_matches(batch, tok, tasks_by_id, make_env):
    """Replay every row's model turns in a fresh env: observation runs must be exactly its tokens."""
    for b in range(batch.batch_size):
        start, end = int(batch.response_start[b]), int(batch.attention_mask[b].sum())
        env = make_env(tasks_by_id[batch.task_ids[b]])
        runs = _runs(batch.loss_mask[b, start:end].int().tolist())
        for i, (lo, hi, is_model) in enumerate(runs):
            ids = batch.input_ids[b, start + lo : start + hi].tolist()
            if not is_model:
                continue
            if env.done:
                raise AssertionError(f"row {b}: model tokens after the episode ended")
            res = env.step(tok.decode(ids, skip_special_tokens=False))
            if i + 1 < len(runs):  # the next run must be this observation, token for token
                nlo, nhi, _ = runs[i + 1]
                assert batch.input_ids[b, start + nlo : start + nhi].tolist() == tok.encode(
                    res.observation, add_special_tokens=False
                )
        assert env.reward == batch.rewards[b].item()
        assert (env.n_searches, env.n_invalid, env.n_turns) == tuple(
            int(x[b]) for x in (batch.n_searches, batch.n_invalid, batch.n_turns)
        )


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_logp_rollout_matches_full_forward(builtin, temperature, top_p):
    model, tok, tasks, make_env = builtin
    engine = HFRolloutEngine(model, tok, RolloutConfig(temperature=temperature, top_p=top_p))
    batch = engine.rollout(tasks[:6], make_env, group_size=4)
    assert batch.temperature == (temperature or 1.0)  # greedy is scored at τ = 1
    recomputed = recompute_logprobs(model, batch.input_ids, batch.attention_mask, batch.temperature)
    m = batch.loss_mask.bool()
    assert m.sum() > 100
    assert (recomputed[m] - batch.logp_rollout[m]).abs().max() < 1e-4
    assert (batch.logp_rollout[~m] == 0).all() and (batch.logp_rollout[m] <= 0).all()


def test_masks_cover_exactly_model_and_observation_tokens(builtin):
    model, tok, tasks, make_env = builtin
    batch = HFRolloutEngine(model, tok).rollout(tasks[:8], make_env, group_size=4)
    B, L = batch.input_ids.shape
    assert B == 32 and batch.group_ids.tolist() == [g for g in range(8) for _ in range(4)]
    pos = torch.arange(L)[None, :]
    in_response = (pos >= batch.response_start[:, None]) & batch.attention_mask.bool()
    # every response token is either model-written or observation, never both; nothing outside the response
    assert torch.equal(batch.loss_mask + batch.obs_mask, in_response.float())
    assert torch.equal(batch.turn_ids >= 0, in_response)
    assert [len(p) for p in batch.prompt_ids] == batch.response_start.tolist()
    for b in range(B):  # the prompt is what the chat template gives, left-aligned
        p = batch.response_start[b]
        assert batch.input_ids[b, :p].tolist() == batch.prompt_ids[b]
    assert batch.prompt_ids[0] == encode_prompt(tok, task_messages(tasks[0]))
    # the warm-started policy searches, so information blocks occur and are masked out
    assert batch.n_searches.sum() > 0 and batch.obs_mask.sum() > 0
    _replay_matches(batch, tok, {t.id: t for t in tasks}, make_env)


def test_turn_ids_count_model_turns(builtin):
    model, tok, tasks, make_env = builtin
    batch = HFRolloutEngine(model, tok).rollout(tasks[:4], make_env, group_size=4)
    for b in range(batch.batch_size):
        model_turns = batch.turn_ids[b][batch.loss_mask[b].bool()].unique().tolist()
        assert model_turns == list(range(int(batch.n_turns[b])))
        # an observation carries the id of the model turn that asked for it: never a new id
        obs_turns = set(batch.turn_ids[b][batch.obs_mask[b].bool()].tolist())
        assert obs_turns <= set(model_turns)


def test_turns_end_at_stop_tags_and_budgets_hold(random_policy):
    model, tok, tasks, make_env = random_policy
    cfg = RolloutConfig(max_turn_tokens=12, max_response_tokens=60)
    batch = HFRolloutEngine(model, tok, cfg).rollout(tasks[:4], make_env, group_size=2)
    assert (batch.response_lengths() <= 60).all()
    stops = {tok.convert_tokens_to_ids("</search>"), tok.convert_tokens_to_ids("</answer>"), tok.eos_token_id}
    for b in range(batch.batch_size):
        start, end = int(batch.response_start[b]), int(batch.attention_mask[b].sum())
        for lo, hi, is_model in _runs(batch.loss_mask[b, start:end].int().tolist()):
            if is_model:
                turn = batch.input_ids[b, start + lo : start + hi].tolist()
                # a turn ends on its first stop token, or is cut at 12 tokens, or by the response budget
                assert not stops & set(turn[:-1])
                assert turn[-1] in stops or len(turn) == 12 or end - start == 60 or batch.truncated[b]
    # a random model rambles: with 12-token turns and corrective messages, 60 tokens run out
    assert batch.truncated.any()
    _replay_matches(batch, tok, {t.id: t for t in tasks}, make_env)


def test_greedy_rollout_is_deterministic(builtin):
    model, tok, tasks, make_env = builtin
    engine = HFRolloutEngine(model, tok, RolloutConfig(temperature=0.0))
    a = engine.rollout(tasks[:3], make_env, group_size=2)
    b = engine.rollout(tasks[:3], make_env, group_size=2)
    assert torch.equal(a.input_ids, b.input_ids) and a.texts == b.texts
    assert torch.equal(a.input_ids[0], a.input_ids[1])  # greedy: the whole group is one response


def test_micro_batching_gives_the_same_greedy_rollout(builtin):
    model, tok, tasks, make_env = builtin
    whole = HFRolloutEngine(model, tok, RolloutConfig(temperature=0.0)).rollout(tasks[:4], make_env, 1)
    split = HFRolloutEngine(model, tok, RolloutConfig(temperature=0.0, micro_batch=3)).rollout(tasks[:4], make_env, 1)
    assert whole.texts == split.texts and torch.allclose(whole.logp_rollout, split.logp_rollout, atol=1e-4)


def test_rollout_restores_training_mode_and_rejects_bad_input(random_policy):
    model, tok, tasks, make_env = random_policy
    model.train()
    HFRolloutEngine(model, tok, RolloutConfig(max_response_tokens=16)).rollout(tasks[:1], make_env, 1)
    assert model.training
    model.eval()
    with pytest.raises(ValueError, match="group_size"):
        HFRolloutEngine(model, tok).rollout(tasks[:1], make_env, 0)
    with pytest.raises(ValueError, match="temperature"):
        RolloutConfig(temperature=-1.0)


def test_anchors_and_turn_rewards_replay_the_env(builtin):
    """GiGPO's inputs: each turn's anchor is what the env showed before it (the question, then the observation
    that answered the previous turn), and each turn's reward is the env's answer to it — checked by replaying
    every row's model turns in a fresh env."""
    model, tok, tasks, make_env = builtin
    batch = HFRolloutEngine(model, tok).rollout(tasks[:4], make_env, group_size=4)
    by_id = {t.id: t for t in tasks[:4]}
    for b in range(batch.batch_size):
        task, n = by_id[batch.task_ids[b]], int(batch.n_turns[b])
        assert len(batch.anchors[b]) == len(batch.turn_rewards[b]) == n
        env, seen = make_env(task), task.question
        start = int(batch.response_start[b])
        for k in range(n):
            assert batch.anchors[b][k] == seen
            ids = batch.input_ids[b][start:][batch.loss_mask[b][start:].bool() & (batch.turn_ids[b][start:] == k)]
            if k == n - 1 and bool(batch.truncated[b]) and batch.turn_rewards[b][k] == 0.0:
                break  # a turn cut at the token budget never reached the env
            res = env.step(tok.decode(ids.tolist(), skip_special_tokens=False))
            assert batch.turn_rewards[b][k] == res.reward
            seen = res.observation
        assert sum(batch.turn_rewards[b]) == batch.rewards[b].item()
    # the anchors do repeat inside groups (all turn-0s share the question; searches that got the same passages)
    pairs = [(int(batch.group_ids[b]), a) for b in range(batch.batch_size) for a in batch.anchors[b]]
    assert len(set(pairs)) < len(pairs)
