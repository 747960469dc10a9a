"""``--resume``: a run continues with its own settings. The TrainConfig saved with its checkpoint is the base, the
options given now apply on top, and a given value of a field that defines the experiment (:data:`EXPERIMENT`) that
differs from the saved one is refused, naming the field and both values: the run would be relabelled (its run row
says the whole run used the new value) or trained half one way, half another.

Checkpoints written before the settings were saved with them (no ``train_config.json``) fall back to the run row's
``config`` in a folder store.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ..store.location import is_url
from .checkpoint import CONFIG_FILE, checkpoint_folder
from .config import TrainConfig, refuse_without_checkpoint_dir, run_name

EXPERIMENT = (
    "objective", "model", "kb_seed", "max_turns", "n_train_tasks", "top_k",
    "prompts_per_rollout", "group_size", "temperature", "top_p", "max_turn_tokens", "max_response_tokens",
    "correction", "dynamic_sampling",
    "mini_batches", "ppo_epochs", "lr", "weight_decay", "max_grad_norm",
    "objective_params", "aggregation", "advantages", "advantage_params", "drill",
    "seed", "dtype",
)
"""What is trained and how: a resumed run keeps these (a change is refused; start a new run to change one). In the
order a refusal names them."""
FREE = frozenset({
    "steps", "grad_accum", "rollout", "sentinels", "sentinel_every", "eval_every", "eval_tasks",
    "device", "store", "run", "checkpoint_every", "checkpoint_dir", "resume", "stop_on", "on_phase",
    "progress", "monitor", "detectors",
})
"""How long, where, on what engine and how it is watched: a resumed run takes a new value of these. ``grad_accum``
splits the same mini-batch into more micro-batches (the same update); ``rollout`` picks the engine."""
_NOT_INHERITED = ("store", "run", "resume", "checkpoint_dir")  # where the run is: what found the checkpoint


def saved_state(folder: Path, store: str, run: str) -> tuple[dict[str, Any], int]:
    """(the saved TrainConfig fields, the step the checkpoint continues at) of the checkpoint in ``folder``."""
    saved = folder / CONFIG_FILE
    if saved.is_file():
        data = json.loads(saved.read_text())
        return data["config"], int(data["step"])
    state = folder / "trainer_state.pt"
    if not state.is_file():
        raise ValueError(f"--resume: no checkpoint at {str(folder)!r}")
    import torch

    step = int(torch.load(state, weights_only=False)["step"])
    row = Path(store) / run / "runs" / "r0.parquet"  # an older checkpoint: the run row's config
    if not row.is_file():
        raise ValueError(f"--resume: the checkpoint at {str(folder)!r} has no {CONFIG_FILE} and run {run!r} no run "
                         "row to read its settings from")
    import pyarrow.parquet as pq

    return json.loads(pq.read_table(row, columns=["config"]).column("config")[0].as_py() or "{}"), step


def resume_config(given: dict[str, Any]) -> tuple[TrainConfig, int]:
    """The config a ``--resume`` continues with (the saved one, ``given`` on top) and the checkpoint's step;
    ValueError naming the field when ``given`` changes the experiment (:data:`EXPERIMENT`)."""
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    store = given.get("store", defaults["store"])
    name = run_name(given.get("run", ""), given.get("objective", defaults["objective"]),
                    given.get("seed", defaults["seed"]))
    if is_url(store) and not given.get("checkpoint_dir"):
        refuse_without_checkpoint_dir(store, ["--resume"])
    saved, step = saved_state(checkpoint_folder(store, name, given.get("checkpoint_dir", "")), store, name)
    values = {k: v for k, v in saved.items() if k in defaults and k not in _NOT_INHERITED}
    for key, value in given.items():
        merge = isinstance(value, dict) and isinstance(values.get(key), dict)
        values[key] = {**values[key], **value} if merge else value  # --set objective_params.x=… on the saved table
    _check_detectors(name, values.get("detectors", ""), given)
    if isinstance(values.get("stop_on"), list):
        values["stop_on"] = tuple(values["stop_on"])
    if isinstance(values.get("on_phase"), list):
        values["on_phase"] = tuple(values["on_phase"])
    cfg = TrainConfig(**{**values, "store": store, "run": name, "resume": True})
    refuse_changes(cfg, saved)
    return cfg, step


def _check_detectors(run: str, path: str, given: dict[str, Any]) -> None:
    """ValueError naming the detector settings file a resumed run inherits when it is gone. Saved as an absolute
    path (TrainConfig); an older checkpoint's relative one is read from the working directory, as it was."""
    if path and "detectors" not in given and not Path(path).is_file():
        raise ValueError(f"--resume: run {run!r} was started with the detector settings {path!r}, which do not exist "
                         "here: put the file back, or pass --detectors FILE (--detectors '' for the built-in rules)")


def resumed_step(cfg: TrainConfig) -> int:
    """The step a resumed ``cfg`` continues at (its checkpoint's); ValueError naming each field that changes the
    experiment (:func:`refuse_changes`) — the Python API's check (the CLI laid its options over the saved settings)."""
    from .checkpoint import checkpoint_dir

    saved, step = saved_state(checkpoint_dir(cfg), cfg.store, cfg.run_name)
    refuse_changes(cfg, saved)
    return step


def nothing_to_train(run: str, done: int) -> str:
    """What a resume at or past its ``steps`` says (``steps`` is a total): the CLI's line, the API's warning."""
    return f"run {run!r} is already at step {done} (--steps is a total): nothing to train"


def refuse_changes(cfg: TrainConfig, saved: dict[str, Any]) -> None:
    """ValueError naming each :data:`EXPERIMENT` field whose value in ``cfg`` differs from ``saved`` (a saved
    config's fields, as JSON); fields a saved config lacks (an older version's) are not compared."""
    now = json.loads(json.dumps(cfg.to_dict(), default=str))
    changed = [f"{k} = {_show(saved[k])}, not {_show(now[k])}" for k in EXPERIMENT if k in saved and now[k] != saved[k]]
    if changed:
        raise ValueError(f"--resume: run {cfg.run_name!r} was trained with {'; '.join(changed)}: a resumed run keeps "
                         "these (to change one, start a new run under a fresh name)")


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list, str)) else str(value)
