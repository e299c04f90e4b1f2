"""The causal-LM task under real torchrun on the CPU, on a tiny GPT-2 that scripts/tiny_lm.py builds from the
repository's Markdown: DDP fine-tuning lowers validation perplexity, best/ loads with from_pretrained and
generates, a SIGKILLed run resumes at its checkpoint's step, FSDP saves with 2 processes and resumes with 1,
and bad input stops every rank with one line. And what the one training loop gives it as to the other tasks:
telemetry (every dashboard series, a finished MLflow run, TrainJob progress), a kept better best/, a resume that
takes this run's optimiser settings, a damaged checkpoint that falls back to the previous one, and stops that fit a
grace period (at the epoch's last step, during validation, before the exports)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_trainer_telemetry import status_server  # noqa: F401  (a fixture: a Trainer status server)
from tests.trainer_helpers import ROOT, clean_env, has_trainer_traceback, metrics, run, tagged, torchrun_cmd, \
    trainer_errors, worker_exit_codes

sys.path.insert(0, str(ROOT / "scripts"))
import tiny_lm  # noqa: E402

from conftest import reap  # noqa: E402

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny-lm")
    tiny_lm.build(out, layers=2, width=64, heads=4, positions=128, seed=0)
    return out


def lm_args(tiny: Path, out: Path, run_id: str, *extra: str) -> list[str]:
    return ["--task", "causal-lm", "--model-local-dir", str(tiny / "models" / "tiny-lm"), "--data-root", str(tiny / "data"),
            "--out-dir", str(out), "--run-id", run_id, "--seq-len", "64", "--batch-size", "16", "--lr", "3e-3",
            "--log-interval", "5", *extra]


def worker_pids(torchrun_pid: int) -> list[int]:
    pids = []
    for task in Path(f"/proc/{torchrun_pid}/task").iterdir():
        pids += [int(p) for p in (task / "children").read_text().split()]
    return pids


def epochs(text: str) -> list[dict[str, str]]:
    return tagged(text, "EPOCH")


def test_ddp_two_processes_perplexity_falls_best_loads_and_generates(tiny, tmp_path):
    res = run(torchrun_cmd(lm_args(tiny, tmp_path, "ddp", "--epochs", "2")), timeout=280)
    assert res.returncode == 0, res.output[-3000:]
    ep = epochs(res.stdout)
    assert [e["epoch"] for e in ep] == ["1/2", "2/2"]
    first_train = float(tagged(res.stdout, "TRAIN")[0]["loss"])
    ppl = [float(e["val_ppl"]) for e in ep]
    assert ppl[1] < ppl[0] < 2048, ep  # below a uniform guess over the vocabulary, and falling
    assert float(ep[1]["train_loss"]) < first_train
    start = tagged(res.stdout, "DDP")[0]
    assert start["world"] == "2" and start["strategy"] == "ddp" and start["task"] == "causal-lm"
    run_dir = tmp_path / "ddp"
    for name in ("best", "epoch-0001", "epoch-0002"):
        assert {"config.json", "model.safetensors", "tokenizer.json", "metrics.json"} <= {
            p.name for p in (run_dir / name).iterdir()}, name
    assert json.loads((run_dir / "best" / "metrics.json").read_text())["epoch"] == 2
    assert (run_dir / "checkpoints" / "epoch-0002" / ".metadata").is_file()
    assert json.loads((run_dir / "latest").read_text())["dir"] == "checkpoints/epoch-0002"

    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(run_dir / "best", local_files_only=True)
    tok = AutoTokenizer.from_pretrained(run_dir / "best", local_files_only=True)
    ids = tok("The trainer", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=12, do_sample=False, pad_token_id=tok.eos_token_id)
    assert out.shape[1] > ids["input_ids"].shape[1]
    assert tok.decode(out[0]).startswith("The trainer")
    # the weights best/ holds are the trained ones, not the random start
    import torch
    start_model = AutoModelForCausalLM.from_pretrained(tiny / "models" / "tiny-lm", local_files_only=True)
    assert not torch.equal(model.lm_head.weight, start_model.lm_head.weight)


def test_resume_after_sigkill_continues_at_the_checkpoint_step(tiny, tmp_path):
    args = lm_args(tiny, tmp_path, "kill", "--epochs", "1", "--checkpoint-steps", "4")
    proc = subprocess.Popen(torchrun_cmd(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=clean_env(), cwd=ROOT)
    pointer = tmp_path / "kill" / "latest"
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if pointer.exists() and json.loads(pointer.read_text())["step"] >= 8:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it was killed"
        # the whole world at once, as when the node goes: the workers (their own sessions), then torchrun
        for pid in worker_pids(proc.pid):
            os.kill(pid, signal.SIGKILL)
        proc.kill()
    finally:
        reap(proc)
    saved = json.loads(pointer.read_text())
    assert saved["dir"].startswith("checkpoints/step-")
    res = run(torchrun_cmd(args), timeout=240)
    assert res.returncode == 0, res.output[-3000:]
    resume = [d for d in tagged(res.stdout, "DDP") if "resumed_from" in d]
    assert resume and resume[0]["step"] == str(saved["step"]), res.stdout[:2000]
    train = tagged(res.stdout, "TRAIN")
    assert int(train[0]["step"]) > saved["step"]  # numbering goes on from the checkpoint
    done = tagged(res.stdout, "DONE")[0]
    start = tagged(res.stdout, "DDP")[0]
    assert done["steps"] == start["steps_per_epoch"]  # not one step repeated or skipped


def test_fsdp_two_processes_save_and_resume_with_one(tiny, tmp_path):
    res = run(torchrun_cmd(lm_args(tiny, tmp_path, "fsdp", "--epochs", "1", "--strategy", "fsdp")), timeout=240)
    assert res.returncode == 0, res.output[-3000:]
    start = tagged(res.stdout, "DDP")[0]
    assert start["strategy"] == "fsdp" and int(start["fsdp_units"]) == 3  # 2 GPT-2 blocks + the root
    ckpt_dir = tmp_path / "fsdp" / "checkpoints" / "epoch-0001"
    assert {"__0_0.distcp", "__1_0.distcp"} <= {p.name for p in ckpt_dir.iterdir()}  # each rank its shards
    first_val = float(epochs(res.stdout)[0]["val_loss"])
    res1 = run(torchrun_cmd(lm_args(tiny, tmp_path, "fsdp", "--epochs", "2", "--strategy", "fsdp"), nproc=1),
               timeout=240)
    assert res1.returncode == 0, res1.output[-3000:]
    resume = [d for d in tagged(res1.stdout, "DDP") if "resumed_from" in d][0]
    assert resume["saved_world"] == "2" and resume["epoch"] == "1"
    ep = epochs(res1.stdout)
    assert [e["epoch"] for e in ep] == ["2/2"]
    # the resumed run starts from the trained weights: its first losses are those of a trained model
    assert float(tagged(res1.stdout, "TRAIN")[0]["loss"]) < first_val + 0.5
    assert float(ep[0]["val_loss"]) < first_val


def test_bad_jsonl_line_stops_both_ranks_with_one_line(tiny, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(tiny / "data" / "val.jsonl", data / "val.jsonl")
    (data / "train.jsonl").write_text('{"text": "fine"}\n{"prompt": "no completion"}\n')
    args = lm_args(tiny, tmp_path, "bad", "--data-root", str(data))
    res = run(torchrun_cmd(args), timeout=200)
    assert res.returncode != 0
    errors = trainer_errors(res.stderr)
    assert errors == [f"[ERROR] {data / 'train.jsonl'}:2: no `text` field and no `prompt`/`completion` pair "
                      f"(found prompt)"], res.stderr[-2000:]
    assert set(worker_exit_codes(res.output).values()) == {2}
    assert not has_trainer_traceback(res.output)


def _in_process(args: list[str], capsys) -> tuple[int, str]:
    """train.main in this process (a world of one, no torchrun): the checks are the same code on every rank,
    and the test saves a transformers import per case."""
    from trainer import train

    capsys.readouterr()
    code = train.main(args)
    err = capsys.readouterr().err
    assert not has_trainer_traceback(err), err[-2000:]
    return code, "\n".join(trainer_errors(err))


def test_bad_model_folders_seq_len_and_checkpoint_of_another_model(tiny, tmp_path, capsys):
    model = tiny / "models" / "tiny-lm"
    no_config = tmp_path / "no-config"
    shutil.copytree(model, no_config)
    (no_config / "config.json").unlink()
    no_weights = tmp_path / "no-weights"
    shutil.copytree(model, no_weights)
    (no_weights / "model.safetensors").unlink()
    small_vocab = tmp_path / "small-vocab"
    shutil.copytree(model, small_vocab)
    cfg = json.loads((small_vocab / "config.json").read_text())
    cfg["vocab_size"] = 1000
    (small_vocab / "config.json").write_text(json.dumps(cfg))
    other = tmp_path / "other"
    tiny_lm.build(other, layers=1, width=32, heads=2, positions=128, seed=1)

    cases = [
        (["--model-local-dir", str(tmp_path / "absent")], f"--model-local-dir {tmp_path / 'absent'}: no such folder"),
        (["--model-local-dir", str(no_config)], f"--model-local-dir {no_config}: no config.json"),
        (["--model-local-dir", str(no_weights)], f"--model-local-dir {no_weights}: no weights"),
        (["--model-local-dir", str(small_vocab)], "has 2048 tokens but model"),
        (["--seq-len", "4096"], "--seq-len 4096 exceeds the maximum sequence length"),
        (["--model-local-dir", "", "--model-id", "gpt2", "--local-files-only"],
         "--model-id gpt2 names a hub model but the run is offline"),
    ]
    base = lm_args(tiny, tmp_path, "cases", "--epochs", "1", "--max-steps", "1")
    for extra, expected in cases:
        code, err = _in_process(base + extra, capsys)
        assert code == 2 and expected in err and err.count("\n") == 0, (extra, err)

    code, err = _in_process(base, capsys)  # one step, one checkpoint of the tiny model
    assert code == 0, err
    code, err = _in_process(base + ["--model-local-dir", str(other / "models" / "tiny-lm")], capsys)
    assert code == 2 and "holds model gpt2 with parameter shapes" in err, err


# ---------------------------------------------------------------- what the one training loop gives this task
@pytest.fixture(scope="module")
def small(tiny, tmp_path_factory) -> Path:
    """The tiny model's data cut to 60 training and 20 validation documents: a few steps an epoch at batch 16 on one
    process (6 to 9: the documents are the repository's own Markdown, so the count follows the docs)."""
    data = tmp_path_factory.mktemp("small-data")
    for name, lines in (("train.jsonl", 60), ("val.jsonl", 20)):
        text = (tiny / "data" / name).read_text().splitlines()[:lines]
        (data / name).write_text("\n".join(text) + "\n")
    return data


def small_args(tiny: Path, small: Path, out: Path, run_id: str, *extra: str) -> list[str]:
    return lm_args(tiny, out, run_id, "--data-root", str(small), *extra)


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_restart_without_checkpoints_keeps_the_better_best_folder(tiny, small, tmp_path, capsys):
    code, err = _in_process(small_args(tiny, small, tmp_path, "r", "--epochs", "2"), capsys)
    assert code == 0, err
    run_dir = tmp_path / "r"
    best = json.loads((run_dir / "best" / "metrics.json").read_text())
    assert best["epoch"] == 2
    before = _sha(run_dir / "best" / "model.safetensors")
    shutil.rmtree(run_dir / "checkpoints")  # every checkpoint lost: the run starts over
    (run_dir / "latest").unlink()
    capsys.readouterr()
    from trainer import train

    assert train.main(small_args(tiny, small, tmp_path, "r", "--epochs", "1")) == 0
    out = capsys.readouterr()
    epoch = tagged(out.out, "EPOCH")[0]
    assert float(epoch["val_loss"]) > best["val_loss"] and epoch["best"] == "False", epoch
    assert _sha(run_dir / "best" / "model.safetensors") == before, "the epoch-1 model replaced a better best/"
    assert (f"[WARN] starting over without a readable checkpoint: keeping {run_dir / 'best'} "
            f"(val_loss={best['val_loss']:.4f}") in out.err, out.err
    done = tagged(out.out, "DONE")[0]
    assert (float(done["best_val_loss"]), done["best_epoch"]) == (pytest.approx(best["val_loss"], abs=1e-4), "2")


def _saved_optimizer_groups(folder: Path) -> list[dict]:
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    import torch

    out = folder.parent / f"{folder.name}.pt"
    dcp_to_torch_save(folder, out)
    return torch.load(out, weights_only=False)["optim"]["param_groups"]


def test_a_resume_takes_this_runs_weight_decay_and_says_so(tiny, small, tmp_path, capsys):
    code, err = _in_process(small_args(tiny, small, tmp_path, "wd", "--epochs", "1", "--max-steps", "3"), capsys)
    assert code == 0, err
    assert {g["weight_decay"] for g in _saved_optimizer_groups(tmp_path / "wd" / "checkpoints" / "step-00000003")} == {0.0}
    capsys.readouterr()
    from trainer import train

    assert train.main(small_args(tiny, small, tmp_path, "wd", "--epochs", "1", "--max-steps", "6",
                                 "--weight-decay", "0.1")) == 0
    out = capsys.readouterr().out
    resume = [d for d in tagged(out, "DDP") if "resumed_from" in d][0]
    assert resume["changed"] == "weight_decay 0->0.1", resume
    # (where the run stopped: step-00000006, or epoch-0001 where the epoch has 6 steps; the data is the first 60
    # documents of the repository's Markdown, so an epoch's length follows the docs)
    latest = json.loads((tmp_path / "wd" / "latest").read_text())
    assert latest["step"] == 6, latest
    groups = _saved_optimizer_groups(tmp_path / "wd" / latest["dir"])
    assert {g["weight_decay"] for g in groups} == {0.1}  # and it trained with it


@pytest.fixture(scope="module")
def two_epochs(tiny, small, tmp_path_factory) -> Path:
    """A finished 2-epoch run (world of one): checkpoints/epoch-0001 and epoch-0002, best/, epoch-000N/."""
    out = tmp_path_factory.mktemp("two-epochs")
    res = run([sys.executable, str(ROOT / "trainer" / "train.py"), *small_args(tiny, small, out, "base", "--epochs", "2")],
              timeout=240)
    assert res.returncode == 0, res.output[-3000:]
    return out / "base"


def _copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("metrics.jsonl"))
    return dst


def test_a_truncated_shard_falls_back_to_the_previous_checkpoint(tiny, small, two_epochs, tmp_path, capsys):
    run_dir = _copy_run(two_epochs, tmp_path / "base")
    shard = run_dir / "checkpoints" / "epoch-0002" / "__0_0.distcp"
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[: size // 2])
    capsys.readouterr()
    from trainer import train

    assert train.main(small_args(tiny, small, tmp_path, "base", "--epochs", "3")) == 0
    out = capsys.readouterr()
    assert not has_trainer_traceback(out.err), out.err[-3000:]
    warns = [line for line in out.err.splitlines() if line.startswith("[WARN]")]
    assert warns[0] == (f"[WARN] ignoring `latest`: checkpoint {shard.parent}: shard __0_0.distcp has {size // 2} "
                        f"bytes, its tensors need {size} (truncated?)"), out.err
    # best/ is epoch 2's, better than the checkpoint it resumes from: kept, and not written again from epoch 1
    assert warns[1].startswith(f"[WARN] resuming from an older checkpoint: keeping {run_dir / 'best'} ") and len(warns) == 2
    resume = [d for d in tagged(out.out, "DDP") if "resumed_from" in d][0]
    assert resume["resumed_from"] == str(run_dir / "checkpoints" / "epoch-0001") and resume["epoch"] == "1"
    assert [e["epoch"] for e in tagged(out.out, "EPOCH")] == ["2/3", "3/3"]


def test_a_shard_that_does_not_load_is_one_error_line_or_the_previous_checkpoint(tiny, small, two_epochs, tmp_path):
    """Damaged bytes of the right length pass the size check and fail in DCP's read on every rank: with an earlier
    checkpoint the run goes back to it; without one every rank exits 2 (not 1, the code torchrun restarts on) with one
    [ERROR] line and no traceback."""
    run_dir = _copy_run(two_epochs, tmp_path / "base")
    for rank_file in (run_dir / "checkpoints" / "epoch-0002").glob("__*_0.distcp"):
        rank_file.write_bytes(b"\0" * rank_file.stat().st_size)
    args = small_args(tiny, small, tmp_path, "base", "--epochs", "3")
    res = run(torchrun_cmd(args), timeout=240)
    assert res.returncode == 0, res.output[-3000:]
    assert not has_trainer_traceback(res.output) and "Traceback" not in res.stderr, res.stderr[-3000:]
    resume = [d for d in tagged(res.stdout, "DDP") if "resumed_from" in d][0]
    assert resume["resumed_from"] == str(run_dir / "checkpoints" / "epoch-0001"), res.stdout
    assert any(line.startswith(f"[WARN] checkpoint {run_dir / 'checkpoints' / 'epoch-0002'} cannot be loaded (rank ")
               and line.endswith(": looking for the checkpoint before it") for line in res.stderr.splitlines()), res.stderr

    alone = _copy_run(two_epochs, tmp_path / "alone" / "base")
    shutil.rmtree(alone / "checkpoints" / "epoch-0001")
    for rank_file in (alone / "checkpoints" / "epoch-0002").glob("__*_0.distcp"):
        rank_file.write_bytes(b"\0" * rank_file.stat().st_size)
    res = run(torchrun_cmd(small_args(tiny, small, tmp_path / "alone", "base", "--epochs", "3")), timeout=240)
    assert res.returncode != 0
    assert set(worker_exit_codes(res.output).values()) == {2}, res.output[-3000:]
    errors = trainer_errors(res.stderr)
    assert len(errors) == 1 and errors[0].startswith(f"[ERROR] checkpoint {alone / 'checkpoints' / 'epoch-0002'} "
                                                     "cannot be loaded"), res.stderr[-3000:]
    assert "no other checkpoint" in errors[0] and not has_trainer_traceback(res.output), res.stderr[-3000:]


def test_a_truncated_model_file_is_one_line_naming_the_folder(tiny, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(tiny / "models" / "tiny-lm", broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    code, err = _in_process(lm_args(tiny, tmp_path, "w", "--model-local-dir", str(broken)), capsys)
    assert code == 2 and err.startswith(f"[ERROR] model {broken}: its weights cannot be read") and "\n" not in err, err


def _stopped_at(tiny: Path, small: Path, out: Path, hook: str, *extra: str) -> tuple[int, str]:
    """A world of one stopped by SIGTERM at TRAINER_TEST_HOOK=`hook`: (exit code, output and, last, the one-line
    reason the trainer leaves where torchrun reads it)."""
    cmd = [sys.executable, str(ROOT / "trainer" / "train.py"), *small_args(tiny, small, out, "stop", *extra)]
    error_file = out / f"error-{hook}.json"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                            env=clean_env(TRAINER_TEST_HOOK=hook, TORCHELASTIC_ERROR_FILE=str(error_file)))
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.strip() == f"hook: {hook}":
                proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        reap(proc)
        proc.stdout.close()
    reason = json.loads(error_file.read_text())["message"] if error_file.exists() else "(no reason left)"
    return proc.returncode, "".join(lines) + reason


def test_a_stop_on_the_first_epochs_last_step_saves_the_training_state_only(tiny, small, tmp_path):
    """No validation has been timed yet, so none is promised to fit the grace period: the step checkpoint at the
    epoch's last step, no best/ and no epoch folder (each gathers the whole model); the resumed run validates."""
    code, out = _stopped_at(tiny, small, tmp_path, "last-step", "--epochs", "1")
    assert code == 143, out
    steps = int(tagged(out, "DDP")[0]["steps_per_epoch"])
    ckpt = tagged(out, "CKPT")
    assert [(d["dir"], d["reason"]) for d in ckpt] == [(f"checkpoints/step-{steps:08d}", "SIGTERM")], out
    assert "[EPOCH]" not in out and not (tmp_path / "stop" / "best").exists()
    assert not (tmp_path / "stop" / "epoch-0001").exists()
    res = run([sys.executable, str(ROOT / "trainer" / "train.py"), *small_args(tiny, small, tmp_path, "stop",
                                                                              "--epochs", "1")], timeout=200)
    assert res.returncode == 0, res.output[-3000:]
    assert [e["epoch"] for e in tagged(res.stdout, "EPOCH")] == ["1/1"] and "[TRAIN]" not in res.stdout
    assert (tmp_path / "stop" / "best" / "model.safetensors").is_file()


def test_a_stop_during_validation_saves_at_the_epochs_last_step(tiny, small, tmp_path):
    code, out = _stopped_at(tiny, small, tmp_path, "validation", "--epochs", "1")
    assert code == 143, out
    steps = int(tagged(out, "DDP")[0]["steps_per_epoch"])
    assert [d["dir"] for d in tagged(out, "CKPT")] == [f"checkpoints/step-{steps:08d}"] and "[EPOCH]" not in out, out
    assert "stopped during validation: the resumed run validates this epoch" in out


def test_a_stop_before_the_exports_leaves_them_to_the_resumed_run(tiny, small, tmp_path):
    code, out = _stopped_at(tiny, small, tmp_path, "export", "--epochs", "2")
    assert code == 143, out
    run_dir = tmp_path / "stop"
    assert [d["dir"] for d in tagged(out, "CKPT")] == ["checkpoints/epoch-0001"], out
    assert "(best, epoch-0001 written when the run resumes)" in out
    assert not (run_dir / "best").exists() and not (run_dir / "epoch-0001").exists()
    res = run([sys.executable, str(ROOT / "trainer" / "train.py"), *small_args(tiny, small, tmp_path, "stop",
                                                                              "--epochs", "2")], timeout=200)
    assert res.returncode == 0, res.output[-3000:]
    steps = int(tagged(out, "DDP")[0]["steps_per_epoch"])
    assert f"[WARN] writing {run_dir / 'best'} of step {steps}, which the run that saved" in res.stderr
    assert json.loads((run_dir / "epoch-0001" / "metrics.json").read_text())["step"] == steps
    assert [e["epoch"] for e in tagged(res.stdout, "EPOCH")] == ["2/2"]


def dashboard_metrics() -> set[str]:
    """Every series the committed Grafana dashboard queries, but the GPU ones (a CPU run has none)."""
    import re

    from tests.test_trainer_prometheus import DASHBOARD, GPU_ONLY

    names = set(re.findall(r"\btrainer_\w+", DASHBOARD.read_text()))
    return names - set(GPU_ONLY)


def test_a_watched_lm_run_feeds_the_dashboard_mlflow_and_trainjob_progress(tiny, small, tmp_path, status_server,
                                                                          monkeypatch):
    from tests.test_trainer_telemetry import free_port_pair, scrape

    port = free_port_pair()
    store = tmp_path / "mlruns"
    env = clean_env(METRICS_PORT=str(port), MLFLOW_TRACKING_URI=f"file://{store}", MLFLOW_ALLOW_FILE_STORE="true",
                    KUBEFLOW_TRAINER_SERVER_URL=status_server["url"],
                    KUBEFLOW_TRAINER_SERVER_CA_CERT=status_server["ca"],
                    KUBEFLOW_TRAINER_SERVER_TOKEN=status_server["token"])
    cmd = torchrun_cmd(small_args(tiny, small, tmp_path, "lm-watched", "--epochs", "4", "--log-interval", "1"))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    seen0: dict[str, float] = {}
    seen1: dict[str, float] = {}
    wanted = dashboard_metrics()
    try:
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            for p, seen in ((port, seen0), (port + 1, seen1)):
                try:
                    seen.update(scrape(p))
                except OSError:
                    pass
            if wanted <= set(seen0) and "trainer_step_seconds" in seen1:
                break
            time.sleep(0.2)
        out, err = proc.communicate(timeout=240)
    finally:
        reap(proc)
    assert proc.returncode == 0, err[-3000:]
    assert len(wanted) == 12 and wanted <= set(seen0), sorted(wanted - set(seen0))
    assert 0 < seen0["trainer_val_accuracy"] < 1 and seen0["trainer_checkpoint_bytes"] > 100_000
    assert seen1["trainer_step_seconds"] > 0 and "trainer_val_loss" not in seen1
    # tokens/s: the [TRAIN] line's figure (metrics.jsonl keeps it unrounded), samples/s counts blocks of --seq-len
    trains = [e for e in metrics(tmp_path / "lm-watched") if e["event"] == "train"]
    tokens = seen0["trainer_tokens_per_second"]
    assert any(tokens == pytest.approx(e["tokens_per_s"], rel=1e-9) for e in trains), (tokens, trains)
    assert tokens > seen0["trainer_samples_per_second"] > 0

    from mlflow import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=f"file://{store}")
    runs = client.search_runs([client.get_experiment_by_name("ddp-train").experiment_id],
                              filter_string="tags.`trainer.run_id` = 'lm-watched'")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    mlrun = runs[0]
    assert mlrun.data.params["task"] == "causal-lm" and mlrun.data.params["strategy"] == "ddp"
    epochs = [e for e in metrics(tmp_path / "lm-watched") if e["event"] == "epoch"]
    for key in ("val_loss", "val_ppl", "tokens_per_s", "train_loss"):
        history = client.get_metric_history(mlrun.info.run_id, key)
        assert [m.value for m in history] == pytest.approx([e[key] for e in epochs]), key
    arts = {a.path for a in client.list_artifacts(mlrun.info.run_id, "best-model")}
    assert {"best-model/model.safetensors", "best-model/config.json", "best-model/best.json"} <= arts, arts

    received = status_server["received"]
    assert received and all(not r["errors"] for r in received), received
    pct = [r["body"]["trainerStatus"]["progressPercentage"] for r in received]
    assert pct[0] == 0 and pct[-1] == 100 and pct == sorted(pct)
    names = {m["name"] for m in received[-1]["body"]["trainerStatus"].get("metrics", [])}
    assert {"val_loss", "val_ppl", "train_loss"} <= names, names
