"""Set-up and tear-down of one training run: the policy, its task, engine, optimizer and monitor, held in a ``Run``.

Policies come from :func:`collapsewatch.models.load_policy` (built-in tiny models, local HF folders, the
opt-in SmolLM2). A built-in model carries the knowledge base it was warm-started on; other models use
``kb_seed``. Resuming loads the run's checkpoint instead. Nothing is downloaded. The folder the weights came from
is returned explicitly: a checkpoint copies the built-in's description (its knowledge base) from it.

:func:`start_run` builds everything in a fixed order after seeding (the seeded draws depend on it);
:func:`finish_run` closes it whatever happened. The loop (trainer/loop.py) advances ``Run.step``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers.utils import logging as hf_logging

from ..detectors import DetectorConfig
from ..env import EnvConfig, KBConfig, KnowledgeBase, build_kb, make_env_factory
from ..models import load_policy
from ..monitor import Monitor
from ..objectives import get_objective
from ..objectives.correction import CorrectionParams, correction_params
from ..probe import ClipSpec
from ..rollout import RolloutConfig, RolloutEngine
from .actions import PhaseActions
from .checkpoint import checkpoint_dir, keeps_checkpoint, load_checkpoint, save_checkpoint
from .config import TrainConfig, build_params, clip_settings
from .distributed import Dist, setup_distributed
from .drills import Drill
from .engines import close_engine, make_engine
from .progress import Progress
from .sentinels import trace_sentinels

hf_logging.disable_progress_bar()


def load_task_and_policy(cfg: TrainConfig, device: torch.device
                         ) -> tuple[torch.nn.Module, object, KnowledgeBase, Path]:
    """(policy in train mode on ``device``, tokenizer, knowledge base, folder the weights were loaded from)."""
    dtype = torch.bfloat16 if cfg.dtype == "bfloat16" else torch.float32
    ckpt = checkpoint_dir(cfg)
    source = str(ckpt) if cfg.resume and ckpt.is_dir() else cfg.model
    policy = load_policy(source, dtype=dtype)
    kb = build_kb(policy.kb_config or KBConfig(seed=cfg.kb_seed))
    return policy.model.to(device).train(), policy.tokenizer, kb, policy.path


def objective_clip(cfg: TrainConfig, params: Any) -> ClipSpec:
    """The monitor's clip settings: the objective's ε (None: it does not clip) on what it clips (token / sequence)."""
    eps_low, eps_high, dual = clip_settings(params)
    return ClipSpec(eps_low, eps_high, dual, level=get_objective(cfg.objective).clip_level)


@dataclass
class Run:
    """One training run's parts (built by :func:`start_run`) and the state the loop advances."""

    cfg: TrainConfig
    """The settings in force (a rollback may replace them)."""
    dist: Dist
    rng: random.Random
    """Task order."""
    gen: torch.Generator
    """Mini-batch order."""
    policy: torch.nn.Module
    model: torch.nn.Module
    """The policy, DDP-wrapped when distributed (the forward / backward go through it)."""
    ref_model: torch.nn.Module | None
    """A frozen copy of the start policy, for an objective with a KL term (``kl_beta``); else None."""
    tokenizer: Any
    source: Path
    """Folder the weights came from (a checkpoint copies the built-in's description from it)."""
    opt: torch.optim.Optimizer
    train_tasks: list
    make_env: Callable
    watch: list
    """Sentinels scored every ``sentinel_every`` steps (rank 0; empty: off)."""
    engine: RolloutEngine
    rollout_cfg: RolloutConfig
    corr_params: CorrectionParams
    drill: Drill
    params: Any
    """The objective's hyper-parameters."""
    progress: Progress
    actions: PhaseActions
    mon: Monitor | None = None
    step: int = 0
    """The next optimizer step (= monitor step)."""
    stale: bool = False
    """The engine's weights lag the policy's (vLLM: after an update or a rollback)."""
    stopped: bool = False
    """A stop_on phase or a --on-phase stop fired: the loop ends at the next step boundary."""
    rewards_seen: list[float] = field(default_factory=list)
    eval_tasks: list = field(default_factory=list)
    """Held-out questions an evaluation answers every ``eval_every`` steps (rank 0; empty: off)."""
    eval_unscored_said: bool = False
    """An evaluation with no finite reward was warned about (once per run: ``evaluation.unscored``)."""
    """Mean reward of each rollout."""

    def save(self, step: int | None = None) -> None:
        """Checkpoint the policy, optimizer and RNGs as of optimizer step ``step`` (default: the current one)."""
        save_checkpoint(self.cfg, self.policy, self.tokenizer, self.opt, self.rng, self.gen,
                        self.step if step is None else step, source=self.source)

    def on_event(self, ev: Any) -> None:
        """The Monitor's ``on_event``: print it, let --on-phase rules act, stop on a ``stop_on`` phase."""
        self.progress.event(ev)
        self.actions.on_event(ev)  # --on-phase: notify now; stop / checkpoint / rollback at the loop's boundaries
        if ev.phase in self.cfg.stop_on or ev.detector in self.cfg.stop_on or self.actions.stop:
            self.stopped = True


def start_run(cfg: TrainConfig) -> Run:
    """Seed, then load the policy and task, sentinels, engine, reference model, optimizer (a checkpoint when
    resuming), progress line, --on-phase rules and the monitor, in this order."""
    if cfg.resume:  # a run continues as it was trained (the CLI laid its options over the saved settings)
        from .resume import resumed_step

        resumed_step(cfg)
    dist = setup_distributed(cfg.device)
    torch.manual_seed(cfg.seed + dist.rank)
    rng = random.Random(cfg.seed + dist.rank)
    gen = torch.Generator().manual_seed(cfg.seed + dist.rank)
    policy, tokenizer, kb, source = load_task_and_policy(cfg, dist.device)
    train_tasks, held_out = kb.split()
    make_env = make_env_factory(kb, EnvConfig(top_k=cfg.top_k, max_turns=cfg.max_turns))
    watch = trace_sentinels(tokenizer, held_out, make_env, min(cfg.sentinels, len(held_out))) \
        if cfg.sentinels and dist.rank == 0 else []
    rollout_cfg = RolloutConfig(temperature=cfg.temperature, top_p=cfg.top_p, max_turn_tokens=cfg.max_turn_tokens,
                                max_response_tokens=cfg.max_response_tokens)
    engine = make_engine(cfg, policy, tokenizer, rollout_cfg, dist.rank)
    corr_params, drill = correction_params(cfg.correction), Drill.from_dict(cfg.drill)
    params = build_params(cfg.objective, cfg.objective_params)
    ref_model = None
    if getattr(getattr(params, "base", params), "kl_beta", 0.0):
        ref_model = load_task_and_policy(cfg, dist.device)[0].eval().requires_grad_(False)
    model = dist.wrap(policy)
    opt = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    step = load_checkpoint(cfg, policy, opt, rng, gen) if cfg.resume else 0
    progress = Progress(cfg, dist.rank == 0)
    actions = PhaseActions(cfg.on_phase, cfg, world_size=dist.world_size, run=cfg.run_name)
    run = Run(cfg, dist, rng, gen, policy, model, ref_model, tokenizer, source, opt,
              train_tasks[: cfg.n_train_tasks or None], make_env, watch, engine, rollout_cfg, corr_params, drill,
              params, progress, actions, step=step,
              eval_tasks=held_out[: cfg.eval_tasks] if cfg.eval_every and dist.rank == 0 else [])
    detectors = DetectorConfig.from_file(cfg.detectors) if cfg.detectors else True
    run.mon = Monitor(cfg.store, cfg.run_name, cfg.to_dict(), objective=cfg.objective, on_event=run.on_event,
                      detectors=detectors, clip=objective_clip(cfg, params), rank=dist.rank,
                      world_size=dist.world_size, enabled=cfg.monitor, resume=cfg.resume)
    run.mon.keep_tokenizer(tokenizer)  # the dashboard decodes token rows with it
    return run


def finish_run(run: Run, status: str) -> None:
    """Close the progress line, engine, monitor (``status``: finished / crashed) and notify threads; a finished
    run's rank 0 saves its final checkpoint (none for an object store without ``checkpoint_dir``)."""
    run.progress.close()
    close_engine(run.engine)
    run.mon.close(status=status)
    run.actions.close()
    if run.dist.rank == 0 and status == "finished" and keeps_checkpoint(run.cfg):
        run.save()
    run.dist.close()
