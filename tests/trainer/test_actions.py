"""--on-phase: rule parsing and validation, and the actions on a real model, optimizer and real detector events."""

from __future__ import annotations

import functools
import random

import pytest
import torch
from fixtures.synthetic_steps import GATE_30, make_run

from collapsewatch.detectors import DetectorConfig, detect_frame
from collapsewatch.trainer.actions import PhaseActions, parse_rule
from collapsewatch.trainer.config import TrainConfig, load_config


@functools.cache
def _event(scenario: str, detector: str):
    frame = make_run(scenario, seed=0).frame  # its reward falls for fewer than the default gate's 90 steps
    return next(e for e in detect_frame(frame, DetectorConfig(severity=GATE_30)) if e.detector == detector)


def test_rule_forms_and_matching_on_real_events():
    isdd, mismatch, grad = _event("isdd", "isdd"), _event("mismatch", "mismatch"), _event("grad", "grad")
    assert isdd.phase == mismatch.phase == "drift" and isdd.severity == "critical" and mismatch.severity == "warning"
    both = parse_rule("drift=stop")  # a phase two detectors share matches both
    assert both.matches(isdd) and both.matches(mismatch) and not both.matches(grad)
    only = parse_rule("isdd/drift@critical=checkpoint")
    assert only.matches(isdd) and not only.matches(mismatch)
    assert not parse_rule("mismatch@critical=stop").matches(mismatch)  # a warning is below @critical
    assert parse_rule("grad=notify:http://127.0.0.1:9/x").url == "http://127.0.0.1:9/x"
    rb = parse_rule("lld/accelerated_collapse=rollback:lr=1e-4,objective=llds,objective_params.lam=0.3")
    assert rb.changes == (("lr", 1e-4), ("objective", "llds"), ("objective_params.lam", 0.3))


@pytest.mark.parametrize("text,message", [
    ("accelerated_colapse=stop", "unknown phase or detector 'accelerated_colapse'"),
    ("isdd/blowup=stop", "unknown detector/phase 'isdd/blowup'"),
    ("drift@urgent=stop", "unknown severity 'urgent'"),
    ("drift=halt", "unknown action 'halt'"),
    ("drift", "expected PHASE=ACTION"),
    ("drift=notify:ftp://x", r"notify needs an http\(s\) URL"),
    ("drift=stop:now", "stop takes no argument"),
    ("drift=rollback:temperature=2", "rollback changes are key=value"),
])
def test_bad_rules_fail_loudly(text, message):
    with pytest.raises(ValueError, match=message):
        parse_rule(text)


def test_rules_are_checked_with_the_config_before_training():
    with pytest.raises(ValueError, match="on-phase 'drift=rollback:objective=nope'.*objective"):
        TrainConfig(on_phase=("drift=rollback:objective=nope",))
    with pytest.raises(ValueError, match="lr"):
        TrainConfig(on_phase=("drift=rollback:lr=-1",))
    cfg = load_config(overrides=["on_phase=\"lld=rollback:lr=1e-4,objective=llds\""])
    assert cfg.on_phase == ("lld=rollback:lr=1e-4,objective=llds",)  # one rule: its commas are its own
    # the CLI's refusal of an unknown phase: tests/trainer/test_config.py::test_cli_fails_in_one_line_before_work


def _train_step(model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
    x = torch.randn(4, 3)  # draws from the torch RNG, which a rollback restores
    model(x).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()


def test_rollback_restores_the_snapshot_before_the_episode_and_applies_the_changes():
    # Snapshots at steps 0, 2, 4 (one per "rollout" of 2 steps); an episode starting at step 3 rolls back to
    # the newest snapshot before it: step 2. Model, optimizer (Adam moments), task RNG, mini-batch generator and
    # torch RNG are those of step 2, so the next two steps redo exactly what steps 2–3 did; lr is the new one.
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    rng, gen = random.Random(0), torch.Generator().manual_seed(0)
    cfg = TrainConfig(lr=1e-2)
    ev = _event("lld", "lld")
    acts = PhaseActions((f"lld/{ev.phase}=rollback:lr=1e-4",), cfg)
    seen = {}
    for step in range(6):
        if step % 2 == 0:
            acts.snapshot(step, model, opt, rng, gen)
        if step == 2:
            seen = {"weights": {k: v.clone() for k, v in model.state_dict().items()}, "task": rng.random(),
                    "perm": torch.randperm(10, generator=gen)}
        _train_step(model, opt)
        if step == 2:
            after_step_2 = {k: v.clone() for k, v in model.state_dict().items()}
    acts.on_event(type(ev)(**{**vars(ev), "step_start": 3, "step_end": 5}))
    restart = acts.at_rollout(6, cfg, model, opt, rng, gen, save=lambda s: None)
    assert restart is not None and restart.step == 2 and restart.cfg.lr == 1e-4 and restart.cfg.on_phase == ()
    for k, v in model.state_dict().items():
        assert torch.equal(v, seen["weights"][k])
    assert rng.random() == seen["task"] and torch.equal(torch.randperm(10, generator=gen), seen["perm"])
    assert opt.param_groups[0]["lr"] == 1e-4
    for group in opt.param_groups:  # same torch RNG draw, same Adam moments, smaller lr: a smaller step
        group["lr"] = 1e-2
    _train_step(model, opt)
    for k, v in model.state_dict().items():
        assert torch.equal(v, after_step_2[k])  # with the old lr the restored state redoes step 2 bit for bit
    assert acts.done[0].startswith("rollback at step 6 to step 2")
    acts.on_event(type(ev)(**{**vars(ev), "step_start": 7}))  # a rule rolls back once
    assert acts.at_rollout(8, cfg, model, opt, rng, gen, save=lambda s: None) is None


def test_rollback_without_an_old_enough_snapshot_stops(tmp_path):
    model, cfg = torch.nn.Linear(2, 1), TrainConfig()
    opt, rng, gen = torch.optim.AdamW(model.parameters()), random.Random(0), torch.Generator()
    acts = PhaseActions(("grad=rollback",), cfg)
    acts.snapshot(10, model, opt, rng, gen)
    ev = _event("grad", "grad")
    acts.on_event(type(ev)(**{**vars(ev), "step_start": 10}))  # the only snapshot is not before step 10
    assert acts.at_rollout(12, cfg, model, opt, rng, gen, save=lambda s: None) is None and acts.stop
    assert "no snapshot before step 10" in acts.done[0]


def test_stop_checkpoint_and_notify(receiver):
    cfg = TrainConfig()
    ev = _event("isdd", "isdd")
    acts = PhaseActions(("isdd@critical=stop", "drift=checkpoint", f"drift=notify:{receiver.url}/n"), cfg,
                        run="r1")
    acts.on_event(ev)
    acts.on_event(ev)  # the same episode again (extended): nothing twice
    assert acts.stop
    saved = []
    model = torch.nn.Linear(2, 1)
    acts.at_rollout(7, cfg, model, torch.optim.AdamW(model.parameters()), random.Random(), torch.Generator(),
                    save=saved.append)
    acts.close()
    assert saved == [7]
    assert len(receiver.got) == 1
    path, _, body = receiver.got[0]
    assert path == "/n" and body["run"] == "r1" and body["detector"] == "isdd" and body["step_start"] == ev.step_start
    # the action's line names the hook by scheme and host (Sink.label): its path, which can hold a token, is not said
    assert [a for a in acts.done if a.startswith("notify")] == [
        f"notify webhook:{receiver.url}: {ev.detector}/{ev.phase} at step {ev.step_start}"]
    with pytest.raises(ValueError, match="single process"):
        PhaseActions(("drift=rollback",), cfg, world_size=2)


@pytest.mark.slow
def test_a_real_run_rolls_back_and_notifies(store, receiver):
    # The built-in trainer on the tiny model with a 40-token response budget and 2 prompts × 4 responses: every
    # group scores equal (all wrong) at the first steps, so the starvation rule (zero-std level ≥ 0.8, no correct
    # response: starved) holds from the first step and opens a warning after confirm_steps = 3 steps — a real
    # event of a real run. (Its truncation is a length budget from the start: info, which no rule acts on here.) Its rollback rule restores
    # the newest snapshot before the episode's first step (snapshots at each rollout: steps 0, 2, 4, …), so
    # the run goes back to step 0 with lr 1e-5 and trains on to 8 steps; the notify rule POSTs the episode.
    from collapsewatch import connect
    from collapsewatch.trainer.loop import train

    rules = ("starvation=rollback:lr=1e-5", f"starvation=notify:{receiver.url}/hook")
    cfg = load_config(overrides=["prompts_per_rollout=2", "group_size=4", "max_turn_tokens=24",
                                 "max_response_tokens=40"], steps=8, store=str(store), run="rb", progress=False,
                      on_phase=rules)
    result = train(cfg)
    assert result.steps == 8 and not result.stopped_early
    rollback = [a for a in result.actions if a.startswith("rollback")]
    assert len(rollback) == 1 and " to step 0 " in rollback[0] and "lr=1e-05" in rollback[0]
    con = connect(store)
    # Old branch: steps 0..k-1 at lr 1e-4 (k = the step of the rollback); new branch: steps 0..7 at 1e-5.
    lrs = con.execute("SELECT step, list(value ORDER BY value) FROM scalars WHERE run = 'rb' AND key = 'lr' "
                      "GROUP BY step ORDER BY step").fetchall()
    k = int(rollback[0].split()[3])
    assert lrs == [(s, [1e-5, cfg.lr] if s < k else [1e-5]) for s in range(8)]
    # (the steps view pivots scalars with max over every row of a step, branches included — scalars carry no
    # write time — so its lr at steps < k is max(1e-4, 1e-5); the raw rows above are the evidence)
    assert con.execute("SELECT list(lr ORDER BY step) FROM steps WHERE run = 'rb' AND step >= ?",
                       [k]).fetchone()[0] == [1e-5] * (8 - k)
    # It continued from the restored state: model, optimizer and every RNG of step 0, so the rollout of
    # step 0 was sampled again identically — each step-0 sequence is stored twice with the same values.
    twins = con.execute("""SELECT count(*), count(DISTINCT (reward, logp_old_mean, n_model_tokens))
                           FROM sequences WHERE run = 'rb' AND step = 0 GROUP BY seq_id""").fetchall()
    assert twins and all(t == (2, 1) for t in twins)
    assert receiver.got and receiver.got[0][0] == "/hook" and receiver.got[0][2]["detector"] == "starvation"
    assert receiver.got[0][2]["run"] == "rb" and receiver.got[0][2]["text"]
