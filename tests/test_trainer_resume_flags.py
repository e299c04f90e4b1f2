"""Resume semantics, with real processes: the new run's --lr reaches the optimiser, the data order keeps the
checkpoint's seed, and an epoch whose last step was checkpointed is completed, not recorded empty."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
import torch

from trainer.checkpoint import single
from conftest import reap
from trainer_helpers import PYTHON, ROOT, TRAIN_PY, clean_env, metrics, run, tagged, torchrun_cmd

pytestmark = pytest.mark.timeout(150)


def synthetic(out: Path, run_id: str, epochs: int, *extra: str) -> list[str]:
    return ["--task", "synthetic", "--samples", "1024", "--features", "16", "--batch-size", "32",
            "--epochs", str(epochs), "--log-interval", "8", "--out-dir", str(out), "--run-id", run_id, *extra]


def test_resume_trains_at_the_new_lr_and_says_what_changed(tmp_path):
    first = run(torchrun_cmd(synthetic(tmp_path, "lr", 1), nproc=2), timeout=100)
    assert first.returncode == 0, first.output[-3000:]
    saved = torch.load(tmp_path / "lr" / "epoch-0001.pt", weights_only=True)
    assert saved["optimizer"]["param_groups"][0]["lr"] == pytest.approx(3e-3)

    again = run(torchrun_cmd(synthetic(tmp_path, "lr", 2, "--lr", "1e-5"), nproc=2), timeout=100)
    assert again.returncode == 0, again.output[-3000:]
    after = torch.load(tmp_path / "lr" / "epoch-0002.pt", weights_only=True)
    assert after["optimizer"]["param_groups"][0]["lr"] == pytest.approx(1e-5)  # trained at it, not at 0.003
    start = [d for d in tagged(again.stdout, "DDP") if "world" in d][0]
    assert start["lr"] == "1e-05"
    resumed = [d for d in tagged(again.stdout, "DDP") if "resumed_from" in d][0]
    assert resumed["changed"] == "lr 0.003->1e-05", resumed
    assert "AdamW moments and step counts" in resumed["kept"]
    assert after["config"]["lr"] == pytest.approx(1e-5)
    # AdamW's step count continued from the checkpoint: 16 steps per epoch per rank
    assert {float(s["step"]) for s in after["optimizer"]["state"].values()} == {32.0}
    # at lr 1e-5 the weights hardly move in an epoch (at 3e-3 they move by far more)
    moved = max((after["model"][k] - saved["model"][k]).abs().max().item() for k in saved["model"])
    assert moved < 16 * 1e-5 * 1.5, moved


def digits(out: Path, run_id: str, *extra: str) -> list[str]:
    return [PYTHON, str(TRAIN_PY), "--task", "digits", "--batch-size", "32", "--epochs", "1", "--log-interval", "10",
            "--out-dir", str(out), "--run-id", run_id, *extra]


def test_mid_epoch_resume_keeps_the_checkpoints_data_order_seed(tmp_path):
    whole = run(digits(tmp_path, "whole"), timeout=100)
    assert whole.returncode == 0, whole.output[-3000:]
    first = run(digits(tmp_path, "split", "--max-steps", "20"), timeout=100)
    assert first.returncode == 0, first.output[-3000:]
    second = run(digits(tmp_path, "split", "--seed", "7"), timeout=100)  # another seed on resume
    assert second.returncode == 0, second.output[-3000:]
    a = torch.load(tmp_path / "whole" / "epoch-0001.pt", weights_only=True)
    b = torch.load(tmp_path / "split" / "epoch-0001.pt", weights_only=True)
    assert a["step"] == b["step"] == 45
    for k in a["model"]:  # every sample exactly once, in the same order: bit-identical in one process
        assert torch.equal(a["model"][k], b["model"][k]), k
    warn = [line for line in second.stderr.splitlines() if line.startswith("[WARN] --seed 7 ignored")]
    assert len(warn) == 1 and "seed 42" in warn[0], second.stderr
    assert [d for d in tagged(second.stdout, "DDP") if "resumed_from" in d][0]["data_seed"] == "42"


def test_sigterm_on_the_last_step_of_an_epoch_completes_that_epoch(tmp_path):
    # one step per epoch and a vote at every step (--log-interval 1): a SIGTERM sent as epoch 1 ends lands in
    # epoch 2's only step, so the vote happens on an epoch's last step
    cmd = [PYTHON, str(TRAIN_PY), "--samples", "32768", "--features", "128", "--batch-size", "32768", "--epochs", "3",
           "--log-interval", "1", "--out-dir", str(tmp_path), "--run-id", "last"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(), cwd=ROOT)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[EPOCH] epoch=1/3"):
                proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        reap(proc)
        proc.stdout.close()
    out = "".join(lines)
    assert proc.returncode == 143, out
    ckpts = [d for d in tagged(out, "CKPT") if d.get("reason") == "SIGTERM"]
    assert [d["file"] for d in ckpts] == ["epoch-0002.pt"], out  # validated and saved as the epoch it ends
    assert [d["epoch"] for d in tagged(out, "EPOCH")] == ["1/3", "2/3"]

    again = run(cmd, timeout=60)
    assert again.returncode == 0, again.output[-3000:]
    epochs = tagged(again.stdout, "EPOCH")
    assert [d["epoch"] for d in epochs] == ["3/3"], again.stdout
    recorded = [e for e in metrics(tmp_path / "last") if e["event"] == "epoch"]
    assert [e["epoch"] for e in recorded] == [1, 2, 3]
    assert all(e["train_loss"] and e["train_loss"] > 0 and e["samples_per_s"] > 0 for e in recorded), recorded


def test_checkpoint_of_an_epochs_last_step_from_an_older_trainer_resumes_without_an_empty_epoch(tmp_path):
    """What the trainer wrote before this fix: a step checkpoint with epoch_step == steps per epoch and no
    training figures. Resuming validates that epoch and records no train_loss=0 / samples/s=0 for it."""
    base = [PYTHON, str(TRAIN_PY), "--samples", "64", "--features", "8", "--batch-size", "32", "--epochs", "2",
            "--log-interval", "1", "--out-dir", str(tmp_path)]
    first = run(base + ["--run-id", "old", "--max-steps", "2"], timeout=60)
    assert first.returncode == 0, first.output
    folder = tmp_path / "old"
    state = torch.load(folder / "epoch-0001.pt", weights_only=True)
    state.update(epoch=0, epoch_step=2, metrics={"reason": "SIGTERM"})  # as the old vote on step 2 saved it
    for key in ("epoch_partial", "data_seed"):
        state.pop(key, None)
    for p in folder.glob("*.pt"):
        if p.name != "best.pt":
            p.unlink()
    (folder / "metrics.jsonl").unlink()
    single.write(folder, state, "step-00000002.pt", is_best=False)

    again = run(base + ["--run-id", "old"], timeout=60)
    assert again.returncode == 0, again.output
    resumed = [d for d in tagged(again.stdout, "DDP") if "resumed_from" in d][0]
    assert (resumed["epoch"], resumed["epoch_step"]) == ("0", "2")
    epochs = tagged(again.stdout, "EPOCH")
    assert [d["epoch"] for d in epochs] == ["1/2", "2/2"]
    assert "val_loss" in epochs[0] and "train_loss" not in epochs[0] and "samples/s" not in epochs[0], epochs[0]
    assert float(epochs[1]["train_loss"]) > 0
    assert json.loads((folder / "latest").read_text())["file"] == "epoch-0002.pt"
    assert tagged(again.stdout, "DONE")[0]["steps"] == "4"
