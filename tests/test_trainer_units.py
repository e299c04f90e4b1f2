"""In-process tests of the trainer's parts: sharding, torchrun environment checks, checkpoints, flags."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from trainer import checkpoint as ckpt
from trainer.checkpoint import files, single
from trainer.distributed import DistEnv, attempt_store, read_env
from trainer.errors import TrainerError
from trainer.metrics import format_line
from trainer.sharding import digest, eval_indices, padded_size, shard_indices
from trainer.cli import parse_args
from trainer.tasks import TASKS, get

pytestmark = pytest.mark.timeout(60)


# ---------------------------------------------------------------- sharding
@pytest.mark.parametrize("n,world", [(64, 2), (60, 4), (12, 3)])
def test_shards_are_disjoint_and_cover_when_world_divides_n(n, world):
    for epoch in range(3):
        shards = [shard_indices(n, r, world, epoch, seed=7) for r in range(world)]
        assert all(len(s) == n // world for s in shards)
        union = torch.cat(shards)
        assert sorted(union.tolist()) == list(range(n))  # covering, and disjoint since sizes add up to n


@pytest.mark.parametrize("n,world", [(10, 4), (7, 2), (3, 8)])
def test_padding_repeats_exactly_the_missing_samples(n, world):
    shards = [shard_indices(n, r, world, epoch=1, seed=0) for r in range(world)]
    sizes = {len(s) for s in shards}
    assert sizes == {padded_size(n, world) // world}  # same number of steps on every rank
    union = torch.cat(shards)
    assert set(union.tolist()) == set(range(n))
    assert len(union) - n == padded_size(n, world) - n  # duplicates only from padding


def test_set_epoch_semantics():
    a1 = shard_indices(100, 0, 2, epoch=1, seed=3)
    assert torch.equal(a1, shard_indices(100, 0, 2, epoch=1, seed=3))  # same epoch: same order on a restart
    assert not torch.equal(a1, shard_indices(100, 0, 2, epoch=2, seed=3))  # next epoch: reshuffled
    assert digest(a1) != digest(shard_indices(100, 0, 2, epoch=2, seed=3))  # ... and a different subset
    assert digest(a1) == digest(a1.flip(0))  # digest ignores order


def test_eval_indices_partition():
    parts = [eval_indices(11, r, 3) for r in range(3)]
    assert sorted(torch.cat(parts).tolist()) == list(range(11))


# ---------------------------------------------------------------- torchrun environment
TORCHRUN_ENV = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
                "MASTER_ADDR": "node-0", "MASTER_PORT": "29500", "TORCHELASTIC_RESTART_COUNT": "2"}


def test_plain_python_is_a_world_of_one():
    d = read_env({}, "auto", cuda_devices=0)
    assert (d.rank, d.world_size, d.backend, d.launched) == (0, 1, "gloo", False)


def test_torchrun_environment_is_read():
    d = read_env(TORCHRUN_ENV, "auto", cuda_devices=2)
    assert (d.rank, d.local_rank, d.world_size, d.local_world_size) == (1, 1, 4, 2)
    assert d.backend == "nccl" and d.launched and d.restart_count == 2
    assert read_env(TORCHRUN_ENV, "gloo", cuda_devices=2).backend == "gloo"
    assert read_env(TORCHRUN_ENV, "auto", cuda_devices=0).backend == "gloo"


@pytest.mark.parametrize("change,backend,gpus,message", [
    ({"LOCAL_RANK": None}, "auto", 0, "not started by torchrun"),
    ({"RANK": "4"}, "auto", 0, r"RANK=4 is outside 0..3"),
    ({"RANK": "-1"}, "auto", 0, r"RANK=-1 is outside"),
    ({"RANK": None}, "auto", 0, "RANK is not set"),
    ({"WORLD_SIZE": "two"}, "auto", 0, "WORLD_SIZE='two' is not an integer"),
    ({"WORLD_SIZE": "0"}, "auto", 0, "must be at least 1"),
    ({"LOCAL_RANK": "2"}, "auto", 0, r"LOCAL_RANK=2 is outside 0..1"),
    ({"LOCAL_WORLD_SIZE": "8"}, "auto", 0, r"LOCAL_WORLD_SIZE=8 is outside 1..WORLD_SIZE=4"),
    ({"MASTER_ADDR": None}, "auto", 0, "MASTER_ADDR is not set"),
    ({"MASTER_PORT": "70000"}, "auto", 0, "not a TCP port"),
    ({}, "nccl", 0, "--backend nccl needs CUDA"),
    ({}, "auto", 1, r"LOCAL_RANK=1 but only 1 GPU\(s\) are visible"),
    ({}, "mpi", 0, "not one of auto, nccl, gloo"),
])
def test_inconsistent_environment_is_a_clear_error(change, backend, gpus, message):
    env = dict(TORCHRUN_ENV)
    for k, v in change.items():
        if v is None:
            env.pop(k)
        else:
            env[k] = v
    with pytest.raises(TrainerError, match=message):
        read_env(env, backend, cuda_devices=gpus)


def test_rank_without_world_size_is_refused():
    with pytest.raises(TrainerError, match="WORLD_SIZE is not"):
        read_env({"RANK": "3"}, "auto", 0)


def test_restart_namespace_only_where_torchrun_reuses_its_store():
    d = DistEnv(0, 0, 2, 2, "gloo", launched=True, restart_count=1)
    assert attempt_store({"TORCHELASTIC_USE_AGENT_STORE": "False"}, d) is None
    assert attempt_store({}, d) is None


# ---------------------------------------------------------------- checkpoints
def state(step=10, epoch=1, task="synthetic", marker=0.0):
    return {"format": single.FORMAT, "model": {"w": torch.full((3,), marker)}, "optimizer": {}, "epoch": epoch,
            "epoch_step": 0, "step": step, "identity": {"task": task, "model": "MLP", "params": "p", "data": {"n": 1}}}


def save(folder, st, name, is_best):
    """single.write with the store's names (epoch-0001 for epoch-0001.pt)."""
    return single.write(folder, st, f"{name}.pt" if name else None, is_best)


def find_resume(folder, rejected=frozenset()):
    found, warnings = single.SingleFile(folder).find(rejected)
    return (found.path, {**found.train.state_dict(), **found.state}, warnings) if found else (None, None, warnings)


IDENTITY = {"task": "synthetic", "model": "MLP", "params": "p", "data": {"n": 1}}


def test_save_writes_checkpoint_pointer_and_best(tmp_path):
    save(tmp_path, state(step=10, marker=1.0), ckpt.epoch_name(1), is_best=True)
    save(tmp_path, state(step=20, epoch=2, marker=2.0), ckpt.epoch_name(2), is_best=False)
    pointer = json.loads((tmp_path / "latest").read_text())
    assert pointer["file"] == "epoch-0002.pt" and pointer["step"] == 20
    assert pointer["bytes"] == (tmp_path / "epoch-0002.pt").stat().st_size
    best = torch.load(tmp_path / "best.pt", weights_only=True)
    assert best["step"] == 10 and float(best["model"]["w"][0]) == 1.0
    assert not list(tmp_path.glob(".tmp-*"))
    path, loaded, warnings = find_resume(tmp_path)
    assert path.name == "epoch-0002.pt" and loaded["step"] == 20 and warnings == []


def test_step_checkpoints_are_pruned_once_superseded(tmp_path):
    save(tmp_path, state(step=5), ckpt.step_name(5), False)
    save(tmp_path, state(step=8), ckpt.step_name(8), False)
    assert [p.name for p in tmp_path.glob("step-*")] == ["step-00000008.pt"]
    save(tmp_path, state(step=16, epoch=1), ckpt.epoch_name(1), False)
    assert not list(tmp_path.glob("step-*"))


def test_truncated_latest_falls_back_to_the_previous_checkpoint(tmp_path):
    save(tmp_path, state(step=10), ckpt.epoch_name(1), False)
    save(tmp_path, state(step=20, epoch=2), ckpt.epoch_name(2), False)
    data = (tmp_path / "epoch-0002.pt").read_bytes()
    (tmp_path / "epoch-0002.pt").write_bytes(data[: len(data) // 2])  # e.g. a disk that lost the tail
    path, loaded, warnings = find_resume(tmp_path)
    assert path.name == "epoch-0001.pt" and loaded["step"] == 10
    assert len(warnings) == 1 and "ignoring `latest`" in warnings[0] and "truncated" in warnings[0], warnings
    (tmp_path / "latest").unlink()  # no pointer: the scan skips what does not load, with a warning
    path, loaded, warnings = find_resume(tmp_path)
    assert path.name == "epoch-0001.pt" and any(w.startswith("skipping checkpoint") for w in warnings), warnings


def test_a_checkpoint_rejected_for_its_sha256_stays_rejected(tmp_path):
    """A file whose bytes changed but still load (here one weight): `latest`'s sha256 rejects it, and the search that
    follows must not take it as the furthest readable checkpoint (the run would resume from corrupted state)."""
    save(tmp_path, state(step=10, marker=1.0), ckpt.epoch_name(1), False)
    save(tmp_path, state(step=20, epoch=2, marker=2.0), ckpt.epoch_name(2), False)
    path = tmp_path / "epoch-0002.pt"
    data = bytearray(path.read_bytes())
    at = bytes(data).find(torch.full((3,), 2.0).numpy().tobytes())
    data[at + 3] ^= 0x01  # the first weight 2.0 -> 8.0, same size
    path.write_bytes(bytes(data))
    assert torch.load(path, weights_only=True)["model"]["w"][0] == 8.0  # it loads: only the sha256 tells
    found, loaded, warnings = find_resume(tmp_path)
    assert found.name == "epoch-0001.pt" and loaded["step"] == 10, warnings
    assert warnings == [f"ignoring `latest`: checkpoint {path} does not match the sha256 recorded in `latest`"]


def test_temp_files_are_never_resumed_from_and_get_removed(tmp_path):
    save(tmp_path, state(step=10), ckpt.epoch_name(1), False)
    # a writer killed between write and rename leaves a complete-looking temp file with a higher step
    (tmp_path / ".tmp-epoch-0002.pt.abcd").write_bytes(single.serialize(state(step=20, epoch=2)))
    (tmp_path / "latest").unlink()
    path, loaded, _ = find_resume(tmp_path)
    assert path.name == "epoch-0001.pt" and loaded["step"] == 10
    assert files.remove_temp(tmp_path) == [".tmp-epoch-0002.pt.abcd"]


def test_failed_write_leaves_old_file_and_no_temp(tmp_path):
    target = tmp_path / "latest"
    files.atomic_write(target, b"old")
    with pytest.raises(TypeError):
        files.atomic_write(target, object())  # fails half-way, after the temp file exists
    assert target.read_bytes() == b"old" and not list(tmp_path.glob(".tmp-*"))


def test_garbage_pointer_and_no_checkpoint(tmp_path):
    (tmp_path / "latest").write_text("{not json")
    path, loaded, warnings = find_resume(tmp_path)
    assert path is None and loaded is None and "unreadable pointer" in warnings[0]
    assert find_resume(tmp_path / "missing")[:2] == (None, None)


@pytest.mark.parametrize("other,message", [
    ({"task": "digits", "model": "DigitsCNN"}, "was written by task 'digits' \\(model DigitsCNN\\), this run is task 'synthetic'"),
    ({"params": "q"}, "holds model MLP with parameter shapes q"),
    ({"data": {"n": 2}}, "trained on other data \\(n 2 vs 1\\)"),
])
def test_checkpoint_of_another_run_is_refused(tmp_path, other, message):
    foreign = state()
    foreign["identity"] = {**IDENTITY, **other}
    with pytest.raises(TrainerError, match=message):
        ckpt.check_identity(foreign, IDENTITY, tmp_path / "epoch-0001.pt")
    ckpt.check_identity(state(), IDENTITY, tmp_path / "epoch-0001.pt")  # its own checkpoint is fine


def test_unwritable_output_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(TrainerError, match=f"output folder {blocker / 'run'} is not writable"):
        files.check_writable(blocker / "run")


def test_file_mode_follows_umask(tmp_path):
    files.atomic_write(tmp_path / "f", b"x")
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o666 & ~mask


# ---------------------------------------------------------------- flags and registry
def test_every_flag_has_an_environment_default(monkeypatch):
    env = {"TASK": "digits", "EPOCHS": "7", "BATCH_SIZE": "32", "LR": "0.01", "SEED": "5", "SAMPLES": "100",
           "FEATURES": "8", "CLASSES": "3", "DATA_ROOT": "/d", "OUT_DIR": "/o", "RUN_ID": "r1",
           "DIST_BACKEND": "gloo", "AMP": "bf16", "CHANNELS_LAST": "true", "LOG_INTERVAL": "9",
           "CHECKPOINT_EVERY": "2", "CHECKPOINT_STEPS": "11", "MAX_STEPS": "99", "RECORD_SHARDS": "1"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    a = parse_args([])
    assert (a.task, a.epochs, a.batch_size, a.lr, a.seed, a.samples, a.features, a.classes) == \
        ("digits", 7, 32, 0.01, 5, 100, 8, 3)
    assert (a.data_root, a.out_dir, a.run_id, a.backend, a.amp, a.channels_last) == ("/d", "/o", "r1", "gloo", "bf16", True)
    assert (a.log_interval, a.checkpoint_every, a.checkpoint_steps, a.max_steps, a.record_shards) == (9, 2, 11, 99, True)
    assert parse_args(["--epochs", "2", "--task", "synthetic"]).epochs == 2  # flags win


def test_defaults_and_task_learning_rate(monkeypatch):
    for k in ("TASK", "LR", "RUN_ID", "OUT_DIR", "DATA_ROOT", "DIST_BACKEND", "EPOCHS", "BATCH_SIZE"):
        monkeypatch.delenv(k, raising=False)
    a = parse_args([])
    assert (a.task, a.data_root, a.out_dir, a.run_id, a.backend, a.epochs, a.batch_size) == \
        ("synthetic", "/data", "/out", "default", "auto", 3, 256)
    assert a.lr == TASKS["synthetic"].default_lr
    assert parse_args(["--task", "mnist"]).lr == TASKS["mnist"].default_lr
    # a small data set takes a small default batch, so that the plain command trains enough steps
    assert parse_args(["--task", "digits"]).batch_size == TASKS["digits"].default_batch_size == 32
    assert parse_args(["--task", "digits", "--batch-size", "64"]).batch_size == 64


@pytest.mark.parametrize("argv,env", [
    (["--task", "imagenet"], {}), ([], {"TASK": "imagenet"}), (["--epochs", "0"], {}),
    (["--run-id", "../x"], {}), (["--backend", "mpi"], {}), ([], {"CHANNELS_LAST": "maybe"}),
    ([], {"AMP": "fp8"}), ([], {"DIST_BACKEND": "mpi"}),
])
def test_bad_flags_exit_with_usage_error(monkeypatch, capsys, argv, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SystemExit) as e:
        parse_args(argv)
    assert e.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_registry_holds_the_four_tasks():
    assert {"synthetic", "digits", "mnist", "fashion-mnist"} <= set(TASKS)
    with pytest.raises(TrainerError, match="unknown task 'cifar'"):
        get("cifar")


def test_synthetic_task_is_reproducible():
    from trainer.tasks import synthetic

    a = parse_args(["--samples", "64", "--features", "8", "--classes", "3", "--seed", "1"])
    d1, d2 = synthetic.load(a), synthetic.load(a)
    assert torch.equal(d1.train_x, d2.train_x) and torch.equal(d1.val_y, d2.val_y)
    assert d1.train_x.shape == (64, 8) and d1.val_x.shape == (16, 8)
    assert len(set(d1.train_y.tolist())) > 1
    other = synthetic.load(parse_args(["--samples", "64", "--features", "8", "--classes", "3", "--seed", "2"]))
    assert not torch.equal(d1.train_x, other.train_x)


def test_log_line_format():
    line = format_line("EPOCH", {"epoch": 2, "epochs": 3, "val_loss": 0.123456, "samples_per_s": 1234.5, "ckpt": None})
    assert line == "[EPOCH] epoch=2/3 val_loss=0.1235 samples/s=1234"


def test_best_only_save_leaves_latest_alone(tmp_path):
    save(tmp_path, state(step=10, marker=1.0), ckpt.epoch_name(1), is_best=False)
    save(tmp_path, state(step=20, epoch=2, marker=2.0), None, is_best=True)  # epoch 2 not due, but best
    assert json.loads((tmp_path / "latest").read_text())["file"] == "epoch-0001.pt"
    assert torch.load(tmp_path / "best.pt", weights_only=True)["step"] == 20
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["best.pt", "epoch-0001.pt"]


# ---------------------------------------------------------------- resume, stop vote, threads, process-group timeout
def test_best_is_never_behind_what_latest_records_whatever_write_fails(tmp_path, monkeypatch):
    """A crash between any two of save()'s writes must not leave best.pt behind the best metrics recorded in
    the checkpoint `latest` names (it was written after `latest` before)."""
    real_write = files.atomic_write
    for crash_at in range(4):  # epoch-0002.pt, best.pt, latest (in some order), then nothing fails
        folder = tmp_path / f"crash-{crash_at}"
        folder.mkdir()
        first = state(step=10, marker=1.0)
        first["best"] = {"val_loss": 0.5, "step": 10}
        save(folder, first, ckpt.epoch_name(1), is_best=True)
        calls = []

        def failing(path, data, crash_at=crash_at):
            calls.append(path.name)
            if len(calls) == crash_at + 1:
                raise OSError("simulated crash")
            real_write(path, data)

        monkeypatch.setattr(files, "atomic_write", failing)
        second = state(step=20, epoch=2, marker=2.0)
        second["best"] = {"val_loss": 0.4, "step": 20}
        try:
            save(folder, second, ckpt.epoch_name(2), is_best=True)
        except OSError:
            pass
        monkeypatch.setattr(files, "atomic_write", real_write)
        _, resumed, _ = find_resume(folder)
        best = torch.load(folder / "best.pt", weights_only=True)
        assert best["step"] >= resumed["best"]["step"], (crash_at, calls)


def _adamw_after_steps(lr, fused, steps=2):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, fused=fused)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(8, 4)).sum().backward()
        opt.step()
    return model, opt


def test_resumed_optimizer_keeps_moments_and_takes_this_runs_hyperparameters():
    from trainer.engine import load_optimizer_state

    _, saved_opt = _adamw_after_steps(3e-3, fused=False)
    saved = saved_opt.state_dict()
    model, _ = _adamw_after_steps(3e-3, fused=False)
    # this run: another lr, weight decay and betas, and the fused implementation (as on a GPU)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.1, betas=(0.8, 0.99), fused=True)
    changes = load_optimizer_state(opt, saved)
    group = opt.param_groups[0]
    assert (group["lr"], group["weight_decay"], group["betas"], group["fused"]) == (1e-5, 0.1, (0.8, 0.99), True)
    assert "lr 0.003->1e-05" in changes and "fused False->True" in changes
    assert any(c.startswith("weight_decay 0->0.1") for c in changes) and any(c.startswith("betas") for c in changes)
    for i, p in enumerate(model.parameters()):  # moments and step counts are the checkpoint's
        st, old = opt.state[p], saved["state"][i]
        assert float(st["step"]) == 2.0 and st["step"].device == p.device
        assert torch.equal(st["exp_avg"], old["exp_avg"]) and torch.equal(st["exp_avg_sq"], old["exp_avg_sq"])
    model(torch.randn(8, 4)).sum().backward()
    opt.step()  # the fused step accepts the converted state
    assert float(opt.state[next(iter(model.parameters()))]["step"]) == 3.0
    # and back: a fused checkpoint resumed unfused keeps its step count on the CPU
    model2, _ = _adamw_after_steps(3e-3, fused=False)
    opt2 = torch.optim.AdamW(model2.parameters(), lr=3e-3, weight_decay=0.0, fused=False)
    assert load_optimizer_state(opt2, opt.state_dict())[0].startswith("lr 1e-05->0.003")
    assert opt2.param_groups[0]["fused"] is False
    opt2.step()


def test_stop_vote_interval_follows_the_grace_period():
    from trainer.stop import stop_check_seconds, steps_until_next_check

    assert stop_check_seconds(30) == 5.0 and stop_check_seconds(600) == 5.0  # at most every 5 s
    assert stop_check_seconds(6) == 1.0 and stop_check_seconds(0.01) == 0.05
    assert steps_until_next_check(0.5, 5.0) == 10  # 0.5 s steps: vote every 10 steps, whatever --log-interval
    assert steps_until_next_check(9.0, 5.0) == 1 and steps_until_next_check(0.0, 5.0) == 1


def test_grace_period_and_pg_timeout_flags(monkeypatch):
    monkeypatch.setenv("TERMINATION_GRACE_PERIOD_SECONDS", "12")
    monkeypatch.setenv("PG_TIMEOUT", "45")
    a = parse_args([])
    assert (a.grace_period, a.pg_timeout) == (12.0, 45.0)
    assert parse_args(["--pg-timeout", "5", "--grace-period", "8"]).pg_timeout == 5.0
    monkeypatch.delenv("PG_TIMEOUT")
    assert parse_args([]).pg_timeout == 600.0
    with pytest.raises(SystemExit):
        parse_args(["--pg-timeout", "0"])


def test_pg_timeout_reaches_init_process_group(monkeypatch):
    from datetime import timedelta

    import trainer.distributed as D

    seen = {}
    monkeypatch.setattr(D.dist, "init_process_group", lambda **kw: seen.update(kw))
    for k, v in {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    D.init("gloo", 7)
    assert seen["timeout"] == timedelta(seconds=7) and seen["backend"] == "gloo"


def _cgroup(tmp_path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.mark.parametrize("files,proc,cpus,local,expected", [
    ({"cpu.max": "200000 100000\n"}, "0::/\n", 16, 1, 2),  # cgroup v2, 2 CPUs, one process
    ({"cpu.max": "400000 100000\n"}, "0::/\n", 16, 2, 2),  # 4 CPUs shared by 2 processes
    ({"cpu.max": "150000 100000\n"}, "0::/\n", 16, 1, 1),  # 1.5 CPUs: rounded down
    ({"cpu.max": "max 100000\n"}, "0::/\n", 6, 1, 6),  # no limit: the affinity mask
    ({"cpu.max": "800000 100000\n"}, "0::/\n", 3, 1, 3),  # a limit above the affinity mask
    ({"kubepods/pod1/cpu.max": "300000 100000\n", "kubepods/cpu.max": "max 100000\n"},
     "0::/kubepods/pod1\n", 32, 1, 3),  # no cgroup namespace: this process's own cgroup
    ({"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"},
     "4:cpu,cpuacct:/\n", 64, 1, 2),  # cgroup v1
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, "4:cpu,cpuacct:/\n", 4, 3, 1),
])
def test_threads_from_the_containers_cpu_limit(tmp_path, files, proc, cpus, local, expected):
    from trainer.threads import choose_threads

    threads, why = choose_threads({}, local, root=_cgroup(tmp_path, files), proc_cgroup=proc, cpus=cpus)
    assert threads == expected, why


def test_explicit_omp_num_threads_wins(tmp_path):
    from trainer.threads import choose_threads

    root = _cgroup(tmp_path, {"cpu.max": "200000 100000\n"})
    assert choose_threads({"OMP_NUM_THREADS": "3"}, 1, root=root, proc_cgroup="0::/\n", cpus=8) == \
        (None, "OMP_NUM_THREADS=3")


def test_an_epochs_training_time_stops_before_its_validation():
    """train_s and samples/s of an [EPOCH] line count training only: the meter's clocks stop when the steps end."""
    import time

    from trainer.tracker import Meter

    meter = Meter(torch.device("cpu"), {"loss_sum": 3.0, "samples": 6, "train_s": 2.0}, is_main=True)
    meter.finish()
    frozen, cpu = meter.train_seconds(), meter.cpu_seconds()
    time.sleep(0.05)
    sum(range(200_000))  # validation's CPU time
    assert meter.train_seconds() == frozen >= 2.0 and meter.cpu_seconds() == cpu
    assert meter.partial()["train_s"] == frozen and meter.partial()["count"] == 6.0
