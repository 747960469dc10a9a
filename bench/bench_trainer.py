"""The built-in trainer's costs: where a step's time goes, what the monitor adds, and tokens/s against TRL's GRPOTrainer.

Three measurements, each side by side in one process, alternating which variant runs first in every round so that
drifting background load on a shared machine hits all variants alike; tables give medians over rounds.

1. **Step-time breakdown** of ``collapsewatch train`` at default settings except ``prompts_per_rollout=4`` (4 × G=8 =
   32 episodes of up to 4 turns per rollout, 2 optimizer steps per rollout), from the monitor-on runs of (2).
   Timed on the training thread by wrapping, at run time, ``HFRolloutEngine.rollout``, ``loop.old_logps``,
   ``loop.micro_step`` (its own forward / backward split), ``clip_grad_norm_`` + the optimizer step (global step
   hooks), ``Monitor.observe`` / ``log``; "other" is the rest of the step's wall time. The recorder thread's CPU
   time is measured with ``time.thread_time`` inside ``Recorder._observe`` (probe + row building), ``_finalize``
   (step metrics + online detectors), ``_log`` and ``_flush`` (Parquet segments). It runs concurrently with
   training, so it is not part of the wall-time sum.
2. **Monitor overhead**: the same runs with ``monitor=False`` (a no-op Monitor) and ``monitor=True``, wall and process
   CPU per step (medians, median of the per-round paired ratios, best of rounds), the process CPU split into the
   training thread, the recorder thread (read through ``pthread_getcpuclockid``) and the rest, and the monitor's own
   time measured directly. Both variants draw the same random numbers (the monitor consumes none), so they train on
   identical rollouts (the bench checks that their reward histories match): the training thread does the same work
   in both, and the spread of its per-round CPU ratio is the noise floor of the end-to-end comparison.
3. **Tokens/s vs TRL** on the built-in tiny model (``load_policy("builtin:tiny")``, its tokenizer and chat template):
   TRL ``GRPOTrainer`` vs the built-in trainer with ``max_turns=1`` (one model turn, no observation), same prompts
   (the knowledge base's training questions through ``task_messages``), G=8, 4 prompts per generation, 2 optimizer
   steps of 16 completions per generation (TRL: ``per_device_train_batch_size=16, steps_per_generation=2``), at most
   L completion tokens, temperature 1, no top-k/top-p, lr 5e-5, no KL term, exact-match reward of
   ``<answer>…</answer>``. Two length regimes:

   * ``stop``: completions end at EOS, ``</search>`` or ``</answer>`` in both (the built-in engine's stop strings are
     single tokens of this tokenizer; TRL gets them as extra EOS ids of the model's generation config);
   * ``fixed``: every completion is exactly L tokens (TRL: ``min_new_tokens=L``; built-in: the engine's stop strings
     and EOS ids removed at run time), so generation length does not depend on what each trainer happened to sample.

   Tokens/s = completion tokens generated (TRL: ``completion_mask``; built-in: ``loss_mask``) per wall second over
   whole generation+update cycles 2..N/2 (the first is warm-up), including generation, rewards, π_old, updates.

Torch runs with ``--threads`` intra-op threads (default 1; on a shared 2-core machine two OpenMP threads stall
unpredictably under background load). Model set-up, the end-of-run checkpoint and the store's close/compaction are
outside the timed window; open + close of the monitor is reported once per run. The default run took 170 s on the
2-core machine when it was quiet, 409 s at load average 5 (``--aa`` adds half of sections 1-2 again).

    COLLAPSEWATCH_CACHE=/tmp/cwcache python -m bench.bench_trainer [--steps 12] [--rounds 7] [--threads 1]
        [--trl-steps 10] [--L 40] [--modes stop,fixed] [--parts 1,2,3] [--aa]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import io
import os
import re
import statistics
import tempfile
import time
import warnings
from collections import defaultdict

import torch

from collapsewatch.monitor import Monitor
from collapsewatch.recorder import Recorder
from collapsewatch.rollout.hf import HFRolloutEngine
from collapsewatch.trainer import loop
from collapsewatch.trainer.config import load_config

BASE = dict(prompts_per_rollout=4, group_size=8, progress=False)  # everything else: TrainConfig defaults
PROMPTS, G, UPDATES = 4, 8, 2  # section 3: prompts per generation, group size, optimizer steps per generation


class Clock:
    """What one run measured. Training-thread times count only inside the window: from the start of the second
    rollout to the end of the last optimizer step (whole rollouts; the first one is warm-up)."""

    def __init__(self) -> None:
        self.active = False
        self.rollouts = 0
        self.steps_total = 0  # Monitor.log calls (one per optimizer step)
        self.first_step = 0  # step number of the window's first optimizer step
        self.steps = 0  # optimizer steps in the window
        self.t: dict[str, float] = defaultdict(float)  # training-thread seconds in the window
        self.rec: dict[str, float] = defaultdict(float)  # recorder-thread CPU seconds
        self.tokens = 0  # model tokens generated in the window
        self.prompt_len: list[float] = []  # mean prompt tokens per rollout in the window
        self.start = self.end = (0.0, 0.0)  # (wall, process CPU)
        self.threads_start = self.threads_end = (0.0, 0.0)  # CPU of (training thread, recorder thread)
        self.recorder: Recorder | None = None
        self.fixed = 0.0  # Monitor open + close, seconds (training thread, once per run)


C = Clock()
FIXED_LENGTH = {"on": False}  # section 3 "fixed": the built-in engine runs every turn to its token budget


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _threads() -> tuple[float, float]:
    """CPU seconds of this (the training) thread and of the recorder thread (0 when there is none)."""
    rec = C.recorder
    rec_cpu = 0.0
    if rec is not None and rec.ident is not None and rec.is_alive():
        try:
            rec_cpu = time.clock_gettime(time.pthread_getcpuclockid(rec.ident))
        except OSError:  # the thread ended between the check and the read
            rec_cpu = 0.0
    return time.thread_time(), rec_cpu


def _timed(key: str):
    """Add the call's wall time to C.t[key] while the window is open."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not C.active:
                return fn(*args, **kwargs)
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                C.t[key] += time.perf_counter() - t
        return wrapper
    return deco


_NESTED = {"t": 0.0}  # recorder-thread CPU of wrapped calls so far, to subtract nested calls from their caller


def _thread_cpu(key: str, step_of):
    """Add the recorder thread's CPU time in the call to C.rec[key] when ``step_of(self, *args)`` is in the window
    (None: always, as long as the run is open)."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            step = step_of(self, *args)
            t, nested0 = time.thread_time(), _NESTED["t"]
            try:
                return fn(self, *args, **kwargs)
            finally:
                spent = time.thread_time() - t
                own = spent - (_NESTED["t"] - nested0)  # _observe / _log finalise the previous step inside
                _NESTED["t"] = nested0 + spent
                if step is None or (step is not False and step >= C.first_step and C.rollouts >= 2):
                    C.rec[key] += own
        return wrapper
    return deco


def instrument() -> None:
    """Wrap the trainer's and the monitor's methods (classes and module attributes, at run time)."""
    rollout = HFRolloutEngine.rollout

    @functools.wraps(rollout)
    def timed_rollout(self, *args, **kwargs):
        C.rollouts += 1
        if C.rollouts == 2:
            C.active, C.first_step, C.start, C.threads_start = True, C.steps_total, _now(), _threads()
        t = time.perf_counter()
        batch = rollout(self, *args, **kwargs)
        if C.active:
            C.t["rollout"] += time.perf_counter() - t
            C.tokens += int(batch.loss_mask.sum())
            C.prompt_len.append(float(batch.response_start.float().mean()))
        return batch
    HFRolloutEngine.rollout = timed_rollout

    init = HFRolloutEngine.__init__

    @functools.wraps(init)
    def engine_init(self, model, tokenizer, config=None):
        if FIXED_LENGTH["on"]:
            config = dataclasses.replace(config, stop_strings=())
        init(self, model, tokenizer, config)
        if FIXED_LENGTH["on"]:
            self.eos_ids = []  # no stop token: each turn runs to max_turn_tokens
    HFRolloutEngine.__init__ = engine_init

    loop.old_logps = _timed("old_logps")(loop.old_logps)
    micro = loop.micro_step

    @functools.wraps(micro)
    def micro_step(inputs, rows, tally, *args, **kwargs):  # the tally holds the step's forward / backward seconds
        before = (tally.sums["time/forward"], tally.sums["time/backward"])
        out = micro(inputs, rows, tally, *args, **kwargs)
        if C.active:
            C.t["forward"] += tally.sums["time/forward"] - before[0]
            C.t["backward"] += tally.sums["time/backward"] - before[1]
        return out
    loop.micro_step = micro_step

    torch.nn.utils.clip_grad_norm_ = _timed("optimizer")(torch.nn.utils.clip_grad_norm_)
    opt_t0 = {}

    def pre_hook(opt, args, kwargs):
        opt_t0["t"] = time.perf_counter()

    def post_hook(opt, args, kwargs):
        if C.active and "t" in opt_t0:
            C.t["optimizer"] += time.perf_counter() - opt_t0.pop("t")
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    register_optimizer_step_pre_hook(pre_hook)
    register_optimizer_step_post_hook(post_hook)

    Monitor.observe = _timed("monitor")(Monitor.observe)
    log = _timed("monitor")(Monitor.log)

    @functools.wraps(log)
    def monitor_log(self, step, scalars):
        out = log(self, step, scalars)
        C.steps_total += 1
        if C.active:
            C.steps += 1
            C.end, C.threads_end = _now(), _threads()
        return out
    Monitor.log = monitor_log

    for name in ("__init__", "close"):
        fn = getattr(Monitor, name)

        def once(*args, _fn=fn, _name=name, **kwargs):
            if _name == "close":
                C.active = False
            t = time.perf_counter()
            try:
                return _fn(*args, **kwargs)
            finally:
                C.fixed += time.perf_counter() - t
                if _name == "__init__" and args[0].enabled:
                    C.recorder = args[0]._recorder
        setattr(Monitor, name, functools.wraps(fn)(once))

    Recorder._observe = _thread_cpu("probe", lambda self, step, *a: step)(Recorder._observe)
    Recorder._log = _thread_cpu("scalars", lambda self, step, *a: step)(Recorder._log)
    Recorder._finalize = _thread_cpu("step_metrics", lambda self: self._step if self._step is not None else False)(
        Recorder._finalize)
    # segment writes: every flush but the closing one, spread over all steps of the run (flushes are periodic)
    Recorder._flush = _thread_cpu("writes", lambda self, status=None: None if status is None else False)(
        Recorder._flush)


# -- built-in trainer runs --------------------------------------------------------------------------------------
def builtin_run(workdir: str, name: str, steps: int, **overrides) -> dict:
    global C
    C = Clock()
    cfg = load_config(store=os.path.join(workdir, name), run=name, steps=steps, **{**BASE, **overrides})
    with contextlib.redirect_stderr(io.StringIO()):  # detector events the trainer prints (e.g. starvation)
        result = loop.train(cfg)
    n = C.steps
    (w0, c0), (w1, c1) = C.start, C.end
    out = {"wall": (w1 - w0) / n, "cpu": (c1 - c0) / n, "tokens_per_s": C.tokens / (w1 - w0),
           "tokens_per_rollout": C.tokens / max(1, C.rollouts - 1), "fixed": C.fixed,
           "rewards": tuple(result.reward_history), "prompt_len": statistics.mean(C.prompt_len)}
    out.update({k: v / n for k, v in C.t.items()})
    out["other"] = out["wall"] - sum(C.t.values()) / n
    out["cpu_train_thread"] = (C.threads_end[0] - C.threads_start[0]) / n
    out["cpu_recorder_thread"] = (C.threads_end[1] - C.threads_start[1]) / n
    out["cpu_other_threads"] = out["cpu"] - out["cpu_train_thread"] - out["cpu_recorder_thread"]
    out.update({f"rec_{k}": v / (steps if k == "writes" else n) for k, v in C.rec.items()})
    out["rec_total"] = sum(v for k, v in out.items() if k.startswith("rec_"))
    out["gen_per_rollout"] = C.t["rollout"] / max(1, C.rollouts - 1)
    return out


def bench_monitor(rounds: int, steps: int, aa: bool = False) -> dict[str, list[dict]]:
    """Monitor off / on (and, with ``aa``, a second monitor-off run: the A/A noise floor), order rotated per round."""
    variants = ("off", "on", "off2") if aa else ("off", "on")
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as workdir:
        builtin_run(workdir, "warmup", 4, monitor=True)
        for r in range(rounds):
            k = r % len(variants)
            order = (variants[k:] + variants[:k]) if aa else (variants if r % 2 == 0 else variants[::-1])
            for v in order:
                runs[v].append(builtin_run(workdir, f"r{r}-{v}", steps, monitor=v == "on"))
    return runs


# -- TRL runs ----------------------------------------------------------------------------------------------------
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def exact_match_reward(completions, answers, **kwargs) -> list[float]:
    """1 when the completion's first <answer>…</answer> matches a gold answer (SQuAD-normalised), else 0."""
    from collapsewatch.env import exact_match

    out = []
    for c, gold in zip(completions, answers, strict=True):
        text = c[-1]["content"] if isinstance(c, list) else c
        m = _ANSWER.search(text)
        out.append(exact_match(m.group(1).strip(), gold) if m else 0.0)
    return out


def trl_run(workdir: str, steps: int, L: int, mode: str) -> dict:
    from datasets import Dataset
    from transformers import PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from collapsewatch.env import STOP_STRINGS, build_kb, task_messages
    from collapsewatch.models import load_policy

    policy = load_policy("builtin:tiny")
    tok, model = policy.tokenizer, policy.model.train()
    train_tasks, _ = build_kb(policy.kb_config).split()
    extra: dict = {}
    if mode == "stop":  # the built-in engine's turn end: EOS or a stop string (one token each here)
        model.generation_config.eos_token_id = [tok.eos_token_id, *tok.convert_tokens_to_ids(list(STOP_STRINGS))]
    else:
        extra["generation_kwargs"] = {"min_new_tokens": L}
    ds = Dataset.from_dict({"prompt": [task_messages(t) for t in train_tasks],
                            "answers": [list(t.answers) for t in train_tasks]})
    args = GRPOConfig(output_dir=os.path.join(workdir, "trl"), use_cpu=True, bf16=False, report_to=[],
                      save_strategy="no", disable_tqdm=True, seed=0, learning_rate=5e-5,
                      per_device_train_batch_size=PROMPTS * G // UPDATES, num_generations=G,
                      steps_per_generation=UPDATES, max_completion_length=L, max_steps=steps, **extra)
    trainer = GRPOTrainer(model=model, reward_funcs=exact_match_reward, args=args, train_dataset=ds,
                          processing_class=tok)
    clock = {"wall": [], "cpu": [], "tokens": [], "prompt": [], "gen": 0.0}
    score = trainer._generate_and_score_completions
    generate = trainer._generate

    def scored(inputs):
        out = score(inputs)
        clock["tokens"].append(int(out["completion_mask"].sum()))
        clock["prompt"].append(float(out["prompt_mask"].sum(1).float().mean()))
        return out

    def timed_generate(*a, **k):
        t = time.perf_counter()
        try:
            return generate(*a, **k)
        finally:
            if clock["tokens"]:  # not the first (warm-up) generation
                clock["gen"] += time.perf_counter() - t

    trainer._generate_and_score_completions, trainer._generate = scored, timed_generate

    class StepClock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            w, c = _now()
            clock["wall"].append(w)
            clock["cpu"].append(c)

    trainer.add_callback(StepClock())
    trainer.remove_callback(PrinterCallback)  # disable_tqdm=True would print every log dict
    trainer.train()
    n = steps - UPDATES
    wall = clock["wall"][-1] - clock["wall"][UPDATES - 1]
    tokens = sum(clock["tokens"][1:])
    return {"wall": wall / n, "cpu": (clock["cpu"][-1] - clock["cpu"][UPDATES - 1]) / n, "tokens_per_s": tokens / wall,
            "tokens_per_rollout": tokens / (len(clock["tokens"]) - 1), "gen_per_rollout": clock["gen"] / (len(
                clock["tokens"]) - 1), "prompt_len": statistics.mean(clock["prompt"])}


def bench_trl(rounds: int, steps: int, L: int, mode: str) -> dict[str, list[dict]]:
    variants = ("trl", "builtin-off", "builtin-on")
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    single = dict(max_turns=1, max_turn_tokens=L, prompts_per_rollout=PROMPTS, group_size=G, mini_batches=UPDATES)

    def one(workdir: str, v: str, r: int, n: int) -> dict:
        if v == "trl":
            return trl_run(workdir, n, L, mode)
        FIXED_LENGTH["on"] = mode == "fixed"
        try:
            return builtin_run(workdir, f"{mode}-{v}-{r}", n, monitor=v == "builtin-on", **single)
        finally:
            FIXED_LENGTH["on"] = False

    with tempfile.TemporaryDirectory() as workdir:
        for v in variants:
            one(workdir, v, -1, 2 * UPDATES)  # warm-up
        for r in range(rounds):
            k = r % len(variants)
            for v in variants[k:] + variants[:k]:
                runs[v].append(one(workdir, v, r, steps))
    return runs


# -- tables ------------------------------------------------------------------------------------------------------
def med(runs: list[dict], key: str) -> float:
    return statistics.median(x.get(key, 0.0) for x in runs)


def pct(new: float, old: float) -> str:
    return f"{100 * (new - old) / old:+.1f} %"


def table_breakdown(on: list[dict], off: list[dict]) -> None:
    parts = [("rollout: generation + environment (a rollout feeds 2 steps)", "rollout"),
             ("π_old log-probs (no-grad forward over the rollout)", "old_logps"),
             ("forward (policy log-probs + entropy, objective, aggregation)", "forward"),
             ("backward", "backward"),
             ("grad-norm clip + AdamW step", "optimizer"),
             ("monitor on the training thread (`observe` + `log`: validate, copy, enqueue)", "monitor"),
             ("other (advantages, mini-batch slicing, progress, Python)", "other")]
    print(f"\n### 1. Step-time breakdown (monitor on; training thread, wall; medians of {len(on)} runs)\n")
    print("| component | s / optimizer step | share of the step |")
    print("|---|---|---|")
    for label, key in parts:
        share = statistics.median(x.get(key, 0.0) / x["wall"] for x in on)
        print(f"| {label} | {med(on, key):.4f} | {100 * share:.1f} % |")
    print(f"| **total wall per optimizer step** | **{med(on, 'wall'):.4f}** | 100 % |")
    cpu_off = med(off, "cpu")
    print("\nMonitor background thread (recorder), CPU time inside its methods, concurrent with training:\n")
    print("| recorder work | CPU s / step | vs monitor-off process CPU / step |")
    print("|---|---|---|")
    for label, key in [("probe: token + sequence metrics, row building (`_observe`)", "rec_probe"),
                       ("step metrics + online detectors (`_finalize`)", "rec_step_metrics"),
                       ("scalars (`_log`)", "rec_scalars"),
                       ("Parquet segment writes (periodic `_flush`)", "rec_writes"),
                       ("**total**", "rec_total")]:
        v = med(on, key)
        print(f"| {label} | {v:.4f} | {100 * v / cpu_off:.2f} % |")


def table_overhead(on: list[dict], off: list[dict], off2: list[dict] | None = None) -> None:
    print(f"\n### 2. Monitor overhead (monitor=False vs True, {len(on)} rounds each, alternating)\n")
    print("| per optimizer step | monitor off (median) | monitor on (median) | on vs off: medians "
          "| paired rounds, median | best of rounds |")
    print("|---|---|---|---|---|---|")
    rows = (("wall s", "wall"), ("process CPU s (all threads)", "cpu"),
            ("… training thread CPU s", "cpu_train_thread"), ("… recorder thread CPU s (whole thread)",
                                                              "cpu_recorder_thread"),
            ("… other threads CPU s (pyarrow / torch pools)", "cpu_other_threads"))
    for label, key in rows:
        a, b = med(off, key), med(on, key)
        if a > 1e-3:
            paired = statistics.median(y[key] / x[key] for x, y in zip(off, on, strict=True))
            best = min(y[key] for y in on) / min(x[key] for x in off)
            cols = f"{pct(b, a)} | {100 * (paired - 1):+.1f} % | {100 * (best - 1):+.1f} %"
        else:
            cols = f"{b - a:+.4f} s | | "
        print(f"| {label} | {a:.4f} | {b:.4f} | {cols} |")
    direct = [x["monitor"] + x["rec_total"] for x in on]
    print(f"| monitor's own time, measured directly (training-thread calls + recorder methods' CPU) | — | "
          f"{statistics.median(direct):.4f} | {100 * statistics.median(direct) / med(off, 'cpu'):+.1f} % of off CPU | | |")
    wr = sorted(b["wall"] / a["wall"] for a, b in zip(off, on, strict=True))
    cr = sorted(b["cpu"] / a["cpu"] for a, b in zip(off, on, strict=True))
    tr = sorted(b["cpu_train_thread"] / a["cpu_train_thread"] for a, b in zip(off, on, strict=True))
    print(f"\nPer-round on/off ratios (paired by round) — wall: {', '.join(f'{x:.3f}' for x in wr)}; "
          f"process CPU: {', '.join(f'{x:.3f}' for x in cr)}; training-thread CPU: {', '.join(f'{x:.3f}' for x in tr)}")
    if off2:
        for key, label in (("wall", "wall"), ("cpu", "process CPU")):
            aa = sorted(y[key] / x[key] for x, y in zip(off, off2, strict=True))
            print(f"A/A noise floor, {label}: second monitor-off run / first, per round {', '.join(f'{x:.3f}' for x in aa)}"
                  f" (median {100 * (statistics.median(aa) - 1):+.1f} %)")
    print(f"Once per run (not per step): Monitor open + close (final flush, compaction) {med(on, 'fixed'):.2f} s.")
    same = all(x["rewards"] == off[0]["rewards"] for x in on + off + (off2 or []))
    print(f"Same rollouts with the monitor on and off (reward histories equal): {'yes' if same else 'NO'}.")


def table_trl(mode: str, L: int, runs: dict[str, list[dict]]) -> None:
    title = {"stop": "completions end at EOS / </search> / </answer>", "fixed": f"every completion exactly {L} tokens"}
    print(f"\n### 3. Tokens/s vs TRL GRPOTrainer — `{mode}`: {title[mode]} (L = {L}, {len(runs['trl'])} rounds)\n")
    print("| trainer | completion tokens / generation | generation s / rollout | wall s / optimizer step "
          "| completion tokens / s | vs TRL |")
    print("|---|---|---|---|---|---|")
    base = med(runs["trl"], "tokens_per_s")
    for v, label in (("trl", "TRL GRPOTrainer"), ("builtin-off", "built-in, monitor off"),
                     ("builtin-on", "built-in, monitor on (default)")):
        tps = med(runs[v], "tokens_per_s")
        ratios = sorted(b["tokens_per_s"] / a["tokens_per_s"] for a, b in zip(runs["trl"], runs[v], strict=True))
        spread = "" if v == "trl" else f" (rounds {ratios[0]:.2f}–{ratios[-1]:.2f})"
        print(f"| {label} | {med(runs[v], 'tokens_per_rollout'):.0f} | {med(runs[v], 'gen_per_rollout'):.3f} | "
              f"{med(runs[v], 'wall'):.3f} | {tps:.0f} | {tps / base:.2f}×{spread} |")
    print(f"\nMean prompt length: TRL {med(runs['trl'], 'prompt_len'):.1f} tokens, built-in "
          f"{med(runs['builtin-off'], 'prompt_len'):.1f} tokens.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12, help="optimizer steps per run of sections 1-2 (even, >= 4)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--trl-steps", type=int, default=10, help="optimizer steps per run of section 3 (even, >= 4)")
    ap.add_argument("--L", type=int, default=40, help="max completion tokens in section 3 (= max_turn_tokens)")
    ap.add_argument("--modes", default="stop,fixed", help="section 3 length regimes: stop, fixed")
    ap.add_argument("--parts", default="1,2,3")
    ap.add_argument("--aa", action="store_true", help="section 2: add a second monitor-off run per round (noise floor)")
    a = ap.parse_args()
    for n in (a.steps, a.trl_steps):
        if n < 4 or n % UPDATES:
            raise SystemExit("--steps / --trl-steps must be even and >= 4")
    warnings.filterwarnings("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.set_num_threads(a.threads)
    instrument()
    parts = set(a.parts.split(","))
    import transformers

    try:
        import trl
        trl_version = trl.__version__
    except ImportError:
        trl_version = None
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl_version}, "
          f"{a.threads} torch thread(s), {os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.1f}")
    t0 = time.perf_counter()
    if parts & {"1", "2"}:
        print(f"sections 1-2: built-in trainer, {BASE}, otherwise TrainConfig defaults; {a.steps} steps per run, "
              f"timed steps {UPDATES}..{a.steps - 1}")
        runs = bench_monitor(a.rounds, a.steps, a.aa)
        if "1" in parts:
            table_breakdown(runs["on"], runs["off"])
        if "2" in parts:
            table_overhead(runs["on"], runs["off"], runs.get("off2"))
    if "3" in parts:
        if trl_version is None:
            print("\n### 3. skipped: trl is not installed")
        else:
            for mode in a.modes.split(","):
                table_trl(mode, a.L, bench_trl(a.rounds, a.trl_steps, a.L, mode))
    print(f"\n(bench took {time.perf_counter() - t0:.0f} s; load average at end {os.getloadavg()[0]:.1f}; "
          f"torch threads at end {torch.get_num_threads()})")


if __name__ == "__main__":
    main()
