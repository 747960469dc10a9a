"""Probe cost vs a training step, side by side in one run.

Prints the time of (a) forward+backward of a small Qwen2 on a B×T batch, (b) `Monitor.observe` on the
training thread (validate + detached copy + enqueue), (c) the probe's full computation (token, sequence and
step metrics) that runs on the recorder thread. Vocabulary-sized entropy is excluded (trainers compute it).

    python bench/bench_probe.py [--B 64] [--T 512] [--repeats 5] [--no-turn-ids]

``--no-turn-ids`` drops the batch's turn ids: the per-turn ratio metrics are then NULL and not computed (the
difference of the two runs is their cost; the LLDS gate then groups maximal mask runs instead).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from collapsewatch import Monitor, TokenBatch
from collapsewatch.probe import ClipSpec
from collapsewatch.step_metrics import compute_step_metrics, observe_part


def batch(B: int, T: int) -> TokenBatch:
    g = torch.Generator().manual_seed(0)
    logp_old = -torch.rand(B, T, generator=g) * 3
    return TokenBatch(
        logp=logp_old + 0.1 * torch.randn(B, T, generator=g), mask=(torch.rand(B, T, generator=g) > 0.2).float(),
        logp_old=logp_old, logp_rollout=logp_old + 0.01 * torch.randn(B, T, generator=g),
        entropy=torch.rand(B, T, generator=g), advantages=torch.randn(B, generator=g),
        token_ids=torch.randint(0, 1000, (B, T), generator=g), turn_ids=torch.randint(0, 4, (B, T), generator=g),
        group_ids=torch.arange(B) // 8, rewards=(torch.rand(B, generator=g) > 0.5).float())


def timeit(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def probe_compute(b: TokenBatch) -> None:
    compute_step_metrics([observe_part(b, ClipSpec())])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--B", type=int, default=64)
    ap.add_argument("--T", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-turn-ids", action="store_true", help="batch without turn ids (no per-turn metrics)")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=1024, hidden_size=128, intermediate_size=384,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         tie_word_embeddings=True))
    ids = torch.randint(0, 1024, (args.B, args.T))
    b = batch(args.B, args.T)
    if args.no_turn_ids:
        b.turn_ids = None

    def fwd_bwd() -> None:
        logits = model(ids).logits
        logp = torch.log_softmax(logits.float(), -1).gather(-1, ids[..., None]).squeeze(-1)
        logp.mean().backward()

    with tempfile.TemporaryDirectory() as d:
        mon = Monitor(d, run="bench", detectors=False, queue_size=1024)
        step = iter(range(10**9))
        t_fb = timeit(fwd_bwd, args.repeats)
        t_obs = timeit(lambda: mon.observe(b, step=next(step)), args.repeats)
        t_probe = timeit(lambda: probe_compute(b), args.repeats)
        mon.close(compact=False)
    print(f"batch {args.B}×{args.T}{'' if b.turn_ids is not None else ' (no turn ids)'}, Qwen2 L2/d128/V1024, "
          f"{torch.get_num_threads()} threads, median of {args.repeats}")
    print(f"{'what':<44}{'seconds':>10}{'× fwd+bwd':>12}")
    for name, t in (("forward+backward (training step work)", t_fb),
                    ("Monitor.observe on the training thread", t_obs),
                    ("probe computation (recorder thread)", t_probe)):
        print(f"{name:<44}{t:>10.4f}{t / t_fb:>12.4f}")


if __name__ == "__main__":
    main()
