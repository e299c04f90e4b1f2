"""--phase-timeout (trainer/phases.py): a run whose phase hangs says which phase in one line and exits 3; a run that
does not hang is not stopped. The hang is the trainer's test hook (TRAINER_TEST_HOOK=phase:<name> sleeps when that
phase begins); the limits leave every other phase a wide margin on a loaded machine."""

from __future__ import annotations

import pytest

from tests.trainer_helpers import PYTHON, TRAIN_PY, clean_env, run, run_nodes, trainer_errors
from trainer.cli import parse_args
from trainer.errors import EXIT_PHASE_TIMEOUT

pytestmark = pytest.mark.timeout(300)


def synthetic(out, *extra: str) -> list[str]:
    return [PYTHON, str(TRAIN_PY), "--task", "synthetic", "--epochs", "1", "--samples", "512", "--batch-size", "64",
            "--out-dir", str(out), "--run-id", "r", *extra]


def expect_timeout(res, phase: str, limit: str) -> None:
    assert res.returncode == EXIT_PHASE_TIMEOUT, res.output[-3000:]
    errors = trainer_errors(res.stderr)
    assert len(errors) == 1, res.stderr[-3000:]
    assert errors[0].startswith(f"[ERROR] rank 0: phase '{phase}' did not finish within --phase-timeout {limit} s"), \
        errors[0]
    assert f"hook: phase:{phase}" in res.stderr  # it hung where the test made it hang
    assert "main thread's stack" in res.stderr and "time.sleep(600)" in res.stderr


def test_a_hang_at_start_up_is_named(tmp_path):
    res = run(synthetic(tmp_path, "--phase-timeout", "2"), timeout=120,
              env=clean_env(TRAINER_TEST_HOOK="phase:start-up"))
    expect_timeout(res, "start-up", "2")


@pytest.mark.slow
def test_a_hang_in_a_later_phase_is_named(tmp_path):
    # 40 s: start-up (importing torch) and the synthetic run's phases take a few seconds each even on 2 loaded cores.
    # The three runs wait out their limit side by side (each hangs asleep), rather than one after another.
    phases = ["model load", "first step", "checkpoint save"]
    results = run_nodes([synthetic(tmp_path / str(i), "--phase-timeout", "40") for i in range(len(phases))],
                        timeout=240, envs=[clean_env(TRAINER_TEST_HOOK=f"phase:{phase}") for phase in phases])
    for phase, res in zip(phases, results):
        expect_timeout(res, phase, "40")


def test_a_run_within_its_limits_is_not_stopped(tmp_path):
    res = run(synthetic(tmp_path, "--phase-timeout", "120"), timeout=200, env=clean_env(PHASE_TIMEOUT="1"))
    assert res.returncode == 0, res.output[-3000:]  # the flag wins over PHASE_TIMEOUT=1
    assert "[DONE]" in res.stdout and not trainer_errors(res.stderr)


def test_the_limit_is_a_positive_number_of_seconds():
    assert parse_args(["--phase-timeout", "90"], environ={}).phase_timeout == 90
    assert parse_args([], environ={"PHASE_TIMEOUT": "1.5"}).phase_timeout == 1.5
    assert parse_args([], environ={}).phase_timeout is None
    for bad in ("0", "-1", "inf", "soon"):
        with pytest.raises(SystemExit):
            parse_args(["--phase-timeout", bad], environ={})
