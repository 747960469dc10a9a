"""Collapse drills: from step N on, switch one named mechanism on in an otherwise ordinary run.

A drill is the ground truth the lab scores detectors against (docs/architecture.md, *Glossary*: drill). It is one field of
the trainer config, ``drill = {kind = "lld", at_step = 40, strength = 4.0}``, so the run's config in the
store says which mechanism started when. Nothing changes before ``at_step``; from it on:

=============  ===========================================================================================
kind           effect (``strength`` = s)
=============  ===========================================================================================
``lld``        negative-gradient dominance (LLDS's mechanism, BAPO's imbalance): A<0 advantages × s,
               per optimizer step, so correct responses are pushed down through tokens they share
               with incorrect ones.
``isdd``       staleness: each rollout feeds s × (mini_batches × ppo_epochs) optimizer steps (s extra
               epochs over the same batch), so the ratios of A>0 tokens drift away from π_old.
``blowup``     learning rate × s.
``mismatch``   the rollout is sampled at temperature τ·s while π_old is recomputed at τ: logp_rollout ≠
               logp_old (a differently tempered inference engine).
``starvation`` a share s ∈ (0, 1] of each rollout's groups get reward 0 for every response (the verifier
               fails on those prompts): their advantages are 0.
``length``     a baseline s too low: every advantage A + s (> 0 on most responses). Under a per-sequence-mean
               loss (``aggregation = "seq_mean_token_mean"``, GRPO's paper default) the offset's gradient
               s·Σ_i ∇log π(y_i)/|y_i| is a score-function estimate of ∇ E[s/|y|]: the loss's length bias
               (Dr. GRPO, arXiv 2503.20783) pays for brevity while the recorded reward is the task's.
               (Under a token-sum loss the offset's term is s·Σ_i ∇log π(y_i), 0 in expectation.) Measured on
               the built-in search task it only trims rambling turns: every sampled response searches, so no
               shorter one is ever reinforced (docs/lab/length.md); it is meant for a task with slack.
``nonfinite``  at step N only, one value of the named ``tensor`` (``logp``, ``advantages``) becomes NaN
               before the objective: the loss turns NaN. (Measured: with ``logp`` the built-in objectives'
               ratio clamp passes no gradient through the NaN, so grad norm and weights stay finite and
               the run goes on.)
=============  ===========================================================================================

Rollout-level drills (isdd, mismatch, starvation) act on whole rollouts, so ``at_step`` must be a multiple of
``mini_batches × ppo_epochs``: a rollout then starts exactly at N, and the first affected optimizer step is N.

Hook points: the trainer calls these methods of :class:`Drill`, and no others (:data:`HOOKS`; a test checks the
loop against this list). Each returns its input unchanged when the drill is not active.

========================  =======================================  ===========================================
hook                      called by (trainer/…)                    acts on
========================  =======================================  ===========================================
``sampling_temperature``  ``loop.rollout``, once per rollout       the engine's sampling τ (mismatch)
``rewards``               ``batches.rollout_batch``, each try      the (B,) rewards (starvation)
``epochs``                ``loop.update``, once per rollout        passes over the rollout (isdd)
``advantages``            ``loop.optimizer_step``                  the step's (B,) advantages (lld, length,
                                                                   nonfinite/advantages)
``logp``                  ``step.micro_step``, first micro-batch   fresh log-probs (nonfinite/logp)
``lr``                    ``loop.optimizer_step``                  the step's learning rate (blowup)
========================  =======================================  ===========================================
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

KINDS = ("lld", "isdd", "blowup", "mismatch", "starvation", "length", "nonfinite")
ROLLOUT_KINDS = ("isdd", "mismatch", "starvation")
NONFINITE_TENSORS = ("logp", "advantages")
HOOKS = ("sampling_temperature", "rewards", "epochs", "advantages", "logp", "lr")
"""The methods the trainer calls (the module docstring's table says where)."""
DEFAULT_STRENGTH = {"lld": 4.0, "isdd": 4.0, "blowup": 20.0, "mismatch": 1.5, "starvation": 0.9, "length": 2.0,
                    "nonfinite": 1.0}


@dataclass(frozen=True)
class Drill:
    """One drill; ``Drill.none()`` changes nothing."""

    kind: str = ""
    """One of KINDS, or "" (no drill)."""
    at_step: int = 0
    """First optimizer step the mechanism acts on (the onset the lab scores delays from)."""
    strength: float = 0.0
    """Size of the effect (see the module table); 0 → the kind's default."""
    tensor: str = "logp"
    """nonfinite only: the tensor that receives the NaN (logp or advantages)."""

    @staticmethod
    def none() -> Drill:
        return Drill()

    @staticmethod
    def from_dict(data: Mapping[str, Any] | None) -> Drill:
        """Validated drill from the config's ``drill`` table (empty → no drill); errors name the key."""
        data = dict(data or {})
        if not data:
            return Drill()
        unknown = sorted(set(data) - {"kind", "at_step", "strength", "tensor"})
        if unknown:
            raise ValueError(f"drill: unknown key(s) {unknown}; known: kind, at_step, strength, tensor")
        kind = data.get("kind", "")
        if kind not in KINDS:
            raise ValueError(f"drill.kind: unknown {kind!r}; known: {', '.join(KINDS)}")
        at_step = data.get("at_step")
        if not isinstance(at_step, int) or isinstance(at_step, bool) or at_step < 0:
            raise ValueError(f"drill.at_step: must be an integer ≥ 0, got {at_step!r}")
        strength = data.get("strength", 0.0) or DEFAULT_STRENGTH[kind]
        if not isinstance(strength, (int, float)) or not math.isfinite(strength) or strength <= 0:
            raise ValueError(f"drill.strength: must be a finite number > 0, got {strength!r}")
        if kind == "starvation" and strength > 1:
            raise ValueError(f"drill.strength: starvation takes a share of groups in (0, 1], got {strength}")
        if kind == "isdd" and (strength < 1 or strength != int(strength)):
            raise ValueError(f"drill.strength: isdd takes an integer factor ≥ 1 of updates per rollout, "
                             f"got {strength}")
        tensor = data.get("tensor", "logp")
        if tensor not in NONFINITE_TENSORS:
            raise ValueError(f"drill.tensor: unknown {tensor!r}; known: {', '.join(NONFINITE_TENSORS)}")
        return Drill(kind, at_step, float(strength), tensor)

    def check_alignment(self, updates_per_rollout: int) -> None:
        """Rollout-level drills need a rollout to start at at_step (see the module docstring)."""
        if self.kind in ROLLOUT_KINDS and self.at_step % updates_per_rollout:
            raise ValueError(f"drill.at_step: a {self.kind} drill acts on whole rollouts, so at_step must be a "
                             f"multiple of mini_batches × ppo_epochs = {updates_per_rollout}, got {self.at_step}")

    def active(self, kind: str, step: int) -> bool:
        """Whether drill ``kind`` acts on optimizer step ``step`` (nonfinite: that one step only)."""
        if self.kind != kind:
            return False
        return step == self.at_step if kind == "nonfinite" else step >= self.at_step

    # -- the hooks the trainer calls (HOOKS; where: the module docstring) ---------------------------------

    def epochs(self, ppo_epochs: int, rollout_step: int) -> int:
        """Passes over a rollout that starts at optimizer step ``rollout_step`` (isdd: × strength)."""
        return ppo_epochs * int(self.strength) if self.active("isdd", rollout_step) else ppo_epochs

    def sampling_temperature(self, temperature: float, rollout_step: int) -> float:
        """Temperature the rollout engine samples (and reports logp_rollout) at (mismatch: τ × strength)."""
        return temperature * self.strength if self.active("mismatch", rollout_step) else temperature

    def rewards(self, rewards: torch.Tensor, group_ids: torch.Tensor, rollout_step: int,
                seed: int) -> torch.Tensor:
        """(B,) rewards with ceil(strength × n_groups) groups set to 0 (starvation), chosen by a seeded draw."""
        if not self.active("starvation", rollout_step):
            return rewards
        groups = torch.unique(group_ids)  # sorted
        n = math.ceil(self.strength * len(groups))
        gen = torch.Generator().manual_seed(seed * 1_000_003 + rollout_step)
        starved = groups[torch.randperm(len(groups), generator=gen)[:n]]
        return torch.where(torch.isin(group_ids, starved), torch.zeros_like(rewards), rewards)

    def advantages(self, adv: torch.Tensor, step: int, rows: torch.Tensor) -> torch.Tensor:
        """(B,) advantages optimizer step ``step`` trains on; ``rows`` are its mini-batch's rows.
        lld: A<0 × strength; length: A + strength; nonfinite/advantages: NaN on the mini-batch's first row."""
        if self.active("lld", step):
            return torch.where(adv < 0, adv * self.strength, adv)
        if self.active("length", step):
            return adv + self.strength
        if self.active("nonfinite", step) and self.tensor == "advantages":
            adv = adv.clone()
            adv[rows[0]] = float("nan")
        return adv

    def logp(self, logp: torch.Tensor, mask: torch.Tensor, step: int) -> torch.Tensor:
        """(b, T) log-probs with one model token of the first row set to NaN (nonfinite/logp), else as is.
        The NaN is *added*, so every op downstream sees it (whether the gradient does is the objective's business)."""
        if not (self.active("nonfinite", step) and self.tensor == "logp"):
            return logp
        nan = torch.zeros_like(logp)  # (b, T)
        t = int(torch.nonzero(mask[0])[0]) if bool(mask[0].any()) else 0
        nan[0, t] = float("nan")
        return logp + nan

    def lr(self, lr: float, step: int) -> float:
        """Learning rate of optimizer step ``step`` (blowup: × strength)."""
        return lr * self.strength if self.active("blowup", step) else lr
