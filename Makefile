# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
# verl pins transformers<5.11, older than the main environment's: its tests run in their own venv (docs/verl.md)
VERL_VENV ?= .venv-verl
VERL_STAMP := $(VERL_VENV)/.installed
VERL_TESTS := tests/integrations/test_verl*.py

.PHONY: install verl-env browser test test-fast demo lint bench sample-runs clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first: where a local CPU build is on disk (torch==2.13.0) it is taken instead of a multi-GB CUDA
	# wheel; elsewhere (GPU hosts) the normal torch is installed.
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q "torch==2.13.0" || $(PIP) install -q torch
	$(PIP) install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

$(VERL_STAMP): pyproject.toml
	test -x $(VERL_VENV)/bin/python || python3 -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q --upgrade pip
	$(VERL_VENV)/bin/python -c "import torch" 2>/dev/null || $(VERL_VENV)/bin/python -m pip install -q "torch==2.13.0" \
	  || $(VERL_VENV)/bin/python -m pip install -q torch
	$(VERL_VENV)/bin/python -m pip install -q -e ".[verl]" pytest
	touch $(VERL_STAMP)

verl-env: $(VERL_STAMP)

# Headless Chromium for the dashboard's real-browser tests (Debian packages; never downloaded by a test tool).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; }

test: install browser verl-env
	$(PY) -m pytest -q
	$(VERL_VENV)/bin/python -m pytest -q $(VERL_TESTS)

test-fast: install
	$(PY) -m pytest -q -m "not slow and not browser"

demo: install
	$(VENV)/bin/collapsewatch demo

lint: install
	$(VENV)/bin/ruff check collapsewatch dashboard tests bench

bench: install
	$(PY) bench/bench_probe.py
	$(PY) bench/bench_store.py

sample-runs: install
	$(PY) sample_runs/make_sample_runs.py

clean:
	rm -rf $(VENV) $(VERL_VENV) demo_runs .pytest_cache
