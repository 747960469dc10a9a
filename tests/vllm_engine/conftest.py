"""The vLLM suite's order: test_vllm_engine.py first.

Its engine runs in the test's process (vLLM's in-process mode), and vLLM (0.32) cannot start an in-process engine in a
process where an engine of the default mode (engine core in a child process) has started before: that start
imports llvmlite into the parent, and the in-process start's kernel-override scan of ``sys.modules``
(``vllm/triton_utils/dispatcher.py``) then fails on an llvmlite object (``AttributeError: '_lib_fn_wrapper' object
has no attribute 'get'``). tests/conftest.py orders modules heaviest first, which puts the training test first."""

from __future__ import annotations

import pytest

IN_PROCESS_FIRST = "tests/vllm_engine/test_vllm_engine.py"


@pytest.hookimpl(trylast=True)  # after tests/conftest.py's heaviest-first order
def pytest_collection_modifyitems(items: list) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(IN_PROCESS_FIRST))  # stable: the rest keep their order
