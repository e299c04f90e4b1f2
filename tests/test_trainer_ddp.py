"""Real torchrun on CPU: 2 processes on one node, 2 nodes x 1 process over c10d, and a world of one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from trainer.sharding import digest
from trainer_helpers import (PYTHON, TRAIN_PY, clean_env, free_port, metrics, run, run_nodes, tagged,
                             torchrun_cmd, write_idx_dataset)

pytestmark = pytest.mark.timeout(200)  # per test; the launches have their own shorter limits

SAMPLES, BATCH, EPOCHS = 1024, 32, 3
STEPS_PER_EPOCH = SAMPLES // 2 // BATCH  # per rank, with 2 ranks


def synthetic_args(out: Path, run_id: str) -> list[str]:
    return ["--task", "synthetic", "--samples", str(SAMPLES), "--features", "32", "--classes", "4",
            "--epochs", str(EPOCHS), "--batch-size", str(BATCH), "--log-interval", "8", "--record-shards",
            "--out-dir", str(out), "--run-id", run_id]


@pytest.fixture(scope="module")
def one_node(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp-one-node")
    res = run(torchrun_cmd(synthetic_args(out, "one-node"), nproc=2), timeout=120)
    assert res.returncode == 0, res.output[-3000:]
    return res, out / "one-node"


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp-two-nodes")
    port = free_port()
    cmds = [torchrun_cmd(synthetic_args(out, "two-nodes"), nproc=1, nnodes=2, rdzv_port=port, run_id="two-nodes")
            for _ in range(2)]
    results = run_nodes(cmds, timeout=150)
    for r in results:
        assert r.returncode == 0, r.output[-3000:]
    return results, out / "two-nodes"


def assert_learns(stdout: str) -> None:
    epochs = tagged(stdout, "EPOCH")
    assert [e["epoch"] for e in epochs] == [f"{i}/{EPOCHS}" for i in range(1, EPOCHS + 1)]
    train = [float(e["train_loss"]) for e in epochs]
    val = [float(e["val_loss"]) for e in epochs]
    assert train[-1] < 0.8 * train[0], train
    assert val[-1] < val[0], val
    assert float(epochs[-1]["val_acc"]) > 0.5  # 4 classes: chance is about 0.25


def assert_shards_disjoint_and_covering(run_dir: Path, world: int) -> None:
    orders = []
    for epoch in range(1, EPOCHS + 1):
        records = [json.loads((run_dir / "shards" / f"epoch-{epoch:04d}.rank-{r}.json").read_text())
                   for r in range(world)]
        shards = [rec["indices"] for rec in records]
        assert [rec["rank"] for rec in records] == list(range(world))
        assert all(rec["count"] == SAMPLES // world == len(s) for rec, s in zip(records, shards))
        assert all(rec["sha256"] == digest(torch.tensor(s)) for rec, s in zip(records, shards))
        for a in range(world):
            for b in range(a + 1, world):
                assert not set(shards[a]) & set(shards[b]), f"epoch {epoch}: ranks {a} and {b} overlap"
        assert sorted(i for s in shards for i in s) == list(range(SAMPLES))
        orders.append(shards[0])
    assert orders[0] != orders[1] != orders[2]  # reshuffled every epoch


def test_two_processes_on_one_node_learn(one_node):
    res, _ = one_node
    start = tagged(res.stdout, "DDP")[0]
    assert (start["world"], start["backend"], start["device"], start["local_world"]) == ("2", "gloo", "cpu", "2")
    assert start["data"].startswith(f"synthetic ({SAMPLES} train")
    assert_learns(res.stdout)
    done = tagged(res.stdout, "DONE")[0]
    assert (done["world"], done["epochs"], done["steps"]) == ("2", str(EPOCHS), str(EPOCHS * STEPS_PER_EPOCH))
    assert done["model"].endswith("one-node/best.pt") and "synthetic" in done["data"]
    # only rank 0 prints: one [DDP] start line, not one per process
    assert len([d for d in tagged(res.stdout, "DDP") if "world" in d]) == 1


def test_two_processes_train_on_disjoint_covering_shards(one_node):
    assert_shards_disjoint_and_covering(one_node[1], world=2)


def test_checkpoints_pointer_best_and_metrics(one_node):
    _, run_dir = one_node
    for e in range(1, EPOCHS + 1):
        assert (run_dir / f"epoch-{e:04d}.pt").is_file()
    pointer = json.loads((run_dir / "latest").read_text())
    assert pointer["file"] == f"epoch-{EPOCHS:04d}.pt" and pointer["step"] == EPOCHS * STEPS_PER_EPOCH
    state = torch.load(run_dir / pointer["file"], weights_only=True)
    assert state["epoch"] == EPOCHS and state["epoch_step"] == 0 and state["world_size"] == 2
    assert state["identity"]["task"] == "synthetic" and len(state["rng"]) == 2  # every rank's RNG
    assert set(state["optimizer"]["state"])  # optimiser moments saved
    best = torch.load(run_dir / "best.pt", weights_only=True)
    events = metrics(run_dir)
    epochs = [e for e in events if e["event"] == "epoch"]
    lowest = min(epochs, key=lambda e: e["val_loss"])
    assert best["step"] == lowest["step"] and best["best"]["val_loss"] == lowest["val_loss"]
    assert events[0]["event"] == "start" and events[0]["world"] == 2 and events[-1]["event"] == "done"
    assert not list(run_dir.glob(".tmp-*"))


def test_two_nodes_over_c10d_rendezvous(two_nodes):
    results, run_dir = two_nodes
    printed = [r for r in results if "[DONE]" in r.stdout]
    assert len(printed) == 1, "exactly one node holds rank 0 and prints"
    silent = [r for r in results if r is not printed[0]][0]
    assert "[EPOCH]" not in silent.stdout
    start = tagged(printed[0].stdout, "DDP")[0]
    assert (start["world"], start["local_world"], start["backend"]) == ("2", "1", "gloo")
    assert_learns(printed[0].stdout)
    assert_shards_disjoint_and_covering(run_dir, world=2)
    assert tagged(printed[0].stdout, "DONE")[0]["steps"] == str(EPOCHS * STEPS_PER_EPOCH)


@pytest.mark.timeout(90)
def test_plain_python_is_a_world_of_one(tmp_path):
    res = run([PYTHON, str(TRAIN_PY), "--samples", "256", "--features", "16", "--epochs", "2", "--batch-size", "64",
               "--out-dir", str(tmp_path)], timeout=60)
    assert res.returncode == 0, res.output
    start = tagged(res.stdout, "DDP")[0]
    assert (start["world"], start["backend"]) == ("1", "none")
    assert tagged(res.stdout, "DONE")[0]["steps"] == "8"
    assert (tmp_path / "default" / "epoch-0002.pt").is_file()


@pytest.mark.timeout(90)
def test_module_form_and_script_path_from_another_folder(tmp_path):
    res = run([PYTHON, "-m", "trainer.train", "--max-steps", "2", "--samples", "128", "--out-dir", str(tmp_path),
               "--run-id", "as-module"], timeout=60)
    assert res.returncode == 0, res.output
    assert tagged(res.stdout, "DONE")[0]["steps"] == "2"
    # torchrun with the absolute script path, started elsewhere (as in the image: /app/trainer/train.py)
    cmd = torchrun_cmd(["--max-steps", "2", "--samples", "128", "--out-dir", str(tmp_path), "--run-id", "as-file"],
                       nproc=1)
    res = run(["bash", "-c", 'cd "$0" && exec "$@"', str(tmp_path), *cmd], timeout=60)
    assert res.returncode == 0, res.output
    assert tagged(res.stdout, "DDP")[0]["backend"] == "gloo"
    assert tagged(res.stdout, "DONE")[0]["steps"] == "2"


@pytest.mark.timeout(120)
def test_fashion_mnist_from_gzipped_idx_files_with_two_processes(tmp_path):
    write_idx_dataset(tmp_path / "data" / "fashion-mnist", n_train=256, n_val=64, gz=True)
    res = run(torchrun_cmd(["--task", "fashion-mnist", "--data-root", str(tmp_path / "data"), "--epochs", "2",
                            "--batch-size", "32", "--log-interval", "2", "--channels-last",
                            "--out-dir", str(tmp_path / "out")], nproc=2), timeout=100)
    assert res.returncode == 0, res.output[-3000:]
    start = tagged(res.stdout, "DDP")[0]
    assert start["model"] == "MnistCNN" and start["channels_last"] == "True"
    assert "fashion-mnist IDX files in" in start["data"] and "256 train + 64 val images" in start["data"]
    epochs = tagged(res.stdout, "EPOCH")
    assert float(epochs[-1]["train_loss"]) < float(epochs[0]["train_loss"])
    assert float(epochs[-1]["val_acc"]) > 0.5  # the class is drawn into each image; chance is 0.1


@pytest.mark.timeout(60)
def test_bf16_autocast_step_on_cpu(tmp_path):
    res = run([PYTHON, str(TRAIN_PY), "--task", "digits", "--amp", "bf16", "--channels-last", "--max-steps", "3",
               "--batch-size", "16", "--out-dir", str(tmp_path)], timeout=60, env=clean_env())
    assert res.returncode == 0, res.output
    done = tagged(res.stdout, "DONE")[0]
    assert done["steps"] == "3" and float(done["best_val_loss"]) < 5.0
