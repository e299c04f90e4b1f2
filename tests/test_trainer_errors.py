"""Bad input: every rank exits non-zero in bounded time, rank 0 prints one [ERROR] line, no traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trainer.idx import encode_idx
from trainer_helpers import (PYTHON, TRAIN_PY, clean_env, free_port, has_trainer_traceback, run, run_nodes, tagged,
                             torchrun_cmd, trainer_errors, worker_exit_codes, write_idx_dataset)

BOUND_S = 60  # a rank left waiting at a collective would sit there for gloo's 30-minute timeout


def assert_clean_failure(output: str, codes: dict[int, int], expect_ranks: list[int], message: str) -> None:
    assert codes == {r: 2 for r in expect_ranks}, f"exit codes {codes}\n{output[-3000:]}"
    errors = trainer_errors(output)
    assert len(errors) == 1, output[-3000:]  # one line, from rank 0 only
    assert message in errors[0], errors[0]
    assert not has_trainer_traceback(output), output[-3000:]


@pytest.mark.timeout(120)
def test_missing_data_root_on_two_nodes(tmp_path):
    port = free_port()
    argv = ["--task", "mnist", "--data-root", str(tmp_path / "absent"), "--out-dir", str(tmp_path / "out")]
    nodes = run_nodes([torchrun_cmd(argv, nproc=1, nnodes=2, rdzv_port=port, run_id="missing") for _ in range(2)],
                      timeout=BOUND_S + 30)
    for node in nodes:
        assert node.returncode != 0 and node.seconds < BOUND_S
    codes = {}
    for node in nodes:  # each node's torchrun reports its own worker: each exited 2 by itself
        codes.update(worker_exit_codes(node.output))
    assert_clean_failure("".join(n.output for n in nodes), codes, [0, 1],
                         f"[ERROR] data root {tmp_path / 'absent'} does not exist")


@pytest.mark.timeout(120)
def test_data_missing_on_one_node_only_fails_both(tmp_path):
    good = tmp_path / "good"
    write_idx_dataset(good / "mnist", n_train=32, n_val=8)
    port = free_port()
    cmds = [torchrun_cmd(["--task", "mnist", "--data-root", str(root), "--out-dir", str(tmp_path / "out")],
                         nproc=1, nnodes=2, master_port=port, node_rank=rank)
            for rank, root in ((0, good), (1, tmp_path / "absent"))]
    nodes = run_nodes(cmds, timeout=BOUND_S + 30)
    codes = {}
    for node in nodes:
        assert node.returncode != 0 and node.seconds < BOUND_S
        codes.update(worker_exit_codes(node.output))
    # rank 0 was fine itself, yet exits too, and names the rank whose data is missing
    assert_clean_failure("".join(n.output for n in nodes), codes, [0, 1],
                         f"[ERROR] rank 1: data root {tmp_path / 'absent'} does not exist")
    assert trainer_errors(nodes[0].output), "the line comes from rank 0's node"


@pytest.mark.timeout(90)
def test_corrupt_idx_file(tmp_path):
    root = write_idx_dataset(tmp_path / "data" / "mnist", n_train=32, n_val=8)
    images = root / "train-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:-100])
    res = run(torchrun_cmd(["--task", "mnist", "--data-root", str(tmp_path / "data"), "--out-dir", str(tmp_path)],
                           nproc=2), timeout=BOUND_S)
    assert res.returncode != 0
    assert_clean_failure(res.output, worker_exit_codes(res.output), [0, 1],
                         f"[ERROR] {images}: truncated: dimensions (32, 28, 28) need 25088 data bytes, file has 24988")


@pytest.mark.timeout(90)
def test_wrong_magic_in_labels(tmp_path):
    root = write_idx_dataset(tmp_path / "data" / "fashion-mnist", n_train=32, n_val=8)
    (root / "t10k-labels-idx1-ubyte").write_bytes(b"<html>not found</html>")
    res = run(torchrun_cmd(["--task", "fashion-mnist", "--data-root", str(tmp_path / "data"),
                            "--out-dir", str(tmp_path)], nproc=2), timeout=BOUND_S)
    assert_clean_failure(res.output, worker_exit_codes(res.output), [0, 1], "bad magic number 0x3c68746d")


@pytest.mark.timeout(90)
def test_unwritable_output_folder(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the output folder should be\n")
    res = run(torchrun_cmd(["--samples", "64", "--out-dir", str(blocker), "--run-id", "r"], nproc=2), timeout=BOUND_S)
    assert_clean_failure(res.output, worker_exit_codes(res.output), [0, 1],
                         f"[ERROR] output folder {blocker / 'r'} is not writable: Not a directory")


@pytest.mark.timeout(120)
def test_checkpoint_from_another_task(tmp_path):
    first = run([PYTHON, str(TRAIN_PY), "--task", "digits", "--max-steps", "2", "--batch-size", "16",
                 "--out-dir", str(tmp_path), "--run-id", "shared"], timeout=60)
    assert first.returncode == 0, first.output
    res = run(torchrun_cmd(["--task", "synthetic", "--samples", "64", "--out-dir", str(tmp_path), "--run-id", "shared"],
                           nproc=2), timeout=BOUND_S)
    assert_clean_failure(res.output, worker_exit_codes(res.output), [0, 1],
                         f"[ERROR] checkpoint {tmp_path / 'shared' / 'step-00000002.pt'} was written by task 'digits' "
                         "(model DigitsCNN), this run is task 'synthetic' (model MLP)")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("env,message", [
    ({"WORLD_SIZE": "2"}, "WORLD_SIZE=2 but LOCAL_RANK is not set: this process was not started by torchrun"),
    ({"WORLD_SIZE": "2", "RANK": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"},
     "RANK=2 is outside 0..1"),
])
def test_inconsistent_environment_without_torchrun(tmp_path, env, message):
    res = run([PYTHON, str(TRAIN_PY), "--out-dir", str(tmp_path)], timeout=30, env=clean_env(**env))
    errors = trainer_errors(res.output)
    assert res.returncode == 2 and len(errors) == 1 and errors[0].startswith(f"[ERROR] {message}"), res.output
    assert "Traceback" not in res.output


@pytest.mark.timeout(60)
def test_nccl_without_cuda(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    res = run([PYTHON, str(TRAIN_PY), "--backend", "nccl", "--out-dir", str(tmp_path)], timeout=30)
    assert res.returncode == 2 and "Traceback" not in res.output
    assert trainer_errors(res.output) == ["[ERROR] --backend nccl needs CUDA, but no GPU is visible; use --backend gloo or auto"]


@pytest.mark.timeout(90)
def test_half_written_checkpoints_are_never_picked_up(tmp_path):
    argv = [PYTHON, str(TRAIN_PY), "--samples", "256", "--features", "8", "--batch-size", "32", "--out-dir",
            str(tmp_path), "--run-id", "r"]
    assert run(argv + ["--epochs", "2"], timeout=60).returncode == 0
    run_dir = tmp_path / "r"
    newest = run_dir / "epoch-0002.pt"
    newest.write_bytes(newest.read_bytes()[:1000])  # truncated by a failing disk
    (run_dir / ".tmp-epoch-0003.pt.x1").write_bytes(b"partial")  # a writer killed before its rename
    res = run(argv + ["--epochs", "3"], timeout=60)
    assert res.returncode == 0, res.output
    resumed = [d for d in tagged(res.stdout, "DDP") if "resumed_from" in d][0]
    assert resumed["resumed_from"].endswith("epoch-0001.pt") and resumed["step"] == "8"
    warnings = [line for line in res.stderr.splitlines() if line.startswith("[WARN]")]
    assert any("truncated" in w for w in warnings) and any(".tmp-epoch-0003.pt.x1" in w for w in warnings)
    assert tagged(res.stdout, "DONE")[0]["steps"] == "24"
    assert not list(run_dir.glob(".tmp-*"))
