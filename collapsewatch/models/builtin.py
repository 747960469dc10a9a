"""Build, warm-start and cache the built-in tiny policies (``builtin:tiny``, ``builtin:small``).

A source string may carry warm-start options after a ``?``: ``builtin:tiny?target_nll=0.6`` stops the
supervised warm start at a lighter loss (:func:`parse_builtin_source`); the options are part of the spec, so
each setting is cached in its own directory.

Pipeline, all offline and seeded: knowledge base -> tokenizer trained on its passages and gold traces ->
Qwen2 body -> supervised warm start -> ``save_pretrained`` into a cache directory together with
``collapsewatch_builtin.json`` (the spec, so a trainer can rebuild the same KB, and the warm-start report).
A second call with the same spec loads the cached copy (well under a second).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from transformers import PreTrainedTokenizerBase as Tokenizer

from collapsewatch.env.kb import KBConfig, KnowledgeBase, build_kb
from collapsewatch.env.search import INVALID_ACTION_MESSAGE, EnvConfig, make_env_factory, task_messages
from collapsewatch.env.traces import gold_trace
from collapsewatch.models.tiny import PRESETS, build_model
from collapsewatch.models.tokenizer import IM_END, IM_START, train_tokenizer
from collapsewatch.models.warmstart import WarmStartConfig, WarmStartReport, warm_start

META_FILE = "collapsewatch_builtin.json"
BUILD_VERSION = 2
"""Bump when tokenizer, model or warm-start code changes what a spec builds: older caches are rebuilt."""


@dataclass(frozen=True)
class BuiltinSpec:
    """Everything that determines a built-in policy; equal specs give bit-identical models."""

    preset: str = "tiny"
    """Key of ``collapsewatch.models.tiny.PRESETS``."""
    seed: int = 0
    """Seeds the weight init (``torch.manual_seed``) and, unless ``kb`` says otherwise, nothing else."""
    kb: KBConfig = field(default_factory=KBConfig)
    """The synthetic world the tokenizer and warm start see; train the policy on the same one."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Retrieval width and turn limit of the warm-start traces and the success evaluation."""
    vocab_size: int = 1024
    """BPE vocabulary (the first CPU cost driver)."""
    warm_start: WarmStartConfig | None = field(default_factory=WarmStartConfig)
    """Supervised warm start; None keeps the random init."""
    eval_fraction: float = 0.2
    """Share of the KB's tasks held out from the warm start."""
    n_eval: int = 128
    """Held-out tasks used for the before/after success rate."""

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"unknown built-in preset {self.preset!r}; known: {sorted(PRESETS)}")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> BuiltinSpec:
        kb = dict(data["kb"], question_types=tuple(data["kb"]["question_types"]))
        ws = data.get("warm_start")
        return cls(
            preset=data["preset"],
            seed=data["seed"],
            kb=KBConfig(**kb),
            env=EnvConfig(**data["env"]),
            vocab_size=data["vocab_size"],
            warm_start=WarmStartConfig(**ws) if ws else None,
            eval_fraction=data["eval_fraction"],
            n_eval=data["n_eval"],
        )

    def dir_name(self) -> str:
        """``<preset>-<seed>`` for default settings, plus a digest of the spec otherwise."""
        if self == BuiltinSpec(preset=self.preset, seed=self.seed):
            return f"{self.preset}-{self.seed}"
        digest = hashlib.sha1(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.preset}-{self.seed}-{digest}"


@dataclass(frozen=True)
class BuiltinPolicy:
    """A loaded built-in policy and where it came from."""

    model: PreTrainedModel
    tokenizer: Tokenizer
    spec: BuiltinSpec
    path: Path
    report: WarmStartReport | None
    build_seconds: float
    """Wall time of the build that produced the cached copy (0 if it was never timed)."""


BUILTIN_PREFIX = "builtin:"
SOURCE_OPTIONS = ("target_nll",)
"""Options a ``builtin:PRESET?name=value`` source accepts; each sets the ``WarmStartConfig`` field of that name."""


def parse_builtin_source(source: str, seed: int = 0) -> BuiltinSpec:
    """The spec of ``builtin:PRESET[?target_nll=X]`` (``&`` between several options); ``ValueError`` naming
    the option on an unknown name, a repeated one, or a value that is not a number ≥ 0."""
    if not source.startswith(BUILTIN_PREFIX):
        raise ValueError(f"{source!r} is not a built-in model (expected {BUILTIN_PREFIX}PRESET)")
    preset, _, query = source.removeprefix(BUILTIN_PREFIX).partition("?")
    if preset not in PRESETS:
        raise ValueError(f"unknown built-in preset {preset!r} in {source!r}; known: {sorted(PRESETS)}")
    options: dict[str, float] = {}
    for item in query.split("&") if query else []:
        name, eq, text = item.partition("=")
        if name not in SOURCE_OPTIONS:
            raise ValueError(f"{source!r}: unknown option {name!r}; known: {', '.join(SOURCE_OPTIONS)}")
        if not eq:
            raise ValueError(f"{source!r}: option {name} needs a value ({name}=VALUE)")
        if name in options:
            raise ValueError(f"{source!r}: option {name} given twice")
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not value >= 0 or value == float("inf"):
            raise ValueError(f"{source!r}: {name} must be a finite number >= 0, got {text!r}")
        options[name] = value
    return BuiltinSpec(preset=preset, seed=seed, warm_start=WarmStartConfig(**options))


def default_cache_root() -> Path:
    """``$COLLAPSEWATCH_CACHE/models`` if set, else ``~/.cache/collapsewatch/models``."""
    root = os.environ.get("COLLAPSEWATCH_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "collapsewatch") / "models"


def tokenizer_corpus(kb: KnowledgeBase, env: EnvConfig) -> list[str]:
    """Passages, rendered chat prompts and gold traces of every task; the corrective message weighted up
    so an invalid action costs a handful of tokens rather than ~80 byte pieces."""
    make_env = make_env_factory(kb, env)
    texts = [p.text for p in kb.passages]
    for task in kb.tasks:
        prompt = task_messages(task)[0]["content"]
        texts.append(f"{IM_START}user\n{prompt}{IM_END}\n{IM_START}assistant\n")
        texts.append("".join(seg.text for seg in gold_trace(task, make_env)))
    return texts + [INVALID_ACTION_MESSAGE] * 50


def build_builtin(spec: BuiltinSpec, progress: Callable[[str], None] | None = None
                  ) -> tuple[PreTrainedModel, Tokenizer, WarmStartReport | None]:
    """Build ``spec`` from scratch (tokenizer, init, warm start); nothing is written to disk. ``progress`` gets
    a line per stage and the warm start's progress lines."""
    kb = build_kb(spec.kb)
    make_env = make_env_factory(kb, spec.env)
    tokenizer = train_tokenizer(tokenizer_corpus(kb, spec.env), spec.vocab_size)
    model = build_model(spec.preset, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id, spec.seed)
    if spec.warm_start is None:
        return model, tokenizer, None
    train, held_out = kb.split(spec.eval_fraction)
    cfg = spec.warm_start
    if cfg.lr is None:
        cfg = dataclasses.replace(cfg, lr=PRESETS[spec.preset].sft_lr)
    if progress is not None:
        progress(f"tokenizer ({len(tokenizer)} tokens) and model ready; warm start on gold traces (up to "
                 f"{cfg.steps} steps) …")
    report = warm_start(model, tokenizer, train, held_out[: spec.n_eval], make_env, cfg, progress)
    return model, tokenizer, report


def load_builtin(
    spec: BuiltinSpec | None = None, cache_root: Path | str | None = None, rebuild: bool = False
) -> BuiltinPolicy:
    """The cached policy for ``spec``, building and caching it first if it is missing, from an older
    ``BUILD_VERSION`` or ``rebuild`` is set (atomic rename: concurrent readers never see half a directory)."""
    spec = spec or BuiltinSpec()
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    path = root / spec.dir_name()
    if rebuild or not _is_current(path):
        _build_into(spec, path)
    meta = json.loads((path / META_FILE).read_text())
    if BuiltinSpec.from_json(meta["spec"]) != spec:
        raise ValueError(f"{path} holds a different built-in spec than requested; delete it to rebuild")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    report = WarmStartReport(**meta["report"]) if meta["report"] else None
    return BuiltinPolicy(model, tokenizer, spec, path, report, meta["build_seconds"])


def _is_current(path: Path) -> bool:
    meta = path / META_FILE
    return meta.is_file() and json.loads(meta.read_text()).get("build_version") == BUILD_VERSION


NOTES_ENV = "COLLAPSEWATCH_NOTES"
"""A file the build's progress lines are also appended to (the demo sets it: its dashboard's waiting page shows
them while the model is being built)."""


def _say(line: str) -> None:
    print(f"[collapsewatch] {line}", file=sys.stderr, flush=True)
    notes = os.environ.get(NOTES_ENV)
    if notes:
        try:  # a note nobody can write is no reason to stop a build
            with open(notes, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError:
            pass


def _build_into(spec: BuiltinSpec, path: Path) -> None:
    start = time.perf_counter()
    _say(f"building the built-in model once (cached in {path}); this takes a minute or more on a busy CPU")
    model, tokenizer, report = build_builtin(spec, progress=_say)
    _say(f"built in {time.perf_counter() - start:.0f} s")
    seconds = time.perf_counter() - start
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    meta = {
        "build_version": BUILD_VERSION,
        "spec": spec.to_json(),
        "report": dataclasses.asdict(report) if report else None,
        "build_seconds": seconds,
    }
    (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
    if path.exists():  # stale copy: move it aside first, rename is atomic, rmtree is not
        stale = path.with_name(f".{path.name}-stale-{os.getpid()}")
        path.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)
    try:
        tmp.rename(path)
    except OSError:  # another process finished first; keep its copy
        shutil.rmtree(tmp, ignore_errors=True)
