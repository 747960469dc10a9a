"""The built-in trainer: one readable recipe, top to bottom.

    setup → rollout → rewards/advantages → π_old log-probs → for each mini-batch (× epochs):
        forward (logp, entropy) → objective → aggregate → backward → clip → optimizer → probe → store

Every optimizer step is one monitor step. With ``mini_batches > 1`` (default 2) the later mini-batches of a
rollout are trained off-policy, so the ratios the detectors watch actually move (on-policy steps have r ≡ 1). The loop *tells*
the monitor which step is on-policy: the first mini-batch of the first epoch after a rollout (no update yet).
π_old is recomputed in eval mode (dropout off); the loss forward runs in train mode.
"""

from __future__ import annotations

import functools
import random
import time
from dataclasses import dataclass, field, replace

import torch

from ..batch import TokenBatch, group_zero_std
from ..detectors import DetectorConfig
from ..env import EnvConfig, make_env_factory
from ..monitor import Monitor
from ..objectives import (
    aggregate,
    aggregation_normalizer,
    anchor_ids,
    compute_advantages,
    compute_objective,
    get_objective,
    gigpo_advantages,
    turn_returns,
)
from ..objectives.bapo import step_contributions
from ..objectives.correction import Correction, apply_correction, correction_params, rollout_correction
from ..probe import ClipSpec
from ..rollout import RolloutBatch, RolloutConfig, RolloutEngine
from ..rollout.dynamic import dynamic_rollout
from ..sentinels import due
from ..sentinels import score as score_sentinels
from .actions import PhaseActions
from .checkpoint import load_checkpoint, save_checkpoint
from .config import TrainConfig, build_params, clip_settings, gigpo_params
from .distributed import Dist, setup_distributed
from .drills import Drill
from .engines import close_engine, make_engine, sync_engine
from .progress import Progress
from .sentinels import trace_sentinels
from .setup import load_task_and_policy


@dataclass
class TrainResult:
    run: str
    steps: int
    stopped_early: bool
    reward_history: list[float]
    actions: list[str] = field(default_factory=list)
    """What the --on-phase rules did, one line each."""


def forward_logps(model: torch.nn.Module, ids: torch.Tensor, attn: torch.Tensor, temperature: float,
                  want_entropy: bool = True, entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, L-1) log-prob of ids[:, 1:] under softmax(logits / τ) and its entropy, in fp32.

    ``entropy_grad``: keep the entropy's graph (an objective with an entropy bonus differentiates it); otherwise
    it is computed without grad, which spares a (B, L-1, V) activation.
    """
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float() / temperature  # (B, L-1, V)
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, L-1)
    entropy = None
    if want_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = -(logp_all.exp() * logp_all).sum(-1)  # (B, L-1) nats
    return logp, entropy


def _rows(batch: RolloutBatch, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, slice]:
    """input ids and attention mask of ``rows``, trimmed to their longest sequence."""
    attn = batch.attention_mask[rows]
    width = int(attn.sum(1).max())
    return batch.input_ids[rows, :width], attn[:, :width], slice(1, width)


@torch.no_grad()
def old_logps(model: torch.nn.Module, batch: RolloutBatch, temperature: float, chunk: int) -> torch.Tensor:
    """(B, L-1) log π_old of every token, recomputed by the training model before any update, in eval mode:
    π_old is a policy, not a dropout sample of it (the mode is restored afterwards)."""
    out = torch.zeros(batch.input_ids.shape[0], batch.input_ids.shape[1] - 1)
    was_training = model.training
    model.eval()
    try:
        for lo in range(0, out.shape[0], chunk):
            rows = torch.arange(lo, min(lo + chunk, out.shape[0]))
            ids, attn, cols = _rows(batch, rows)
            logp, _ = forward_logps(model, ids, attn, temperature, want_entropy=False)
            out[lo : lo + len(rows), : cols.stop - 1] = logp.cpu()
    finally:
        model.train(was_training)
    return out


def entropy_needs_grad(params) -> bool:
    """True when the objective has an entropy bonus (``entropy_coef > 0``), whose gradient flows through H."""
    return getattr(getattr(params, "base", params), "entropy_coef", 0.0) > 0.0


def objective_clip(cfg: TrainConfig, params) -> ClipSpec:
    """The monitor's clip settings: the objective's ε (None: it does not clip) on what it clips (token / sequence)."""
    eps_low, eps_high, dual = clip_settings(params)
    return ClipSpec(eps_low, eps_high, dual, level=get_objective(cfg.objective).clip_level)


def micro_step(model, cfg: TrainConfig, params, batch: RolloutBatch, rows: torch.Tensor, adv: torch.Tensor,
               logp_old: torch.Tensor, logp_ref: torch.Tensor | None, norm: torch.Tensor, device,
               zero_std: torch.Tensor, on_policy: bool, sums: dict[str, float], inject=None,
               corr: Correction | None = None) -> TokenBatch:
    """Forward, objective, aggregate, backward for one micro-batch; returns the batch the probe observes.

    ``sums`` accumulates timings, the aggregated loss and loss terms (``loss_policy`` …) and BAPO's Σ positive /
    Σ negative surrogate contributions (``bapo.step_contributions``) of the step.
    ``inject(logp, mask)`` is a drill's hook on the fresh log-probs (trainer/drills.py). ``corr``: the rollout
    correction (objectives/correction.py): each token's loss × its IS weight, trained on mask × keep."""
    t0 = time.perf_counter()
    ids, attn, cols = _rows(batch, rows)
    ids, attn = ids.to(device), attn.to(device)
    logp, entropy = forward_logps(model, ids, attn, cfg.temperature, entropy_grad=entropy_needs_grad(params))
    w = cols.stop - 1
    mask = batch.loss_mask[rows, cols].to(device)  # (b, w-1) 1 on model tokens
    if inject is not None:
        logp = inject(logp, mask)
    ref = logp_ref[rows, :w].to(device) if logp_ref is not None else None
    a = adv[rows] if adv.dim() == 1 else adv[rows][:, cols]  # (b,) or, per token (gigpo), (b, w-1)
    tb = TokenBatch(logp=logp, mask=mask, logp_old=logp_old[rows, :w].to(device),
                    logp_rollout=batch.logp_rollout[rows, cols], logp_ref=ref, entropy=entropy,
                    advantages=a.to(device), token_ids=ids[:, 1:], turn_ids=batch.turn_ids[rows, cols].to(device),
                    seq_ids=rows, group_ids=batch.group_ids[rows], rewards=batch.rewards[rows].double(),
                    truncated=batch.truncated[rows], group_zero_std=zero_std[rows], on_policy=on_policy)
    out = raw = compute_objective(cfg.objective, tb, params)
    train_mask = mask
    if corr is not None:  # loss × IS weight; rejected tokens leave the loss and its normaliser
        out, train_mask = apply_correction(out, mask, corr.weights[rows, :w].to(device), corr.keep[rows, :w].to(device))
    agg = {"normalizer": norm, "max_len": cfg.max_response_tokens}
    loss = aggregate(out.loss, train_mask, cfg.aggregation, **agg)
    t_fwd = time.perf_counter()
    loss.backward()
    sums["time/forward"] += t_fwd - t0
    sums["time/backward"] += time.perf_counter() - t_fwd
    sums["loss"] += float(loss.detach())
    for name, term in out.terms.items():  # each term aggregated like the loss, so the terms sum to it
        sums[name] = sums.get(name, 0.0) + float(aggregate(term, train_mask, cfg.aggregation, **agg))
    pos, neg = step_contributions(raw, tb.advantages, mask, *clip_settings(params)[:2]).tolist()
    sums["pos_contrib"] = sums.get("pos_contrib", 0.0) + pos  # → pos_neg_balance in train()
    sums["neg_contrib"] = sums.get("neg_contrib", 0.0) + neg
    for name in ("bapo_clip_low", "bapo_clip_high"):  # the bounds BAPO chose (the step's last micro-batch)
        if name in out.intermediates:
            sums[name] = float(out.intermediates[name][0, 0])
    return tb.detached()


def rollout_batch(engine: RolloutEngine, tasks: list, make_env, cfg: TrainConfig, drill: Drill, step: int,
                  seed: int) -> tuple[RolloutBatch, dict[str, float]]:
    """The batch to train on: one rollout of ``tasks`` (a drill's rewards applied), or with ``cfg.dynamic_sampling``
    up to that many (``rollout/dynamic.py``), judged on the rewards the trainer will use. Returns it and the step
    scalars that record the re-sampling (``resampled_groups``, ``filtered_groups``; none when it is off)."""

    def one() -> RolloutBatch:
        b = engine.rollout(tasks, make_env, cfg.group_size)
        env_rewards, b.rewards = b.rewards, drill.rewards(b.rewards, b.group_ids, step, seed)
        moved = (b.rewards != env_rewards) & ~(b.rewards.isnan() & env_rewards.isnan())  # (B,) NaN stays NaN
        for i in torch.nonzero(moved).flatten().tolist():  # GiGPO's per-turn returns follow the drill
            b.turn_rewards[i][-1] += float(b.rewards[i] - env_rewards[i])
        return b

    if not cfg.dynamic_sampling:
        return one(), {}
    batch, stats = dynamic_rollout(one, len(tasks), cfg.dynamic_sampling, engine.pad_id)
    return batch, {"resampled_groups": float(stats.resampled_groups), "filtered_groups": float(stats.filtered_groups)}


def batch_advantages(batch: RolloutBatch, cfg: TrainConfig) -> torch.Tensor:
    """(B,) group advantages, or for ``advantages = "gigpo"`` (B, L) per-token ones aligned with ``input_ids``."""
    if cfg.advantages != "gigpo":
        return compute_advantages(batch.rewards.double(), batch.group_ids, cfg.advantages).float()
    p = gigpo_params(cfg.advantage_params)
    return gigpo_advantages(batch.rewards, batch.group_ids, batch.turn_ids, turn_returns(batch.turn_rewards, p.gamma),
                            anchor_ids(batch.anchors), p).float()


def train(cfg: TrainConfig) -> TrainResult:
    # -- setup ----------------------------------------------------------------------------------------
    dist: Dist = setup_distributed(cfg.device)
    torch.manual_seed(cfg.seed + dist.rank)
    rng = random.Random(cfg.seed + dist.rank)  # task order
    gen = torch.Generator().manual_seed(cfg.seed + dist.rank)  # mini-batch order
    policy, tokenizer, kb, source = load_task_and_policy(cfg, dist.device)
    train_tasks, held_out = kb.split()
    train_tasks = train_tasks[: cfg.n_train_tasks or None]
    make_env = make_env_factory(kb, EnvConfig(top_k=cfg.top_k, max_turns=cfg.max_turns))
    watch = trace_sentinels(tokenizer, held_out, make_env, min(cfg.sentinels, len(held_out))) \
        if cfg.sentinels and dist.rank == 0 else []
    rollout_cfg = RolloutConfig(temperature=cfg.temperature, top_p=cfg.top_p, max_turn_tokens=cfg.max_turn_tokens,
                                max_response_tokens=cfg.max_response_tokens)
    engine = make_engine(cfg, policy, tokenizer, rollout_cfg, dist.rank)
    corr_params = correction_params(cfg.correction)
    stale = False  # the engine's weights lag the policy's (vLLM: after an update or a rollback)
    drill = Drill.from_dict(cfg.drill)
    params = build_params(cfg.objective, cfg.objective_params)
    ref_model = None
    if getattr(getattr(params, "base", params), "kl_beta", 0.0):
        ref_model = load_task_and_policy(cfg, dist.device)[0].eval().requires_grad_(False)
    model = dist.wrap(policy)
    opt = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    step = load_checkpoint(cfg, policy, opt, rng, gen) if cfg.resume else 0
    stop = {"flag": False}
    progress = Progress(cfg, dist.rank == 0)

    actions = PhaseActions(cfg.on_phase, cfg, world_size=dist.world_size, run=cfg.run_name)

    def on_event(ev) -> None:
        progress.event(ev)
        actions.on_event(ev)  # --on-phase: notify now; stop / checkpoint / rollback at the loop's boundaries
        if ev.phase in cfg.stop_on or ev.detector in cfg.stop_on or actions.stop:
            stop["flag"] = True

    detectors = DetectorConfig.from_file(cfg.detectors) if cfg.detectors else True
    mon = Monitor(cfg.store, cfg.run_name, cfg.to_dict(), objective=cfg.objective, on_event=on_event,
                  detectors=detectors,
                  clip=objective_clip(cfg, params), rank=dist.rank, world_size=dist.world_size,
                  enabled=cfg.monitor, resume=cfg.resume)
    mon.keep_tokenizer(tokenizer)  # the dashboard decodes token rows with it
    rewards_seen: list[float] = []
    status = "crashed"
    try:
        while step < cfg.steps and not stop["flag"]:
            # -- phase actions (--on-phase): checkpoint / roll back at a rollout boundary ------------------
            restart = actions.at_rollout(step, cfg, policy, opt, rng, gen,
                                         lambda s, c=cfg: save_checkpoint(c, policy, tokenizer, opt, rng, gen, s,
                                                                         source=source))
            if restart is not None:  # restored model, optimizer, RNGs; train on from there, settings changed
                step, cfg, stale = restart.step, restart.cfg, True
                params = build_params(cfg.objective, cfg.objective_params)
            if actions.stop:
                stop["flag"] = True
                break
            actions.snapshot(step, policy, opt, rng, gen)
            # -- rollout --------------------------------------------------------------------------------
            synced = sync_engine(engine, policy) if stale else {}
            stale = False
            t0 = time.perf_counter()
            tasks = rng.sample(train_tasks, cfg.prompts_per_rollout)
            engine.config = replace(rollout_cfg, temperature=drill.sampling_temperature(cfg.temperature, step))
            batch, sampling = rollout_batch(engine, tasks, make_env, cfg, drill, step, cfg.seed + dist.rank)
            rollout_time = time.perf_counter() - t0
            rewards_seen.append(float(batch.rewards.mean()))
            # -- advantages and π_old ------------------------------------------------------------------
            adv = batch_advantages(batch, cfg)  # (B,), or (B, L) per token for gigpo
            zero_std = group_zero_std(batch.group_ids, batch.rewards)  # whole groups, before mini-batch shuffling
            chunk = max(1, batch.batch_size // (cfg.mini_batches * cfg.grad_accum))
            logp_old = old_logps(policy, batch, cfg.temperature, chunk)
            logp_ref = old_logps(ref_model, batch, cfg.temperature, chunk) if ref_model is not None else None
            corr = None if not corr_params.active else rollout_correction(
                logp_old, batch.logp_rollout[:, 1:], batch.loss_mask[:, 1:], corr_params)  # (B, L-1), π_old's cols
            train_mask = batch.loss_mask[:, 1:] * (corr.keep if corr is not None else 1.0)
            # -- updates: epochs × mini-batches, each an optimizer step ----------------------------------
            for epoch in range(drill.epochs(cfg.ppo_epochs, step)):
                perm = torch.randperm(batch.batch_size, generator=gen)
                for k, mb in enumerate(perm.chunk(cfg.mini_batches)):
                    if step >= cfg.steps or stop["flag"]:
                        break
                    if watch and due(step, cfg.sentinel_every):  # the policy this step starts from, as L's π_old
                        t1 = time.perf_counter()
                        scores = score_sentinels(policy, watch, cfg.temperature, engine.pad_id, chunk)
                        mon.log_sentinels(step, scores, time.perf_counter() - t1)
                    t1 = time.perf_counter()
                    micros = mb.chunk(cfg.grad_accum)
                    norm = aggregation_normalizer(cfg.aggregation, [train_mask[m] for m in micros])
                    sums = {"time/forward": 0.0, "time/backward": 0.0, "time/observe": 0.0, "loss": 0.0}
                    adv_step = drill.advantages(adv, step, mb)
                    for i, rows in enumerate(micros):
                        inject = functools.partial(drill.logp, step=step) if i == 0 else None
                        with dist.no_sync(model, last=i == len(micros) - 1):  # on-policy: no update since rollout
                            tb = micro_step(model, cfg, params, batch, rows, adv_step, logp_old, logp_ref, norm,
                                            dist.device, zero_std, epoch == 0 and k == 0, sums, inject, corr)
                        t2 = time.perf_counter()
                        mon.observe(tb, step=step)
                        sums["time/observe"] += time.perf_counter() - t2
                    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
                    lr = drill.lr(cfg.lr, step)
                    for group in opt.param_groups:
                        group["lr"] = lr
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    stale = True
                    pos, neg = sums.pop("pos_contrib"), sums.pop("neg_contrib")
                    if neg > 0:  # BAPO's balance, for every objective; NULL when no token has A < 0
                        sums["pos_neg_balance"] = pos / neg
                    mon.log(step, {"grad_norm": float(grad_norm), "lr": lr, "rollout_time": rollout_time,
                                   "step_time": time.perf_counter() - t1, **sampling, **synced, **sums,
                                   **(corr.metrics if corr is not None else {})})
                    step += 1
                    progress.update(step, float(batch.rewards.mean()), mon.latest)
                    if cfg.checkpoint_every and step % cfg.checkpoint_every == 0 and dist.rank == 0:
                        save_checkpoint(cfg, policy, tokenizer, opt, rng, gen, step, source=source)
        status = "finished"
    finally:
        progress.close()
        close_engine(engine)
        mon.close(status=status)
        actions.close()
        if dist.rank == 0 and status == "finished":
            save_checkpoint(cfg, policy, tokenizer, opt, rng, gen, step, source=source)
        dist.close()
    return TrainResult(cfg.run_name, step, stop["flag"], rewards_seen, actions.done)
