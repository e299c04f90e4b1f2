"""The trainer's state a checkpoint records (trainer/checkpoint/state.py TrainState) and the run's configuration
(trainer/config.py RunConfig): the round trip, the layouts older trainers wrote, and the configuration's one source."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from trainer import checkpoint as ckpt
from trainer.checkpoint import single
from trainer.checkpoint.sharded import _identity
from trainer.checkpoint.state import KEYS, TrainState
from trainer.cli import build_parser, parse_args
from trainer.config import RunConfig
from trainer.errors import TrainerError

IDENTITY = {"task": "synthetic", "model": "MLP", "params": "p", "data": {"n": 1}}


def full_state() -> TrainState:
    return TrainState(epoch=1, epoch_step=3, step=11, world_size=2, batch_size=32, grad_accum=2,
                      rng=[{"torch": torch.arange(4, dtype=torch.uint8)}, {"torch": torch.arange(4, dtype=torch.uint8)}],
                      data_seed=7, epoch_partial={"loss_sum": 1.5, "count": 64.0, "samples": 64, "train_s": 0.25},
                      identity=dict(IDENTITY), config={"seed": 7, "lr": 0.003}, best={"val_loss": 0.5, "epoch": 1},
                      metrics={"reason": "SIGTERM"}, exports=["best"])


def same(a: TrainState, b: TrainState) -> None:
    for f in dataclasses.fields(TrainState):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "rng":
            assert len(x) == len(y) and all(torch.equal(p["torch"], q["torch"]) for p, q in zip(x, y))
        else:
            assert x == y, f.name


def test_state_dict_round_trip_keeps_every_field_under_the_on_disk_keys():
    state = full_state()
    saved = state.state_dict()
    assert tuple(saved) == KEYS  # the keys checkpoints have always had, in the order the trainer wrote them
    assert {f.name for f in dataclasses.fields(TrainState)} == set(KEYS)
    again = TrainState()
    again.load_state_dict(saved)
    same(state, again)
    same(state, TrainState.from_state_dict(saved))


def test_a_fresh_state_round_trips_too():
    same(TrainState(), TrainState.from_state_dict(TrainState().state_dict()))


# What trainer/loop.py's `_save` wrote before TrainState (commit 1e45d9c), key for key, for a run of 2 ranks stopped
# mid-epoch; the single format adds "format", "model" and "optimizer" beside it.
def old_meta() -> dict:
    return {"epoch": 1, "epoch_step": 3, "step": 11, "world_size": 2, "batch_size": 32, "grad_accum": 1,
            "rng": [{"torch": torch.get_rng_state(), "cuda": None, "numpy": ["MT19937", [1, 2], 3, 0, 0.0],
                     "python": (3, (1, 2), None)}] * 2,
            "data_seed": 42,
            "epoch_partial": {"loss_sum": 12.5, "count": 96.0, "samples": 96, "train_s": 0.5},
            "identity": dict(IDENTITY), "config": {"task": "synthetic", "seed": 42, "lr": 0.003, "batch_size": 32},
            "best": {"val_loss": 0.9, "val_acc": 0.5, "epoch": 1, "step": 8}, "metrics": {"reason": "SIGTERM"},
            "exports": []}


def test_the_layout_the_previous_trainer_wrote_loads():
    meta = old_meta()
    state = TrainState.from_state_dict(meta)
    assert (state.epoch, state.epoch_step, state.step, state.world_size, state.batch_size) == (1, 3, 11, 2, 32)
    assert state.data_seed == 42 and state.grad_accum == 1 and state.epoch_partial == meta["epoch_partial"]
    assert state.best == meta["best"] and state.metrics == {"reason": "SIGTERM"} and state.exports == []
    assert state.config["lr"] == 0.003 and state.identity == IDENTITY and len(state.rng) == 2
    # and what it writes back is that layout again
    assert set(state.state_dict()) == set(meta)


def test_layouts_of_older_trainers_read_as_they_meant_it():
    """Before data_seed (the seed of the run's flags), gradient accumulation (1), mid-epoch figures (none), exports
    (none): keys missing, or null where the trainer wrote None."""
    meta = {k: v for k, v in old_meta().items() if k not in ("data_seed", "grad_accum", "epoch_partial", "exports")}
    state = TrainState.from_state_dict(meta)
    assert (state.data_seed, state.grad_accum, state.epoch_partial, state.exports) == (42, 1, None, [])
    nulls = {**old_meta(), "best": None, "metrics": None, "exports": None, "epoch_partial": None, "rng": None,
             "config": None, "data_seed": None}
    state = TrainState.from_state_dict(nulls)
    assert (state.best, state.metrics, state.exports, state.epoch_partial, state.rng, state.config,
            state.data_seed) == ({}, {}, [], None, [], {}, None)
    bare = TrainState.from_state_dict({"epoch": 2, "epoch_step": 0, "step": 20})  # the position alone
    assert (bare.world_size, bare.batch_size, bare.data_seed, bare.identity) == (None, None, None, {})


def test_the_sharded_formats_trainer_json_of_an_older_trainer_loads():
    """trainer.json as the causal-LM task wrote it before the one checkpoint API: its own identity layout."""
    meta = {"format": "causal-lm/1", "epoch": 1, "epoch_step": 0, "step": 6, "world_size": 2, "batch_size": 4,
            "grad_accum": 2, "rng": [11, 12], "config": {"seed": 5, "lr": 5e-5},
            "identity": {"model_type": "llama", "params": "abc", "tokenizer": "t", "seq_len": 32, "train": "d1",
                         "val": "d2"},
            "best": {"val_loss": 2.0, "val_ppl": 7.4, "epoch": 1, "step": 6}, "metrics": {}, "exports": ["best"]}
    meta["identity"] = _identity(meta)  # as Sharded.read does
    state = TrainState.from_state_dict(json.loads(json.dumps(meta)))
    assert state.identity == {"task": "causal-lm", "model": "llama", "params": "abc",
                              "data": {"tokenizer": "t", "seq_len": 32, "train": "d1", "val": "d2"}}
    assert (state.rng, state.data_seed, state.grad_accum, state.exports) == ([11, 12], 5, 2, ["best"])


def test_a_single_file_checkpoint_of_the_previous_trainer_is_found_with_its_state(tmp_path):
    """A file as the previous trainer saved it (its `_save` dict plus format, model, optimizer): the store reads it
    into a TrainState, and a checkpoint the store writes from that state holds the same keys and values."""
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    old = {**old_meta(), "format": single.FORMAT, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    single.write(tmp_path, old, "step-00000011.pt", is_best=False)
    found, warnings = single.SingleFile(tmp_path).find()
    assert found is not None and warnings == [] and found.name == "step-00000011"
    assert found.train.step == 11 and found.train.data_seed == 42 and found.train.epoch_partial is not None
    ckpt.check_identities(found.train.identity, IDENTITY, found.path)

    store = single.SingleFile(tmp_path / "new")
    (tmp_path / "new").mkdir()
    store.save("step-00000011", model, model, optimizer, found.train, is_best=False)
    written = torch.load(tmp_path / "new" / "step-00000011.pt", weights_only=True)
    assert set(written) == set(old)
    for key in KEYS:
        if key != "rng":
            assert written[key] == old[key], key
    assert json.loads((tmp_path / "new" / "latest").read_text())["step"] == 11


def test_a_checkpoint_without_the_trainers_position_is_refused_like_a_damaged_one(tmp_path):
    model = torch.nn.Linear(2, 2)
    state = {"format": single.FORMAT, "model": model.state_dict(), "optimizer": {}, "identity": dict(IDENTITY)}
    (tmp_path / "epoch-0001.pt").write_bytes(single.serialize(state))  # no `latest`: written by hand
    with pytest.raises(TrainerError, match="records no trainer state"):
        single.SingleFile(tmp_path).read("epoch-0001", None)
    found, warnings = single.SingleFile(tmp_path).find()
    assert found is None and "records no trainer state" in " ".join(warnings)


# ---------------------------------------------------------------------------------------------- configuration
def test_the_configuration_is_a_frozen_dataclass_of_every_flag():
    cfg = parse_args(["--task", "synthetic", "--seed", "3"], environ={})
    assert isinstance(cfg, RunConfig) and cfg.seed == 3 and cfg.batch_size == 256 and cfg.lr == 3e-3
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 4  # type: ignore[misc]
    assert dataclasses.replace(cfg, seed=4).seed == 4 and cfg.seed == 3
    # exactly the parser's flags, by their argparse names: what vars(namespace) was
    parsed = vars(build_parser(environ={}).parse_args([]))
    assert list(cfg.to_dict()) == list(parsed)
    assert cfg.scalars() == cfg.to_dict()  # every flag is a scalar: a checkpoint's `config` records them all


def test_a_flag_without_a_field_is_refused():
    ns = build_parser(environ={}).parse_args([])
    ns.brand_new_flag = 1
    with pytest.raises(TypeError, match="brand_new_flag"):
        RunConfig.from_namespace(ns)
    del ns.brand_new_flag, ns.seed
    with pytest.raises(TypeError, match="seed"):
        RunConfig.from_namespace(ns)
