"""Resume: a worker SIGKILLed and restarted by torchrun, SIGTERM (pre-emption), mid-epoch checkpoints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import torch

from conftest import reap
from trainer_helpers import PYTHON, ROOT, TRAIN_PY, clean_env, free_port, metrics, run, tagged, torchrun_cmd

SAMPLES, BATCH = 8192, 16
STEPS_PER_EPOCH = SAMPLES // 2 // BATCH  # 256 per rank with 2 ranks


def args(out: Path, run_id: str, epochs: int, log_interval: int = 16) -> list[str]:
    return ["--task", "synthetic", "--samples", str(SAMPLES), "--features", "32", "--epochs", str(epochs),
            "--batch-size", str(BATCH), "--log-interval", str(log_interval), "--out-dir", str(out), "--run-id", run_id]


def worker_pids(torchrun_pid: int) -> dict[int, int]:
    """{RANK: pid} of torchrun's worker processes."""
    found = {}
    for task in Path(f"/proc/{torchrun_pid}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            for item in env:
                if item.startswith(b"RANK="):
                    found[int(item[5:])] = int(pid)
    return found


def run_until(cmd: list[str], trigger: str, action, timeout: float) -> tuple[int, str]:
    """Run `cmd`, call `action(proc)` once a stdout line starts with `trigger`, return (exit code, output)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(),
                            cwd=ROOT)
    lines, fired, deadline = [], False, time.monotonic() + timeout
    try:
        for line in proc.stdout:
            lines.append(line)
            if not fired and line.startswith(trigger):
                action(proc)
                fired = True
            if time.monotonic() > deadline:
                raise TimeoutError("".join(lines[-50:]))
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        reap(proc)
        proc.stdout.close()
    assert fired, f"never saw {trigger!r}:\n{''.join(lines[-50:])}"
    return proc.returncode, "".join(lines)


@pytest.mark.timeout(150)
def test_killed_worker_is_restarted_and_resumes_from_the_last_checkpoint(tmp_path):
    reference = run(torchrun_cmd(args(tmp_path, "reference", epochs=3), nproc=2), timeout=120)
    assert reference.returncode == 0, reference.output[-3000:]
    killed: dict[str, object] = {}

    def kill_rank_1(proc):
        killed["latest"] = json.loads((tmp_path / "killed" / "latest").read_text())
        pid = worker_pids(proc.pid)[1]
        os.kill(pid, signal.SIGKILL)
        killed["pid"] = pid

    code, out = run_until(torchrun_cmd(args(tmp_path, "killed", epochs=3), nproc=2, max_restarts=1),
                          "[TRAIN] epoch=2 ", kill_rank_1, timeout=120)
    assert code == 0, out[-3000:]
    assert killed["latest"]["file"] == "epoch-0001.pt"  # what a restart must resume from
    starts = [d for d in tagged(out, "DDP") if "world" in d]
    assert [s["restart"] for s in starts] == ["0", "1"]
    resumes = [d for d in tagged(out, "DDP") if "resumed_from" in d]
    assert len(resumes) == 1
    assert resumes[0]["resumed_from"].endswith("killed/epoch-0001.pt")
    assert (resumes[0]["epoch"], resumes[0]["epoch_step"], resumes[0]["step"]) == ("1", "0", str(STEPS_PER_EPOCH))
    resume_events = [e for e in metrics(tmp_path / "killed") if e["event"] == "resume"]
    assert [(e["epoch"], e["step"]) for e in resume_events] == [(1, STEPS_PER_EPOCH)]
    # the restarted run ends where the uninterrupted one does, with the same model
    done, ref_done = tagged(out, "DONE")[0], tagged(reference.stdout, "DONE")[0]
    assert done["steps"] == ref_done["steps"] == str(3 * STEPS_PER_EPOCH)
    ours = torch.load(tmp_path / "killed" / "epoch-0003.pt", weights_only=True)
    ref = torch.load(tmp_path / "reference" / "epoch-0003.pt", weights_only=True)
    for k in ref["model"]:
        torch.testing.assert_close(ours["model"][k], ref["model"][k], rtol=1e-5, atol=1e-6)
    assert abs(float(done["best_val_loss"]) - float(ref_done["best_val_loss"])) < 1e-4


@pytest.mark.timeout(150)
def test_two_nodes_c10d_restart_after_a_killed_worker(tmp_path):
    """Each node's torchrun restarts its worker and the restarted group forms again.

    Without trainer.distributed.attempt_store the one-node kill test above fails every time; here the stale
    store keys only race with the new ones, so this test passed in one of two runs without it: it checks
    the multi-node restart path, it is not the regression test for the workaround.
    """
    port = free_port()
    cmds = [torchrun_cmd(args(tmp_path, "two-nodes", epochs=2), nproc=1, nnodes=2, rdzv_port=port, max_restarts=1,
                         run_id="restart") for _ in range(2)]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(),
                              cwd=ROOT) for c in cmds]
    outputs: list[list[str]] = [[], []]
    pumps = [threading.Thread(target=lambda p=p, o=o: o.extend(p.stdout)) for p, o in zip(procs, outputs)]
    for t in pumps:
        t.start()
    killed = None
    try:
        deadline = time.monotonic() + 100
        while killed is None and time.monotonic() < deadline:
            if any(line.startswith("[TRAIN] epoch=2 ") for out in outputs for line in list(out)):
                for p in procs:
                    pid = worker_pids(p.pid).get(1)
                    if pid:
                        os.kill(pid, signal.SIGKILL)
                        killed = pid
            time.sleep(0.01)
        codes = [p.wait(timeout=max(1.0, deadline + 30 - time.monotonic())) for p in procs]
    finally:
        for p in procs:
            reap(p, drain=False)  # the pumps read their output
        for t in pumps:
            t.join()
        for p in procs:
            p.stdout.close()
    assert killed, "never reached epoch 2"
    text = "".join(outputs[0] + outputs[1])
    assert codes == [0, 0], text[-3000:]
    resumes = [d for d in tagged(text, "DDP") if "resumed_from" in d]
    assert [(d["epoch"], d["step"]) for d in resumes] == [("1", str(STEPS_PER_EPOCH))]
    assert tagged(text, "DONE")[0]["steps"] == str(2 * STEPS_PER_EPOCH)


@pytest.mark.timeout(150)
def test_sigterm_saves_a_checkpoint_and_the_next_run_resumes_mid_epoch(tmp_path):
    sent = {}

    def terminate(proc):  # what the kubelet does to the container's torchrun on pod deletion or pre-emption
        sent["t"] = time.monotonic()
        proc.send_signal(signal.SIGTERM)

    cmd = torchrun_cmd(args(tmp_path, "preempted", epochs=2, log_interval=16), nproc=2)
    code, out = run_until(cmd, "[TRAIN] epoch=1 step=32 ", terminate, timeout=100)
    stopped_after = time.monotonic() - sent["t"]
    assert code != 0, "a pre-empted run must not look finished"
    assert stopped_after < 25, f"took {stopped_after:.1f}s to stop (torchrun kills after 30s)"
    ckpts = [d for d in tagged(out, "CKPT") if d.get("reason") == "SIGTERM"]
    assert len(ckpts) == 1, out[-3000:]
    step = int(ckpts[0]["step"])
    assert 32 <= step < STEPS_PER_EPOCH  # saved at the next agreement point (timed, or a log line), mid-epoch
    run_dir = tmp_path / "preempted"
    pointer = json.loads((run_dir / "latest").read_text())
    assert pointer["file"] == ckpts[0]["file"] == f"step-{step:08d}.pt"
    state = torch.load(run_dir / pointer["file"], weights_only=True)
    assert (state["epoch"], state["epoch_step"], state["step"]) == (0, step, step)
    assert "[DONE]" not in out

    again = run(cmd, timeout=100)
    assert again.returncode == 0, again.output[-3000:]
    resumed = [d for d in tagged(again.stdout, "DDP") if "resumed_from" in d][0]
    assert resumed["resumed_from"].endswith(pointer["file"])
    assert (resumed["epoch"], resumed["epoch_step"]) == ("0", str(step))
    assert tagged(again.stdout, "DONE")[0]["steps"] == str(2 * STEPS_PER_EPOCH)
    assert not list(run_dir.glob("step-*.pt")), "the mid-epoch checkpoint is dropped once an epoch one exists"


def plain(out: Path, run_id: str, *extra: str) -> list[str]:
    return [PYTHON, str(TRAIN_PY), "--samples", "512", "--features", "16", "--batch-size", "32", "--epochs", "2",
            "--log-interval", "4", "--out-dir", str(out), "--run-id", run_id, *extra]


@pytest.mark.timeout(120)
def test_mid_epoch_checkpoints_and_exact_resume(tmp_path):
    # 16 steps per epoch in one process; stop at step 12 with checkpoints every 5 steps
    first = run(plain(tmp_path, "split", "--checkpoint-steps", "5", "--max-steps", "12"), timeout=60)
    assert first.returncode == 0, first.output
    run_dir = tmp_path / "split"
    assert [d["file"] for d in tagged(first.stdout, "CKPT")] == ["step-00000005.pt", "step-00000010.pt"]
    assert sorted(p.name for p in run_dir.glob("*.pt")) == ["best.pt", "step-00000012.pt"]
    assert json.loads((run_dir / "latest").read_text())["step"] == 12
    assert tagged(first.stdout, "DONE")[0]["steps"] == "12"

    second = run(plain(tmp_path, "split"), timeout=60)
    assert second.returncode == 0, second.output
    resumed = [d for d in tagged(second.stdout, "DDP") if "resumed_from" in d][0]
    assert (resumed["epoch"], resumed["epoch_step"], resumed["step"]) == ("0", "12", "12")
    assert tagged(second.stdout, "DONE")[0]["steps"] == "32"

    whole = run(plain(tmp_path, "whole"), timeout=60)
    assert whole.returncode == 0, whole.output
    a = torch.load(tmp_path / "whole" / "epoch-0002.pt", weights_only=True)
    b = torch.load(run_dir / "epoch-0002.pt", weights_only=True)
    for k in a["model"]:  # same data order, optimiser state and RNG: bit-identical weights
        assert torch.equal(a["model"][k], b["model"][k]), k
    assert a["step"] == b["step"] == 32


@pytest.mark.timeout(150)
def test_finished_run_restarted_says_it_is_complete_and_how_to_start_another(tmp_path):
    first = run(plain(tmp_path, "done"), timeout=120)
    assert first.returncode == 0, first.output
    again = run(plain(tmp_path, "done"), timeout=120)
    assert again.returncode == 0, again.output
    assert "[EPOCH]" not in again.stdout and "train_s=" not in again.stdout
    done = [line for line in again.stdout.splitlines() if line.startswith("[DONE]")]
    assert done == [f"[DONE] run {tmp_path / 'done'} is already complete (finished 2 of 2 epochs; best val_acc="
                    f"{float(tagged(first.stdout, 'DONE')[0]['best_val_acc']):.4f} at epoch "
                    f"{tagged(first.stdout, 'DONE')[0]['best_epoch']} in {tmp_path / 'done' / 'best.pt'}): nothing to "
                    "train. To train it further raise --epochs; to start a new run pass another --run-id (or --out-dir)."]
    event = metrics(tmp_path / "done")[-1]
    assert (event["event"], event["already_complete"], event["epochs"], event["steps"]) == ("done", True, 2, 32)


@pytest.mark.timeout(60)
def test_checkpoint_every_two_epochs_still_keeps_best_and_the_last_epoch(tmp_path):
    res = run(plain(tmp_path, "every2", "--checkpoint-every", "2") + ["--epochs", "3"], timeout=60)
    assert res.returncode == 0, res.output
    run_dir = tmp_path / "every2"
    assert sorted(p.name for p in run_dir.glob("epoch-*.pt")) == ["epoch-0002.pt", "epoch-0003.pt"]
    saved = {int(d["epoch"].split("/")[0]): d.get("checkpoint") for d in tagged(res.stdout, "EPOCH")}
    assert saved == {1: None, 2: "epoch-0002.pt", 3: "epoch-0003.pt"}
    best_epoch = int(tagged(res.stdout, "DONE")[0]["best_epoch"])
    assert torch.load(run_dir / "best.pt", weights_only=True)["step"] == 16 * best_epoch
