"""Shared helpers: the repository root, a runner for the CLI as users call it, and a unit validator."""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The installed package, built once per session for every module that uses it (tests/package_helpers.py).
from package_helpers import installed  # noqa: F401

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def run_cli(*args: str, stdin: str | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policies.cli", *args], cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def copy_repository(root: Path, files: tuple[str, ...] = ("gitops.yaml",)) -> Path:
    """What `make validate` reads of the repository (base/, components/, overlays/, argocd/) and these root files,
    copied into `root`, for a test that changes them."""
    for d in ("base", "components", "overlays", "argocd"):
        shutil.copytree(REPO / d, root / d)
    for f in files:
        shutil.copy(REPO / f, root / f)
    return root


def _process_table() -> tuple[dict[int, list[int]], dict[int, float]]:
    """({parent pid: child pids}, {pid: CPU seconds used, with what it has reaped}) of every live process."""
    ticks = os.sysconf("SC_CLK_TCK")
    kids: dict[int, list[int]] = {}
    used: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        kids.setdefault(int(fields[1]), []).append(int(entry.name))
        used[int(entry.name)] = sum(int(f) for f in fields[11:15]) / ticks  # utime, stime, cutime, cstime
    return kids, used


def _below(kids: dict[int, list[int]], pid: int) -> list[int]:
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += kids.get(p, [])
    return tree


def process_tree(pid: int) -> list[int]:
    """`pid` and every live process below it, those in sessions of their own (torchrun's workers) included."""
    return _below(_process_table()[0], pid)


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by process `pid` and every live process below it, with what each has reaped."""
    kids, used = _process_table()
    return sum(used.get(p, 0.0) for p in _below(kids, pid))


def reap(proc: subprocess.Popen, seconds: float = 30.0, drain: bool = True) -> tuple[str, str]:
    """Stop `proc` and every process below it (SIGKILL) and return what it wrote, bounded however it ended: a
    grandchild that outlived a killed parent holds its pipes open, and a plain `kill(); communicate()` then waits for
    ever (a test's cleanup must never hang the run). Safe on a process that has already exited. `drain=False` where a
    thread of the test reads its pipes: only wait for it."""
    for _ in range(2):  # a second pass for what a dying parent started meanwhile
        for pid in process_tree(proc.pid) if proc.poll() is None else []:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue
    if not drain:
        proc.wait(timeout=seconds)
        return "", ""
    try:
        out, err = proc.communicate(timeout=seconds)
    except (subprocess.TimeoutExpired, ValueError):  # ValueError: its pipes were already read to the end and closed
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe:
                pipe.close()
        proc.wait(timeout=seconds)
        out, err = "", ""
    return out or "", err or ""


def run_bounded(cmd: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess[str]:
    """subprocess.run(cmd, capture_output=True, text=True, timeout=timeout) that, past `timeout` or when anything
    else ends the wait (pytest-timeout's signal included), stops every process below `cmd` too: a make, a pytest or a
    torchrun killed alone leaves its children running, and their pipes open. TimeoutExpired carries what it wrote."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = reap(proc)
        raise subprocess.TimeoutExpired(cmd, timeout, out, err) from None
    finally:
        reap(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_cpu_bounded(cmd: list[str], cpu_seconds: float, wall_seconds: float, **kwargs) -> tuple[
        subprocess.CompletedProcess[str], float]:
    """Run `cmd` to its end and return it with the CPU seconds it and its processes used. Its bound is CPU time, not
    wall-clock time: on a machine loaded several times its cores the same work takes longer, not more CPU, so a
    bound measured on a quiet machine holds there. Past `cpu_seconds` (work that does not end) or the generous
    `wall_seconds` backstop (a process that waits for ever), it is stopped (SIGTERM, which the simulator passes on to
    its pods, then SIGKILL) and the test fails saying which."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    end = time.monotonic() + wall_seconds
    out, err = "", ""
    while True:
        try:
            o, e = proc.communicate(timeout=2)
            out, err = out + (o or ""), err + (e or "")
            break
        except subprocess.TimeoutExpired:
            used = tree_cpu_seconds(proc.pid)
            if used > cpu_seconds or time.monotonic() > end:
                proc.send_signal(signal.SIGTERM)
                try:
                    o, e = proc.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    o, e = reap(proc)
                why = (f"used {used:.0f} s of CPU, more than its bound of {cpu_seconds:.0f}" if used > cpu_seconds
                       else f"ran {wall_seconds:.0f} s of wall-clock time using {used:.0f} s of CPU")
                raise AssertionError(f"{' '.join(cmd[:4])} ... {why}:\n{(o or '')[-3000:]}{(e or '')[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), cpu


# `make test-fast` runs `pytest -m "not slow"`; `make test` runs everything. Whole modules that launch real processes
# end to end are slow by their name (so a test added to them is too); single slow tests elsewhere carry
# @pytest.mark.slow. Unit-level trainer modules stay in the fast loop.
# Chosen from `pytest --durations=0` (2026-11-24, make test-fast's set before the marker: 1,435 tests, 876 s on 2
# loaded cores, where these took about two thirds of the time). With them out: 963 tests in 63.7 s (49 s of CPU) at
# load average 2.7-2.9 on the same 2 cores, 2026-11-24.
SLOW_MODULES = {
    "test_simulate", "test_simulate_stop", "test_simulate_faults", "test_simulate_elastic", "test_checkov",
    "test_no_internal_error",  # every input and hundreds of mutations through validate and plan
    "test_corpus",  # 41 upstream manifests end to end
    "test_diff",  # git worktrees and renders of two commits
    "test_scale_transaction",  # real make scale processes paused, killed and raced
    "test_init", "test_new_env", "test_remove_env",  # whole-repository copies validated, written, killed, finished
    "test_fork",  # a fork made as docs/deploy.md says, validated, and its own make test-fast
}
FAST_TRAINER_MODULES = {"test_trainer_units", "test_trainer_idx", "test_trainer_lm_step", "test_trainer_phases",
                        "test_trainer_state"}
SLOW_TESTS = {  # module: test functions (every parametrisation), each several seconds or more
    "test_trainer_lm_step": {"test_compile_gives_the_eager_losses"},  # inductor compiles a GPT-2 on the CPU, 70 s
    "test_loader_one_pass": {"test_every_yaml_file_in_the_repository_reads_the_same"},  # the CRDs, 10-15 s
    "test_scale": {"test_new_run_renames_the_workload_and_its_run_id", "test_scale_with_a_new_run_in_one_step",
                   "test_every_dependent_field_changes_and_comments_stay", "test_scale_up_then_down_gives_back_the_bytes",
                   "test_bad_input_is_one_line_and_touches_nothing",
                   "test_shm_and_memory_follow_the_gpus", "test_make_targets_pass_the_arguments"},
    "test_cli": {"test_standard_input_and_files_mix", "test_unknown_kind_has_no_schema", "test_rules_doc_is_up_to_date",
                 "test_empty_render_is_a_warning_not_a_silent_pass"},
    "test_environments": {"test_bad_declarations_are_one_line_each_with_file_and_line"},
    "test_simulate_input": {"test_the_last_step_is_a_step_a_fault_may_name"},  # asks the trainer (torch) twice
    "test_suppressions": {"test_suppressed_problem_does_not_fail_and_stays_visible"},
    # both share a fixture that runs kubeconform over every fixture file
    "test_kubeconform": {"test_verdicts_agree_on_every_fixture", "test_schema_fail_fixtures_name_their_fields_with_kubeconform"},
    "test_schemas": {"test_committed_crd_schemas_are_reproducible", "test_check_reports_drift_and_stale_files",
                     "test_committed_kubernetes_schemas_are_reproducible", "test_kubeconform_names_match_our_files",
                     "test_builtin_throughput", "test_crd_checksum_mismatch_is_refused",
                     "test_kubeconform_failure_is_a_problem", "test_kubeconform_results_map_back_like_builtin"},
    "test_reports": {"test_repository_overlays_report_clean_in_every_format",
                     "test_junit_is_well_formed_and_counts_add_up"},
    "test_upstream": {"test_runs_as_written_has_no_errors"},
    "test_cel": {"test_every_rule_in_crds_compiles"},  # reads the 6 MB of CRDs
    "test_bench_lm": {"test_the_gpu_model_has_about_125m_parameters"},  # imports transformers
    "test_hostile_inputs": {"test_a_path_with_a_space_through_make",
                            "test_refuses_exactly_what_kubeconforms_yaml_reader_refuses",
                            "test_kustomize_time_and_output_are_bounded",
                            "test_no_kustomize_banner_for_files_and_standard_input",
                            "test_symlink_loop_in_the_changed_files", "test_a_kustomization_that_lists_a_symlink_loop",
                            "test_symlink_loops_in_plan", "test_binary_on_standard_input_is_one_line"},
    "test_telemetry": {"test_report_writes_html_and_pngs", "test_report_with_many_ranks_shows_their_spread",
                       "test_an_unreachable_tracking_server_is_one_warning",
                       "test_report_of_a_causal_lm_run_draws_tokens_per_s_and_perplexity",
                       "test_a_chart_with_nothing_to_show_is_not_drawn",
                       "test_a_short_run_logs_often_enough_for_its_report"},
    "test_first_hour": {"test_the_checkout_commands_of_docs_trainer_run_as_written"},  # a 2-process torchrun
    "test_docs": {"test_the_document_runs_to_the_end_and_prints_what_it_shows"},  # each document, to the end
    "test_trainer_contract": {  # every overlay
        "test_dist_backend_glo_fails_every_overlay_of_every_environment",
        "test_nproc_per_nod_is_an_error_where_the_world_changes_and_a_warning_where_it_does_not"},
    "test_render_cache": {"test_cache_is_used_and_invalidated", "test_damaged_cache_entry_is_rendered_again",
                          "test_parsed_objects_are_used_only_for_the_yaml_they_came_from"},
}


# A command stopped between two steps of a transaction (policies/render/transaction.py's DDP_SCALE_TEST_HOOK): every edit
# command (make scale, new-run, init, new-env, remove-env, pin_image: policies/edit/pipeline.py) prints `hook: <step>` on
# standard error, then sleeps.
def wait_for_hook(proc, step, timeout=120):
    """Read the child's standard error until it says it stopped at `step` (the line the test hook prints)."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if line.strip() == f"hook: {step}":
            return "".join(seen)
    stop(proc, signal.SIGKILL)
    pytest.fail(f"the run never reached {step}: {''.join(seen)}")


def stop(proc, sig):
    """Send `sig`, wait for the end and close the pipes; (stdout, stderr)."""
    proc.send_signal(sig)
    return proc.communicate(timeout=120)


def _slow(module: str, function: str) -> bool:
    return (module in SLOW_MODULES or function in SLOW_TESTS.get(module, ())
            or (module.startswith("test_trainer_") and module not in FAST_TRAINER_MODULES))


# The most one test may ask for with @pytest.mark.timeout (pyproject.toml's `timeout`, 900 s, bounds the others):
# what CI's 90 minutes leave after the rest of make test, about 30 minutes of it. A test that waits longer than this
# for a run that may hang takes CI past its limit, which then names no test at all.
MAX_TEST_SECONDS = 2100


def pytest_collection_modifyitems(config, items):
    too_long = []
    for item in items:
        function = getattr(item, "originalname", None) or item.name.split("[")[0]
        if _slow(Path(str(item.fspath)).stem, function):
            item.add_marker(pytest.mark.slow)
        bound = item.get_closest_marker("timeout")
        if bound and bound.args and bound.args[0] > MAX_TEST_SECONDS:
            too_long.append(f"{item.nodeid} ({bound.args[0]} s)")
    if too_long:
        raise pytest.UsageError(f"@pytest.mark.timeout over {MAX_TEST_SECONDS} s (conftest.MAX_TEST_SECONDS), more "
                                f"than CI's limit leaves: {', '.join(too_long)}")


@pytest.fixture(autouse=True)
def _fresh_render_memos():
    """`policies.cli validate` turns on per-run memos (render.share_renders) and freezes what it read out of the
    cyclic collector's sight (gc.freeze) in its process; a test that calls it in-process must not leave either
    for the tests after it."""
    yield
    import gc

    from policies.render import kustomization, render

    gc.unfreeze()
    render._RUN_MEMO = None
    kustomization.forget_reads()
    render._PREFETCHED.clear()
