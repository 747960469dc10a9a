"""Synthetic runs written straight into a store (no model, no probe): for dashboard tests, the benchmark
and screenshots. ``SyntheticRun`` writes through ``StoreWriter`` exactly as the recorder does (a segment
per table per flush), so the store layout is the real one.

The default story is a run that collapses: reward rises, then the likelihood of correct responses stalls
and decays (LLD), the ratio of A>0 tokens drifts down (ISDD) while the A>0 clip never fires, entropy rises
then falls, the grad norm spikes and reward drops. Events are never hand-written: each written step row
(its step metrics and logged scalars, as the ``steps`` view shows them) goes through a real
:class:`~collapsewatch.detectors.DetectorSuite`, and what it returns is written to ``events`` exactly as the
Monitor's recorder writes online events — so whatever the dashboard shows is what the detectors say.
(The labelled step series of the detector tests are :class:`collapsewatch.detectors.synthetic.LabelledRun`.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from collapsewatch.detectors import DetectorConfig, DetectorSuite, Event
from collapsewatch.offline import events_frame
from collapsewatch.store.writer import StoreWriter


@dataclass(frozen=True)
class Shape:
    """Size of each synthetic step."""

    seqs: int = 32              # sequences per step (sequence rows)
    token_seqs: int = 4         # of which keep token rows
    seq_len: int = 64           # tokens per kept sequence (an observation block of mask 0 in the middle)


def _curves(steps: np.ndarray, n_total: int, collapse: bool, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Step metrics as smooth stories plus noise; ``collapse`` bends them after 55 % of the run (the reward has
    fallen all the way by 85 %: a collapse must hold for 10 points to be one, ``collapsewatch.lab.labels``)."""
    t = steps / max(n_total - 1, 1)
    c = np.clip((t - 0.55) / 0.45, 0, 1) if collapse else np.zeros_like(t)  # 0 before, 1 at the end
    c_reward = np.clip((t - 0.55) / 0.3, 0, 1) if collapse else c  # 0 before, 1 from 85 % of the run on
    n = len(steps)
    noise = lambda s: rng.normal(0, s, n)  # noqa: E731
    reward = 0.15 + 0.6 / (1 + np.exp(-(t - 0.25) * 12)) - 0.55 * c_reward ** 1.5 + noise(0.03)
    p50_pos = np.exp(-1.2 * c ** 1.6 + noise(0.01))
    p05_pos = np.exp(-0.16 - 4.2 * c ** 1.3 + noise(0.03))
    out = {
        "reward_mean": np.clip(reward, 0, 1), "correct_frac": np.clip(reward + noise(0.02), 0, 1),
        "reward_std": np.full(n, 0.4), "zero_std_group_frac": np.clip(0.1 + 0.5 * c + noise(0.02), 0, 1),
        "entropy_mean": 1.2 + 0.8 * np.sin(np.pi * c) - 0.6 * c + noise(0.03),
        "ratio_p50_pos": p50_pos, "ratio_p05_pos": p05_pos, "ratio_p95_pos": np.exp(0.17 + 0.1 * c + noise(0.02)),
        "ratio_p01_pos": p05_pos * 0.5, "ratio_p99_pos": np.exp(0.3 + noise(0.02)),
        "ratio_p50_neg": np.exp(noise(0.01)), "ratio_p05_neg": np.exp(-0.18 + noise(0.02)),
        "ratio_p95_neg": np.exp(0.2 + 0.5 * c + noise(0.03)),
        "ratio_lt_0_1_frac_pos": np.clip(0.12 * c ** 2 + np.abs(noise(0.002)), 0, 1),
        "clip_low_frac": np.abs(0.012 + noise(0.002)), "clip_high_frac": np.abs(0.01 + 0.01 * c + noise(0.002)),
        "logp_old_mean_correct": -0.35 - 0.05 * t - 1.6 * c ** 2 + noise(0.01),
        "logp_old_mean_incorrect": -0.9 - 0.1 * t - 1.2 * c ** 2 + noise(0.015),
        "displacement_mean_correct": -0.002 - 0.08 * c ** 2 + noise(0.002),
        "displacement_mean_incorrect": -0.004 - 0.05 * c ** 2 + noise(0.002),
        "response_length_mean": 180 + 40 * t + 380 * c ** 2 + noise(4),
        "truncated_frac": np.clip(0.01 + 0.5 * c ** 2 + noise(0.005), 0, 1),
        "is_log_ratio_abs_mean": 0.015 + 0.05 * c + np.abs(noise(0.002)),
        "is_ess": np.clip(0.985 - 0.25 * c + noise(0.004), 0, 1),
    }
    out["entropy_p05"] = out["entropy_mean"] * 0.15
    out["entropy_p95"] = out["entropy_mean"] * 2.3
    out["clip_low_frac_pos"] = np.zeros(n)  # the clip that never fires: A>0, r < 1 − ε is not clipped
    out["grad_norm"] = np.exp(noise(0.15)) * (0.8 + 3 * c ** 3)
    spikes = rng.random(n) < (0.004 + 0.05 * c)
    out["grad_norm"][spikes] *= rng.uniform(4, 12, spikes.sum())
    return out


LR = 1e-6  # the learning rate every synthetic step logs


class SyntheticRun:
    """Writes a synthetic run step by step (``write(until)``), flushing a segment every ``flush_every``."""

    def __init__(self, store: str | Path, run: str, n_steps: int, *, shape: Shape = Shape(), collapse: bool = True,
                 on_policy: bool = False, seed: int = 0, flush_every: int = 10, config: dict | None = None,
                 vocab: int = 1000, heartbeat_s: float = 5.0, objective: str = "grpo",
                 templates: tuple[np.ndarray, ...] | None = None, detectors: DetectorConfig | None = None) -> None:
        """``templates``: (token ids, observation mask[, present]), each (n, seq_len): kept sequences cycle
        through these rows instead of random ids with an observation block in the middle (e.g. tokenized
        agent traces); positions where ``present`` is False are not written (shorter sequences).
        ``detectors``: the configuration of the suite whose events are written (default config)."""
        self.writer = StoreWriter(store, run, heartbeat_s=heartbeat_s)
        self.suite = DetectorSuite(detectors)
        self.writer.set_run_info(objective=objective, config=config or {"synthetic": True},
                                 versions={"detector_rules": self.suite.rules})  # as the Monitor records it
        self.run, self.n_steps, self.shape, self.on_policy = run, n_steps, shape, on_policy
        self.collapse, self.flush_every, self.vocab, self.templates = collapse, flush_every, vocab, templates
        self.rng = np.random.default_rng(seed)
        self.curves = _curves(np.arange(n_steps), n_steps, collapse, self.rng)
        self.next_step = 0
        self.writer.flush()

    def write(self, until: int | None = None, events: bool = True) -> None:
        """Write steps [next_step, until) (default: to the end), each flush with the events the detectors
        returned for its steps (``events=False``: none are written; the suite still sees the rows)."""
        until = self.n_steps if until is None else min(until, self.n_steps)
        while self.next_step < until:
            hi = min(until, (self.next_step // self.flush_every + 1) * self.flush_every)
            steps = np.arange(self.next_step, hi)
            self._chunk(steps)
            found = self._detect(steps)
            if events and found:
                self.writer.append("events", events_frame(self.run, 0, found, "online", self.suite.rules))
            self.next_step = hi
            self.writer.flush()

    def close(self, status: str = "finished") -> None:
        self.writer.flush(status=status)

    def _metrics(self, steps: np.ndarray) -> dict[str, np.ndarray]:
        """The step_metrics columns of these steps (ratio, clip and displacement NULL on-policy)."""
        metrics = {k: v[steps] for k, v in self.curves.items() if k != "grad_norm"}
        if self.on_policy:
            for k in [k for k in metrics if k.startswith(("ratio_", "clip_", "displacement_"))]:
                metrics[k] = np.full(len(steps), np.nan)
        return metrics

    def _chunk(self, steps: np.ndarray) -> None:
        w, n = self.writer, len(steps)
        metrics = self._metrics(steps)
        base = {"run": [w.run] * n, "rank": np.zeros(n, dtype=np.int64), "step": steps}
        w.append("step_metrics", {**base, **metrics, "ts": [_now()] * n, "n_seqs": np.full(n, self.shape.seqs),
                                  "n_model_tokens": np.full(n, self.shape.seqs * 100),
                                  "on_policy": np.full(n, self.on_policy)})
        keys = ("grad_norm", "lr")
        w.append("scalars", {"run": [w.run] * (2 * n), "rank": np.zeros(2 * n, dtype=np.int64),
                             "step": np.repeat(steps, 2), "key": list(keys) * n,
                             "value": np.column_stack([self.curves["grad_norm"][steps], np.full(n, LR)]).ravel()})
        self._sequences(steps)
        self._tokens(steps)

    def _sequences(self, steps: np.ndarray) -> None:
        s, w = self.shape, self.writer
        step = np.repeat(steps, s.seqs)
        seq = np.tile(np.arange(s.seqs), len(steps))
        reward = (self.rng.random(len(step)) < self.curves["reward_mean"][step]).astype(float)
        w.append("sequences", {"run": [w.run] * len(step), "rank": np.zeros(len(step), dtype=np.int64),
                               "step": step, "seq_id": seq, "group_id": seq // 8, "reward": reward,
                               "advantage": reward - self.curves["reward_mean"][step], "correct": reward > 0.5,
                               "n_model_tokens": np.full(len(step), s.seq_len * 3 // 4),
                               "displacement_mean": self.curves["displacement_mean_correct"][step],
                               "entropy_mean": self.curves["entropy_mean"][step]})

    def _tokens(self, steps: np.ndarray) -> None:
        s, w, rng = self.shape, self.writer, self.rng
        k, L = s.token_seqs, s.seq_len
        n = len(steps) * k * L
        step = np.repeat(steps, k * L)
        seq = np.tile(np.repeat(np.arange(k), L), len(steps))
        pos = np.tile(np.arange(L), len(steps) * k)
        obs = (pos >= L // 3) & (pos < L // 3 + L // 6)  # a tool observation block: mask 0
        ids = rng.integers(0, self.vocab, n)
        present = np.ones(n, dtype=bool)
        if self.templates is not None:
            row = (step * k + seq) % len(self.templates[0])
            ids, obs = self.templates[0][row, pos], self.templates[1][row, pos]
            if len(self.templates) > 2:
                present = self.templates[2][row, pos]
        adv_pos = seq % 2 == 0
        mu = np.where(adv_pos, np.log(self.curves["ratio_p50_pos"][step]), 0.0) * (0.5 + pos / L)
        log_ratio = np.where(obs, np.nan, mu + rng.normal(0, 0.08, n))
        if self.on_policy:
            log_ratio = np.where(obs, np.nan, 0.0)
        logp_old = -rng.gamma(1.0, 0.6, n)
        entropy = np.where(obs, np.nan, rng.gamma(2.0, self.curves["entropy_mean"][step] / 2))
        o = obs.reshape(-1, L).astype(np.int8)  # (kept sequences, L): a new turn id at every block boundary
        turn = np.cumsum(np.concatenate([np.zeros((len(o), 1), np.int8), np.diff(o, axis=1) != 0], axis=1), axis=1)
        cols = {"run": [w.run] * n, "rank": np.zeros(n, dtype=np.int64), "step": step, "seq_id": seq,
                "pos": pos.astype(np.int32), "token_id": ids, "turn_id": turn.ravel().astype(np.int32), "mask": ~obs,
                "advantage": np.where(adv_pos, 0.5, -0.5), "logp_old": np.where(obs, np.nan, logp_old),
                "logp": np.where(obs, np.nan, logp_old + log_ratio), "log_ratio": log_ratio,
                "ratio": np.exp(log_ratio), "entropy": entropy}
        if not present.all():
            cols = {k: (np.asarray(v)[present] if k != "run" else [w.run] * int(present.sum())) for k, v in cols.items()}
        w.append("tokens", cols)

    def _detect(self, steps: np.ndarray) -> list[Event]:
        """The detectors over these steps' rows, as the recorder runs them online."""
        metrics = self._metrics(steps)
        found: list[Event] = []
        for i, step in enumerate(steps):
            row = {k: v[i] for k, v in metrics.items()}
            found += self.suite.update(dict(row, step=int(step), on_policy=self.on_policy,
                                            grad_norm=self.curves["grad_norm"][step], lr=LR))
        return found


def _now():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


def build_store(store: str | Path, runs: dict[str, dict] | None = None) -> Path:
    """A store holding the given synthetic runs ({name: SyntheticRun kwargs}); default: one collapsing run,
    one healthy run and one on-policy run of 300 steps each."""
    runs = runs or {"collapse-grpo": dict(n_steps=300), "healthy-llds": dict(n_steps=300, collapse=False, seed=1, objective="llds"),
                    "onpolicy-grpo": dict(n_steps=300, collapse=False, on_policy=True, seed=2)}
    for name, kwargs in runs.items():
        r = SyntheticRun(store, name, **kwargs)
        r.write()
        r.close()
    return Path(store)
