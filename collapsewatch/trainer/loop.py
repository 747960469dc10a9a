"""The built-in trainer: one readable recipe, top to bottom.

    start_run (seed, policy, task, engine, optimizer, monitor)
    per rollout:  0. phase actions (--on-phase checkpoint / rollback / stop)
                  1. rollout              sample groups of responses (a drill may change τ or the rewards)
                  2. advantages and π_old group advantages, log π_old (and π_ref), the rollout correction
                  3. update               epochs × mini-batches, each one optimizer step:
                       micro-batches: forward (logp, entropy) → objective → aggregate → backward → probe
                       → clip → optimizer → log the step
    finish_run (close the monitor, final checkpoint)

Every optimizer step is one monitor step. With ``mini_batches > 1`` (default 2) the later mini-batches of a
rollout are trained after an update, off-policy (on-policy steps have r ≡ 1), so the ratios the detectors watch
actually move. The loop *tells*
the monitor which step is on-policy: the first mini-batch of the first epoch after a rollout (no update yet).
π_old is recomputed in eval mode (dropout off); the loss forward runs in train mode. The loop names no objective:
an objective's own step values come back from it (``ObjectiveOutput.scalars``); a drill acts through the hooks
listed in trainer/drills.py.
"""

from __future__ import annotations

import functools
import time
import warnings
from dataclasses import dataclass, field, replace

import torch

from ..batch import group_zero_std
from ..objectives import aggregation_normalizer
from ..objectives.correction import Correction, rollout_correction
from ..rollout import RolloutBatch
from ..sentinels import due
from ..sentinels import score as score_sentinels
from .batches import batch_advantages, rollout_batch
from .config import TrainConfig, build_params
from .engines import sync_engine
from .evaluation import evaluate
from .forward import old_logps
from .setup import Run, finish_run, start_run
from .step import StepInputs, StepTally, micro_step


@dataclass
class TrainResult:
    run: str
    steps: int
    stopped_early: bool
    reward_history: list[float]
    actions: list[str] = field(default_factory=list)
    """What the --on-phase rules did, one line each."""


def train(cfg: TrainConfig) -> TrainResult:
    if cfg.resume:
        from .resume import nothing_to_train, resumed_step

        if (done := resumed_step(cfg)) >= cfg.steps:  # steps is a total: say so, touch nothing
            warnings.warn(nothing_to_train(cfg.run_name, done), stacklevel=2)
            return TrainResult(cfg.run_name, done, False, [])
    run = start_run(cfg)
    status = "crashed"
    try:
        while run.step < run.cfg.steps and not run.stopped:
            if not phase_actions(run):
                break
            batch, scalars = rollout(run)
            prepared = advantages_and_old_logps(run, batch, scalars)
            update(run, prepared)
        status = "finished"
    finally:
        finish_run(run, status)
    return TrainResult(run.cfg.run_name, run.step, run.stopped, run.rewards_seen, run.actions.done)


# -- 0. phase actions ---------------------------------------------------------------------------------------------

def phase_actions(run: Run) -> bool:
    """Carry out pending --on-phase checkpoints and rollbacks at this rollout boundary (a rollback restores model,
    optimizer, RNGs and step and trains on with its changed settings); False when the run is to stop."""
    restart = run.actions.at_rollout(run.step, run.cfg, run.policy, run.opt, run.rng, run.gen, run.save)
    if restart is not None:
        run.step, run.cfg, run.stale = restart.step, restart.cfg, True
        run.params = build_params(run.cfg.objective, run.cfg.objective_params)
    if run.actions.stop:
        run.stopped = True
        return False
    run.actions.snapshot(run.step, run.policy, run.opt, run.rng, run.gen)
    return True


# -- 1. rollout ---------------------------------------------------------------------------------------------------

def rollout(run: Run) -> tuple[RolloutBatch, dict[str, float]]:
    """Sample ``prompts_per_rollout`` questions × ``group_size`` responses with the current policy (the engine
    synced first if its weights lag); the batch and its step scalars (rollout_time, weight_sync_time, re-sampling)."""
    cfg = run.cfg
    synced = sync_engine(run.engine, run.policy) if run.stale else {}
    run.stale = False
    t0 = time.perf_counter()
    tasks = run.rng.sample(run.train_tasks, cfg.prompts_per_rollout)
    run.engine.config = replace(run.rollout_cfg, temperature=run.drill.sampling_temperature(cfg.temperature, run.step))
    batch, sampling = rollout_batch(run.engine, tasks, run.make_env, cfg, run.drill, run.step, cfg.seed + run.dist.rank)
    scalars = {"rollout_time": time.perf_counter() - t0, **sampling, **synced}
    run.rewards_seen.append(float(batch.rewards.mean()))
    return batch, scalars


# -- 2. advantages and π_old --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Prepared:
    """A rollout made ready to train on: what every optimizer step on it reads."""

    batch: RolloutBatch
    adv: torch.Tensor
    """(B,) group advantages, or (B, L) per token (gigpo)."""
    zero_std: torch.Tensor
    """(B,) bool: the row's group had equal rewards."""
    logp_old: torch.Tensor
    """(B, L-1) log π_old, recomputed before any update."""
    logp_ref: torch.Tensor | None
    """(B, L-1) log π_ref for a KL term, or None."""
    corr: Correction | None
    """The rollout correction (None: off)."""
    train_mask: torch.Tensor
    """(B, L-1) tokens the loss trains on (model tokens the correction keeps)."""
    chunk: int
    """Rows per no-grad forward (a micro-batch's size)."""
    scalars: dict[str, float]
    """The rollout's step scalars, logged with every optimizer step trained on it."""


def advantages_and_old_logps(run: Run, batch: RolloutBatch, scalars: dict[str, float]) -> Prepared:
    """Advantages, log π_old (and π_ref) of every token by the policy before any update, and the correction."""
    cfg = run.cfg
    adv = batch_advantages(batch, cfg)  # (B,), or (B, L) per token for gigpo
    zero_std = group_zero_std(batch.group_ids, batch.rewards)  # whole groups, before mini-batch shuffling
    chunk = max(1, batch.batch_size // (cfg.mini_batches * cfg.grad_accum))
    logp_old = old_logps(run.policy, batch, cfg.temperature, chunk)
    logp_ref = old_logps(run.ref_model, batch, cfg.temperature, chunk) if run.ref_model is not None else None
    corr = None if not run.corr_params.active else rollout_correction(
        logp_old, batch.logp_rollout[:, 1:], batch.loss_mask[:, 1:], run.corr_params)  # (B, L-1), π_old's cols
    train_mask = batch.loss_mask[:, 1:] * (corr.keep if corr is not None else 1.0)
    return Prepared(batch, adv, zero_std, logp_old, logp_ref, corr, train_mask, chunk, scalars)


# -- 3. update ----------------------------------------------------------------------------------------------------

def update(run: Run, ro: Prepared) -> None:
    """Epochs × mini-batches over the rollout, each mini-batch one optimizer step; stops at ``steps`` or a stop."""
    cfg = run.cfg
    for epoch in range(run.drill.epochs(cfg.ppo_epochs, run.step)):
        perm = torch.randperm(ro.batch.batch_size, generator=run.gen)
        for k, rows in enumerate(perm.chunk(cfg.mini_batches)):
            if run.step >= cfg.steps or run.stopped:
                break
            if run.watch and due(run.step, cfg.sentinel_every):  # the policy this step starts from, as L's π_old
                t0 = time.perf_counter()
                scores = score_sentinels(run.policy, run.watch, cfg.temperature, run.engine.pad_id, ro.chunk)
                run.mon.log_sentinels(run.step, scores, time.perf_counter() - t0)
            if run.eval_tasks and due(run.step, cfg.eval_every):  # the same policy, on held-out questions
                run.mon.log(run.step, evaluate(run))
            optimizer_step(run, ro, rows, on_policy=epoch == 0 and k == 0)


def optimizer_step(run: Run, ro: Prepared, rows: torch.Tensor, on_policy: bool) -> None:
    """One optimizer step on mini-batch ``rows``: its micro-batches' gradients accumulated (each observed by the
    probe), the gradient clipped, the optimizer stepped, the step's scalars logged."""
    cfg, step = run.cfg, run.step
    t0 = time.perf_counter()
    micros = rows.chunk(cfg.grad_accum)
    inputs = StepInputs(model=run.model, cfg=cfg, params=run.params, batch=ro.batch,
                        adv=run.drill.advantages(ro.adv, step, rows), logp_old=ro.logp_old, logp_ref=ro.logp_ref,
                        norm=aggregation_normalizer(cfg.aggregation, [ro.train_mask[m] for m in micros]),
                        device=run.dist.device, zero_std=ro.zero_std, on_policy=on_policy, corr=ro.corr)
    tally = StepTally()
    for i, micro in enumerate(micros):
        inject = functools.partial(run.drill.logp, step=step) if i == 0 else None
        with run.dist.no_sync(run.model, last=i == len(micros) - 1):
            tb = micro_step(inputs, micro, tally, inject)
        t1 = time.perf_counter()
        run.mon.observe(tb, step=step)
        tally.add("time/observe", time.perf_counter() - t1)
    grad_norm = torch.nn.utils.clip_grad_norm_(run.policy.parameters(), cfg.max_grad_norm)
    lr = run.drill.lr(cfg.lr, step)
    for group in run.opt.param_groups:
        group["lr"] = lr
    run.opt.step()
    run.opt.zero_grad(set_to_none=True)
    run.stale = True
    run.mon.log(step, {"grad_norm": float(grad_norm), "lr": lr, "step_time": time.perf_counter() - t0, **ro.scalars,
                       **tally.scalars(), **(ro.corr.metrics if ro.corr is not None else {})})
    run.step += 1
    run.progress.update(run.step, float(ro.batch.rewards.mean()), run.mon.latest)
    if cfg.checkpoint_every and run.step % cfg.checkpoint_every == 0 and run.dist.rank == 0:
        run.save()
