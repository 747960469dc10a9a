"""torch.distributed set-up for the trainer: DDP over gloo (CPU) or nccl (GPU), or a single process.

Launched by ``torchrun`` (RANK / WORLD_SIZE / MASTER_ADDR set), every rank rolls out its own questions,
gradients are averaged by DDP, and every rank writes its own probe rows into the same store.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import torch


@dataclass
class Dist:
    rank: int
    world_size: int
    device: torch.device

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        if not self.enabled:
            return model
        ids = [self.device.index] if self.device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)

    def no_sync(self, model: torch.nn.Module, last: bool):
        """Skip the gradient all-reduce on all but the last micro-batch of an optimizer step."""
        if self.enabled and not last:
            return model.no_sync()
        return contextlib.nullcontext()

    def close(self) -> None:
        if self.enabled and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    if name == "auto":
        return torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device: {name!r} requested but CUDA is not available")
    return torch.device(name)


def setup_distributed(device: str) -> Dist:
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    dev = resolve_device(device, local_rank)
    if world > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
    rank = torch.distributed.get_rank() if world > 1 else 0
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    return Dist(rank, world, dev)
