"""Drive verl 0.9.1's actor update on CPU, as deep as verl runs here, for the verl integration tests.

verl 0.9.1 registers its FSDP engine for ``device=["cuda", "npu"]`` only and its platform layer has no CPU
platform: ``FSDPEngineWithLMHead.__init__`` fails on this machine in ``init_device_mesh`` ("module 'torch._C' has no
attribute '_cuda_setDevice'"). So :class:`CpuLMEngine` subclasses verl's real engine and replaces only the
device/distributed plumbing (``__init__``: no device mesh, no FSDP wrapping; data-parallel group = the one-process
gloo world; ``train_mode``: no offload). Everything else is verl's own code, unchanged:
``RayPPOTrainer._update_actor`` (with collapsewatch's driver hook) → ``DataProto.to_tensordict`` →
``left_right_2_no_padding`` → ``TrainingWorker.train_mini_batch`` / ``train_batch`` / ``_postprocess_output`` →
``BaseEngine.train_batch`` → ``FSDPEngine.forward_backward_batch`` (``prepare_micro_batches``) →
``FSDPEngineWithLMHead.forward_step`` (``prepare_model_inputs`` / ``prepare_model_outputs``, a real HF Qwen2
forward) → ``ppo_loss`` → ``get_policy_loss_fn("collapsewatch")`` → ``compute_policy_loss_vanilla`` → backward →
``FSDPEngine.optimizer_step`` (grad clip, AdamW) → ``lr_scheduler_step``.
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager, nullcontext
from functools import partial
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.utils import flops_counter, seqlen_balancing
from verl.utils.flops_counter import FlopsCounter
from verl.utils.profiler import DistProfiler
from verl.workers import engine_workers
from verl.workers.config import (
    FSDPActorConfig,
    FSDPEngineConfig,
    FSDPOptimizerConfig,
    HFModelConfig,
    PolicyLossConfig,
)
from verl.workers.engine.fsdp import transformer_impl
from verl.workers.utils.losses import ppo_loss

from collapsewatch.models.tiny import ModelPreset, build_model
from collapsewatch.models.tokenizer import train_tokenizer

VOCAB, PAD, EOS = 64, 0, 1


def cpu_world() -> None:
    """A one-process gloo group (verl's train_mini_batch all-gathers token counts over the dp group)."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)


def cpu_tap(monkeypatch: Any, store: Any, run: str) -> Any:
    """A CPU 'world', verl's device look-ups patched, the store and run in the env, and a fresh worker tap."""
    from collapsewatch.integrations import verl as cw_verl

    cpu_world()
    patch_cpu_device(monkeypatch)
    monkeypatch.setenv(cw_verl.ENV_STORE, str(store))
    monkeypatch.setenv(cw_verl.ENV_RUN, run)
    fresh = cw_verl.WorkerTap()
    monkeypatch.setattr(cw_verl, "TAP", fresh)
    return fresh


class _CpuMemory:
    """``get_torch_device()`` for ``_postprocess_output``'s GPU-memory log lines: there is no GPU memory here."""

    @staticmethod
    def max_memory_allocated() -> int:
        return 0

    max_memory_reserved = max_memory_allocated


def patch_cpu_device(monkeypatch: Any) -> None:
    monkeypatch.setattr(transformer_impl, "get_device_id", lambda: "cpu")
    monkeypatch.setattr(transformer_impl, "get_device_name", lambda: "cpu")
    monkeypatch.setattr(seqlen_balancing, "get_device_name", lambda: "cpu")  # dynamic batch size's all-reduce
    monkeypatch.setattr(engine_workers, "get_torch_device", lambda: _CpuMemory)
    monkeypatch.setattr(flops_counter, "get_torch_device", lambda: torch.cpu)  # verl's own CPU branch: flops = inf


class CpuLMEngine(transformer_impl.FSDPEngineWithLMHead):
    """verl's FSDP LM engine minus the device mesh and FSDP wrapping (see the module docstring)."""

    def __init__(self, module: torch.nn.Module, engine_config: FSDPEngineConfig, optim: FSDPOptimizerConfig) -> None:
        self.module, self.engine_config, self.optimizer_config = module, engine_config, optim
        self.optimizer = torch.optim.AdamW(module.parameters(), lr=optim.lr, weight_decay=0.0)
        self.lr_scheduler = torch.optim.lr_scheduler.ConstantLR(self.optimizer, factor=1.0)
        self.ulysses_sequence_parallel_size, self.use_ulysses_sp, self.pad_to_length = 1, False, None
        self._autocast_dtype, self.scaler, self._qat_enabled = torch.float32, None, False

    def get_data_parallel_group(self) -> Any:
        return dist.group.WORLD

    def get_data_parallel_size(self) -> int:
        return 1

    def get_data_parallel_rank(self) -> int:
        return 0

    def is_mp_src_rank_with_outputs(self) -> bool:
        return True

    def _gradient_sync_context(self, is_last_micro_batch: bool) -> Any:
        return nullcontext()

    @contextmanager
    def train_mode(self, **kwargs: Any) -> Any:
        self.module.train()
        yield

    @contextmanager
    def eval_mode(self, **kwargs: Any) -> Any:
        self.module.eval()
        yield


def actor_config(ppo_mini_batch_size: int, micro: int, n: int, loss_mode: str = "collapsewatch",
                 max_tokens: int | None = None, model_dir: str | None = None) -> FSDPActorConfig:
    """``max_tokens``: verl's dynamic batch size (``use_dynamic_bsz``, micro-batches packed up to this many tokens);
    ``model_dir``: a saved model + tokenizer, loaded by verl's ``HFModelConfig`` (as verl's workers do)."""
    extra = {"model_config": HFModelConfig(path=model_dir)} if model_dir else {}
    return FSDPActorConfig(strategy="fsdp", ppo_mini_batch_size=ppo_mini_batch_size, rollout_n=n, **extra,
                           ppo_micro_batch_size_per_gpu=micro, use_dynamic_bsz=max_tokens is not None,
                           ppo_max_token_len_per_gpu=max_tokens or 16384, clip_ratio=0.2,
                           policy_loss=PolicyLossConfig(loss_mode=loss_mode), entropy_coeff=0.0)


def training_worker(model: torch.nn.Module, cfg: FSDPActorConfig) -> engine_workers.TrainingWorker:
    """verl's TrainingWorker (its real train_mini_batch / train_batch) on a CpuLMEngine, built without Ray."""
    w = object.__new__(engine_workers.TrainingWorker)
    engine_config = FSDPEngineConfig(strategy="fsdp", use_dynamic_bsz=cfg.use_dynamic_bsz,
                                     max_token_len_per_gpu=cfg.ppo_max_token_len_per_gpu,
                                     micro_batch_size_per_gpu=cfg.ppo_micro_batch_size_per_gpu,
                                     infer_micro_batch_size_per_gpu=cfg.ppo_micro_batch_size_per_gpu)
    w.engine = CpuLMEngine(model, engine_config, FSDPOptimizerConfig(lr=1e-2, clip_grad=1.0))
    w.engine_config, w.model_config = engine_config, OmegaConf.create({"use_remove_padding": False})
    w.loss_fn, w.profiler, w.device_name = partial(ppo_loss, config=cfg), DistProfiler(rank=0), "cpu"
    w.flops_counter = FlopsCounter(model.config)
    return w


class _WorkerGroup:
    """The driver's ``actor_rollout_wg``: one in-process worker instead of Ray actors (``world_size``: what the group
    reports; verl would split a batch over that many ranks, here the one worker runs all of it)."""

    def __init__(self, worker: engine_workers.TrainingWorker, world_size: int = 1) -> None:
        self.worker, self.world_size = worker, world_size

    def update_actor(self, data: Any) -> Any:
        return self.worker.train_mini_batch(data)

    def compute_log_prob(self, data: Any) -> Any:
        """``ActorRolloutRefWorker.compute_log_prob``'s body: the actor's ``infer_batch``, output to CPU."""
        output = self.worker.infer_batch(data)
        return output.cpu() if output is not None else None


def driver(worker: engine_workers.TrainingWorker, n: int, mini: int, epochs: int = 1, step: int = 1,
           total_steps: int = 100) -> RayPPOTrainer:
    """A RayPPOTrainer holding only what ``_update_actor`` reads (config, global_steps, the worker group)."""
    t = object.__new__(RayPPOTrainer)
    t.config = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"multi_turn": {"enable": False}, "temperature": 1.0, "n": n},
                              "actor": {"calculate_entropy": True, "entropy_coeff": 0.0, "ppo_mini_batch_size": mini,
                                        "ppo_epochs": epochs, "data_loader_seed": 0, "shuffle": False}},
        "algorithm": {"rollout_correction": None}})
    t.actor_rollout_wg, t.global_steps, t.total_training_steps = _WorkerGroup(worker), step, total_steps
    return t


def tiny_model(seed: int = 0) -> torch.nn.Module:
    return build_model(ModelPreset(n_layers=1, d_model=32, n_heads=2), VOCAB, PAD, EOS, seed=seed).float()


def save_model_dir(model: torch.nn.Module, path: str) -> str:
    """The model and a byte-level BPE tokenizer trained here (no download), saved as verl's model path expects."""
    model.save_pretrained(path)
    train_tokenizer(["search the knowledge base", "answer: paris"] * 20, vocab_size=300).save_pretrained(path)
    return path


@torch.no_grad()
def rollout_batch(model: torch.nn.Module, rewards: list[float], n: int, prompt_len: int = 4, resp_len: int = 6,
                  seed: int = 0, tool_rows: tuple[int, ...] = (), rollout_shift: float | None = None) -> DataProto:
    """A verl training batch as the driver holds it after rollout, reward and advantage: left-padded prompts,
    right-padded responses, π_old recomputed by the same model, GRPO advantages by verl's own estimator.
    ``tool_rows``: these responses hold a tool observation at position 2 (response_mask 0 there, as verl's agent
    loop marks it: two model turns). ``rollout_shift``: add ``rollout_log_probs`` = π_old − shift on model tokens."""
    g = torch.Generator().manual_seed(seed)
    B = len(rewards)
    prompts = torch.randint(2, VOCAB, (B, prompt_len), generator=g)
    responses = torch.randint(2, VOCAB, (B, resp_len), generator=g)
    p_mask = torch.ones(B, prompt_len, dtype=torch.int64)
    p_mask[::3, 0] = 0  # some prompts left-padded
    r_len = torch.tensor([resp_len - (i % 3) for i in range(B)])  # some responses end early (right padding)
    r_mask = (torch.arange(resp_len)[None, :] < r_len[:, None]).long()  # (B, T)
    prompts = prompts.masked_fill(p_mask == 0, PAD)
    responses = responses.masked_fill(r_mask == 0, PAD)
    input_ids = torch.cat([prompts, responses], 1)
    attn = torch.cat([p_mask, r_mask], 1)
    pos = (attn.cumsum(1) - 1).clamp(min=0)
    logits = model(input_ids=input_ids, attention_mask=attn, position_ids=pos).logits[:, prompt_len - 1:-1]
    old = torch.log_softmax(logits.float(), -1).gather(-1, responses.unsqueeze(-1)).squeeze(-1) * r_mask
    model_mask = r_mask.clone()  # (B, T) response_mask: 0 on padding and on tool observations
    model_mask[list(tool_rows), 2] = 0
    old = old * model_mask
    scores = torch.zeros(B, resp_len)
    scores[torch.arange(B), r_len - 1] = torch.tensor(rewards)  # verl puts the reward on the last response token
    uid = np.array([f"prompt-{i // n}" for i in range(B)], dtype=object)
    adv, returns = compute_grpo_outcome_advantage(scores, model_mask.float(), uid)
    tensors = {"prompts": prompts, "responses": responses, "input_ids": input_ids, "attention_mask": attn,
               "position_ids": pos, "response_mask": model_mask, "old_log_probs": old, "advantages": adv, "returns": returns,
               "token_level_scores": scores, "token_level_rewards": scores}
    if rollout_shift is not None:
        tensors["rollout_log_probs"] = (old - rollout_shift) * model_mask
    return DataProto.from_dict(tensors=tensors, non_tensors={"uid": uid})
