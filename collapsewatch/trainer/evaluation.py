"""The built-in trainer's evaluation: every ``eval_every`` optimizer steps the policy answers held-out questions.

The questions are the first ``eval_tasks`` of the knowledge base's held-out split (the split sentinels come from;
never trained on), one response each, sampled by the rollout engine exactly as a training rollout is (its
temperature and top-p; no drill). A non-finite reward is unknown, as in the catalogue (``catalogue``: NaN reward =
unknown): the response is left out of the score, not scored 0. The step logs

* ``eval/reward`` — the mean reward of the scored responses (those with a finite reward);
* ``eval/accuracy`` — the share of them whose reward reaches 1 (a correct final answer: the monitor's
  ``success_threshold``, as its ``correct_frac``);
* ``eval/num_examples`` — how many responses were scored (the set the score is over);
* ``eval/time`` — the seconds it took (not a score),

and ``eval/accuracy`` fills the step's ``eval_score``, ``eval/num_examples`` its ``eval_size`` (``ingest/keys.py``):
the evaluation detector watches the score, with the sampling noise of a set that size as its floor. An evaluation
none of whose rewards is finite has no score: it logs neither ``eval/reward`` nor ``eval/accuracy`` (a NaN would be
stored as NaN, ``writer.NAN_KEPT``, and read as a score that fell; a 0 would be one), ``eval/num_examples`` 0, and
the trainer warns once per run, naming the step (:func:`unscored`).

The training's random streams are left as they were: torch's (CPU and CUDA) and Python's global state are saved
before and restored after, and the sampling draws from a stream seeded by (``seed``, step) — so with the HF engine
a run with evaluations trains exactly as one without (tests/trainer/test_evaluation.py). A vLLM engine keeps its
own sampler state, which the evaluation's requests advance: there a run with evaluations samples its later rollouts
differently.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import replace

import torch

from .engines import sync_engine
from .setup import Run, objective_clip

log = logging.getLogger("collapsewatch")

EVAL_SEED = 7_919
"""Added to ``seed`` + step for the evaluation's own sampling stream (any constant apart from the run's seeds)."""


def evaluate(run: Run) -> dict[str, float]:
    """Answer ``run.eval_tasks`` once each with the current policy; the step scalars to log (module doc)."""
    t0 = time.perf_counter()
    if run.stale:  # an engine with its own copy of the weights samples from the policy as it is now
        sync_engine(run.engine, run.policy)
        run.stale = False
    saved_py, saved_cpu = random.getstate(), torch.get_rng_state()
    saved_cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        torch.manual_seed(run.cfg.seed + EVAL_SEED + run.step)
        run.engine.config = replace(run.rollout_cfg, temperature=run.cfg.temperature)
        rewards = run.engine.rollout(run.eval_tasks, run.make_env, 1).rewards.double()
    finally:
        random.setstate(saved_py)
        torch.set_rng_state(saved_cpu)
        if saved_cuda is not None:
            torch.cuda.set_rng_state_all(saved_cuda)
    scored = rewards[torch.isfinite(rewards)]
    out = {"eval/num_examples": float(len(scored)), "eval/time": time.perf_counter() - t0}
    if not len(scored):
        if not run.eval_unscored_said:
            run.eval_unscored_said = True
            log.warning("collapsewatch: %s", unscored(run.step, len(rewards)))
        return out
    threshold = objective_clip(run.cfg, run.params).success_threshold
    return {"eval/reward": float(scored.mean()), "eval/accuracy": float((scored >= threshold).double().mean()), **out}


def unscored(step: int, answered: int) -> str:
    """The warning of an evaluation none of whose rewards is finite (once per run: later ones are not said)."""
    return (f"the evaluation at step {step} got no finite reward for any of its {answered} answers: no eval/reward or "
            "eval/accuracy is logged there (no score, not a score of NaN); later such evaluations are not reported")
