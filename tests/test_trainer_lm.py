"""The causal-LM task under real torchrun on the CPU, on a tiny GPT-2 that scripts/tiny_lm.py builds from the
repository's Markdown: DDP fine-tuning lowers validation perplexity, best/ loads with from_pretrained and
generates, a SIGKILLed run resumes at its checkpoint's step, FSDP saves with 2 processes and resumes with 1,
and bad input stops every rank with one line."""

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

from tests.trainer_helpers import ROOT, clean_env, has_trainer_traceback, run, tagged, torchrun_cmd, \
    trainer_errors, worker_exit_codes

sys.path.insert(0, str(ROOT / "scripts"))
import tiny_lm  # noqa: E402

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
        if proc.poll() is None:
            proc.kill()
        proc.wait()
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
    assert code == 2 and "was written for another model or data" in err and "params" in err, err
