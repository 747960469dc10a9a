"""Sampling hooks: top-k / top-p filtering, log-prob recording, stop detection (hand-derived values)."""

import math

import torch

from collapsewatch.rollout import SampleRecorder, TurnStopper, filter_top_k_top_p, stop_token_info


def test_top_p_keeps_the_smallest_prefix_reaching_p():
    logp = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    # mass strictly before each token: [0, 0.5, 0.8, 0.95]; top_p = 0.7 drops tokens whose prefix >= 0.7
    kept = filter_top_k_top_p(logp, top_k=0, top_p=0.7).isfinite()
    assert kept.tolist() == [[True, True, False, False]]
    # top_p = 0.45: the best token alone already holds 0.5 >= 0.45, so only it remains
    assert filter_top_k_top_p(logp, 0, 0.45).isfinite().tolist() == [[True, False, False, False]]
    # order in the vocabulary does not matter: same distribution, shuffled
    shuffled = torch.tensor([[0.15, 0.5, 0.05, 0.3]]).log()
    assert filter_top_k_top_p(shuffled, 0, 0.7).isfinite().tolist() == [[False, True, False, True]]


def test_top_k_and_identity():
    logp = torch.tensor([[0.1, 0.4, 0.2, 0.3]]).log()
    assert filter_top_k_top_p(logp, 2, 1.0).isfinite().tolist() == [[False, True, False, True]]
    assert torch.equal(filter_top_k_top_p(logp, 0, 1.0), logp)


def test_recorder_logp_is_temperature_scaled_and_untruncated():
    # z = [0, ln 3]; at τ = 1 p = [1/4, 3/4]; at τ = 2 z/τ = [0, ln √3], p = [1/(1+√3), √3/(1+√3)]
    z = torch.tensor([[0.0, math.log(3.0)]])
    rec = SampleRecorder(temperature=2.0, top_k=1)
    out = rec(torch.tensor([[7]]), z)
    assert out[0, 0].item() == float("-inf")  # top-k = 1 truncates the returned scores ...
    rec(torch.tensor([[7, 0]]), z)  # ... but token 0 sampled at step 1 is scored untruncated
    logps = rec.finish(torch.tensor([1]))
    expected = [-math.log(1 + math.sqrt(3)), math.log(math.sqrt(3) / (1 + math.sqrt(3)))]
    assert torch.allclose(logps, torch.tensor([expected]), atol=1e-6)


def test_stopper_single_and_multi_token_stop_strings(random_policy):
    _, tok, _, _ = random_policy
    vocab = len(tok)
    single, candidates = stop_token_info(tok, ["</search>", "</answer>"], vocab)
    assert single == tok.convert_tokens_to_ids(["</search>", "</answer>"]) and candidates.numel() == 0
    # "born in" is two tokens ("Ġborn", "Ġin") for this tokenizer: the decode path must find it
    single, candidates = stop_token_info(tok, ["born in"], vocab)
    assert single == [] and candidates[tok.convert_tokens_to_ids("Ġin")]
    context = tok.encode("Question: x", add_special_tokens=False)
    turn = tok.encode(" He was born in Rome", add_special_tokens=False)
    stopper = TurnStopper(len(context), torch.tensor([10, 2]), tok, ["born in"], [tok.eos_token_id], single, candidates)
    hits = []
    for n in range(1, len(turn) + 1):
        ids = torch.tensor([context + turn[:n]] * 2)
        hits.append(stopper(ids, None).tolist())
    in_pos = turn.index(tok.convert_tokens_to_ids("Ġin")) + 1  # new tokens up to and including "Ġin"
    assert stopper.n_new.tolist() == [in_pos, 2]  # row 1 is cut by its budget of 2 tokens first
    assert stopper.hit_stop.tolist() == [True, False]
    assert hits[in_pos - 1] == [True, True] and hits[in_pos - 2] == [False, True]
