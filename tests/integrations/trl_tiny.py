"""A tiny, fully offline TRL ``GRPOTrainer`` for the integration's tests and ``bench/bench_trl.py``.

It ties the TRL adapter to the built-in model code, so it lives with its users, not in the adapter package.

The package's public :func:`collapsewatch.models.tiny_model_and_tokenizer` (a random-init Qwen2 body, 1 layer, d=32,
with a byte-level BPE tokenizer trained locally on a few sentences; docs/trl.md's script uses it too), a
``datasets.Dataset.from_dict`` of prompts and a continuous reward, so groups almost never have zero reward std.
Nothing is downloaded. With ``beta != 0`` the model is saved to ``<output_dir>/init-model`` and passed by path,
because TRL builds its reference model from the policy's path.

    trainer = tiny_grpo_trainer("out/", max_steps=4, steps_per_generation=2)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from collapsewatch.models.tiny import TOY_BODY, ModelPreset, tiny_model_and_tokenizer

PROMPTS: tuple[str, ...] = ("the cat sat", "a dog ran", "count the apples", "what is two plus two",
                            "name a river", "spell banana", "say hello", "list three colours")

# What a tiny CPU run needs; everything else is TRL's default. Override any of these through **config.
TINY_CONFIG: dict[str, Any] = dict(
    use_cpu=True, bf16=False, report_to=[], save_strategy="no", disable_tqdm=True, seed=0,
    per_device_train_batch_size=4, num_generations=4, max_completion_length=8, logging_steps=1,
    learning_rate=5e-2, max_steps=4,
)


def letter_a_reward(completions: list[str], **kwargs: Any) -> list[float]:
    """Share of the letter ``a`` in each completion: continuous, so group rewards (almost) never tie."""
    return [c.count("a") / max(1, len(c)) for c in completions]


def tiny_grpo_trainer(output_dir: str, *, seed: int = 0, body: ModelPreset = TOY_BODY, n_prompts: int = 32,
                      reward_funcs: Any = letter_a_reward, n_eval_prompts: int = 0, **config: Any):
    """A ``GRPOTrainer`` on the tiny model; ``config`` overrides :data:`TINY_CONFIG` (any ``GRPOConfig`` field);
    ``n_eval_prompts`` > 0 gives it an evaluation set of that many prompts (TRL evaluates with ``eval_strategy``)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = tiny_model_and_tokenizer(seed, body)
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(n_prompts)]
    args = GRPOConfig(output_dir=str(output_dir), **{**TINY_CONFIG, "seed": seed, **config})
    if args.beta:  # TRL builds the reference model from the policy's path: give it a local folder to load
        path = Path(output_dir) / "init-model"
        model.save_pretrained(path)
        model = str(path)
    evals = [PROMPTS[-1 - i % len(PROMPTS)] for i in range(n_eval_prompts)]
    return GRPOTrainer(model=model, reward_funcs=reward_funcs, args=args,
                       train_dataset=Dataset.from_dict({"prompt": prompts}), processing_class=tokenizer,
                       eval_dataset=Dataset.from_dict({"prompt": evals}) if evals else None)


class LogsSeen(TrainerCallback):
    """A callback added after ``watch()``, as a ``report_to`` backend comes after it: records each ``logs`` it is
    given, with the global step."""

    def __init__(self) -> None:
        self.logs: list[tuple[int, dict[str, Any]]] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        self.logs.append((state.global_step, dict(logs or {})))
