"""One repository's own GRPO console log → a JSONL file `collapsewatch ingest` reads (docs/lab/public_runs.md).

beita6969/colab-grpo trains Qwen2.5-7B-Instruct (LoRA) to write workflows in a small operator language that
gpt-4o-mini then executes; its own trainer (``src/grpo_trainer.py``) prints one block per step, opened by
``📍 Step N/500``, 3 prompts × 2 completions a step. No library writes these lines, so this lab script declares what
they mean, for this corpus only:

* ``🔧 P27 简单GRPO诊断:`` then ``零方差组: a/b`` (groups whose two rewards are equal) → ``zero_std_group_frac`` = a / b,
  and ``平均奖励: x`` (the mean of the step's 6 rewards the advantages come from) → ``reward_mean``;
* ``🎯 准确率统计: c/n = …% (平均正确性评分: s/1.0)`` → ``correct_frac`` = c / n, ``beita/correctness_mean`` = s;
* ``📊 DSL质量: fallback=True|False`` (one per completion) → ``beita/dsl_fallback_frac``: the share of the step's
  completions that were no parseable workflow (the output collapse the authors describe);
* ``🔄 更新策略...`` → ``beita/policy_updated`` 1; ``⏭️  P28: 跳过更新`` (every advantage 0: no update) → 0;
* every 5th step a ``📊 Metrics:`` block → ``loss`` and ``kl_loss`` (the trainer's ``kl_div``: a squared log-prob
  change against the rollout policy, not a KL to a reference). Its ``avg_reward`` is the mean advantage, left out.

A step block cut off before its rewards (the log's last) is left out.

    python beita_console.py RUN.beita.log OUT.jsonl
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
from jsonl_convert import main_text  # noqa: E402

STEP = re.compile(r"^📍 Step (\d+)/\d+\s*$", re.M)
GROUPS = re.compile(r"P27 简单GRPO诊断:\s*\n\s*零方差组: (\d+)/(\d+)\s*\n\s*平均奖励: ([-0-9.]+)")
ACCURACY = re.compile(r"准确率统计: (\d+)/(\d+) = [0-9.]+% \(平均正确性评分: ([-0-9.]+)/1\.0\)")
FALLBACK = re.compile(r"DSL质量: fallback=(True|False)")
METRICS = re.compile(r"📊 Metrics:\s*\n\s*step: (\d+)\s*\n\s*loss: (\S+)\s*\n\s*kl_div: (\S+)")


def convert(text: str) -> list[dict]:
    blocks = STEP.split(text)
    out: dict[int, dict] = {}
    for i in range(1, len(blocks), 2):
        step, body = int(blocks[i]), blocks[i + 1]
        groups = GROUPS.search(body)
        if groups is None:
            continue
        row: dict = {"step": step, "zero_std_group_frac": int(groups.group(1)) / int(groups.group(2)),
                     "reward_mean": float(groups.group(3))}
        if m := ACCURACY.search(body):
            row.update({"correct_frac": int(m.group(1)) / int(m.group(2)), "beita/correctness_mean": float(m.group(3))})
        if fallback := FALLBACK.findall(body):
            row["beita/dsl_fallback_frac"] = fallback.count("True") / len(fallback)
        if "🔄 更新策略" in body or "P28: 跳过更新" in body:
            row["beita/policy_updated"] = int("🔄 更新策略" in body)
        if m := METRICS.search(body):
            if int(m.group(1)) != step:
                raise ValueError(f"the Metrics block of step {m.group(1)} is inside step {step}'s")
            row.update(loss=float(m.group(2)), kl_loss=float(m.group(3)))
        if step in out:
            raise ValueError(f"step {step} printed twice")
        out[step] = row
    if not out:
        raise ValueError("no step block with its rewards")
    return [out[s] for s in sorted(out)]


def main(argv: list[str]) -> int:
    return main_text(argv, "python lab/public/beita_console.py RUN.beita.log OUT.jsonl", convert)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
