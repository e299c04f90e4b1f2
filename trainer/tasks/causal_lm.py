"""`causal-lm`: fine-tune a Hugging Face causal language model (AutoModelForCausalLM) on JSONL text.

The model and tokenizer come from a local folder (`--model-local-dir /models/<name>`, always with
local_files_only), or from the hub only when `--model-id` names one and the run is online (the `hf-token`
Secret's HUGGINGFACE_HUB_TOKEN for gated models). Data: `--train-file` and `--val-file` (JSONL, `text` or
`prompt`/`completion`; trainer/lm_data.py), tokenised once and packed into `--seq-len` blocks that each rank
reads from disk for its own shard. After every epoch: validation loss and perplexity over all ranks, a
Hugging Face folder `<run>/epoch-NNNN/`, and `<run>/best/` when the validation loss is the lowest so far.
Training state goes to sharded torch.distributed.checkpoint folders (trainer/lm_checkpoint.py), with `ddp`
or `fsdp` (trainer/fsdp.py). This task runs its own loop (token batches, gradient accumulation, schedule);
flags, logging, the stop vote, errors and exit codes are the trainer's.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import math
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from trainer import distributed as D
from trainer.flags import boolean as _bool, env as _env, non_negative_int as _non_negative_int, positive as _positive
from trainer import engine
from trainer import fsdp
from trainer import lm_checkpoint as lmc
from trainer import lm_data
from trainer.errors import Preempted, TrainerError
from trainer.sharding import eval_indices, shard_indices
from trainer.tasks import Task, register

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
SCHEDULES = ("cosine", "constant")


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("causal-lm task")
    g.add_argument("--model-local-dir", default=_env("MODEL_LOCAL_DIR", None),
                   help="[MODEL_LOCAL_DIR] folder with config.json and the weights (save_pretrained's layout)")
    g.add_argument("--tokenizer-local-dir", default=_env("TOKENIZER_LOCAL_DIR", None),
                   help="[TOKENIZER_LOCAL_DIR] tokenizer folder; None: --model-local-dir")
    g.add_argument("--model-id", default=_env("MODEL_ID", None),
                   help="[MODEL_ID] hub id, used only without --model-local-dir and when online "
                        "(HUGGINGFACE_HUB_TOKEN for gated models)")
    g.add_argument("--local-files-only", type=_bool, nargs="?", const=True, default=_env("LOCAL_FILES_ONLY", "false"),
                   help="[LOCAL_FILES_ONLY] never contact the hub (also when TRANSFORMERS_OFFLINE or HF_HUB_OFFLINE is 1)")
    g.add_argument("--train-file", default=_env("TRAIN_FILE", None),
                   help="[TRAIN_FILE] JSONL, `text` or `prompt`/`completion` per line; None: <data-root>/train.jsonl")
    g.add_argument("--val-file", default=_env("VAL_FILE", None),
                   help="[VAL_FILE] validation JSONL; None: <data-root>/val.jsonl")
    g.add_argument("--seq-len", type=_positive(int), default=_env("SEQ_LEN", "512"),
                   help="[SEQ_LEN] tokens per packed block (at most the model's maximum)")
    g.add_argument("--grad-accum", type=_positive(int), default=_env("GRAD_ACCUM", "1"),
                   help="[GRAD_ACCUM] micro-batches of --batch-size blocks per optimiser step")
    g.add_argument("--clip-grad", type=float, default=_env("CLIP_GRAD", "1.0"),
                   help="[CLIP_GRAD] gradient norm clipping (0: off)")
    g.add_argument("--warmup-steps", type=_non_negative_int, default=_env("WARMUP_STEPS", None),
                   help="[WARMUP_STEPS] linear warm-up; None: 5 %% of the run's steps")
    g.add_argument("--lr-schedule", choices=SCHEDULES, default=_env("LR_SCHEDULE", "cosine"),
                   help="[LR_SCHEDULE] after the warm-up: cosine decay to --min-lr-ratio x --lr, or constant")
    g.add_argument("--min-lr-ratio", type=float, default=_env("MIN_LR_RATIO", "0.1"),
                   help="[MIN_LR_RATIO] the cosine schedule's final learning rate, as a fraction of --lr")
    g.add_argument("--weight-decay", type=float, default=_env("WEIGHT_DECAY", "0.0"),
                   help="[WEIGHT_DECAY] AdamW weight decay")
    g.add_argument("--strategy", choices=fsdp.STRATEGIES, default=_env("STRATEGY", "ddp"),
                   help="[STRATEGY] ddp: a model replica per rank; fsdp: FSDP2 fully_shard, parameters, "
                        "gradients and optimiser state sharded over the ranks")
    g.add_argument("--token-cache", default=_env("TOKEN_CACHE", None),
                   help="[TOKEN_CACHE] folder of the tokenised data; None: <out-dir>/<run-id>/tokens")
    g.add_argument("--save-epochs", type=_bool, nargs="?", const=True, default=_env("SAVE_EPOCHS", "true"),
                   help="[SAVE_EPOCHS] write <run>/epoch-NNNN/ with save_pretrained after each checkpointed epoch")


# --------------------------------------------------------------------------------------------- loading
def quiet_transformers() -> None:
    """Progress bars and advice meant for notebooks would fill every rank's log: errors only."""
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    # DCP says it once per save in a world of one (python train.py, no torchrun): expected here
    warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")


def _offline(args: argparse.Namespace) -> bool:
    return bool(args.local_files_only) or any(os.environ.get(k, "").strip().lower() in ("1", "true", "yes", "on")
                                              for k in ("TRANSFORMERS_OFFLINE", "HF_HUB_OFFLINE"))


def check_model_dir(folder: Path, what: str = "--model-local-dir") -> None:
    """The folder must hold what from_pretrained needs; transformers' own message for a missing folder
    ("Repo id must be in the form ...") sends the user to the hub instead."""
    if not folder.is_dir():
        raise TrainerError(f"{what} {folder}: no such folder (mount the model there, e.g. /models/<name>)")
    if not (folder / "config.json").is_file():
        raise TrainerError(f"{what} {folder}: no config.json (write the folder with save_pretrained)")
    if not any((folder / f).is_file() for f in WEIGHT_FILES):
        raise TrainerError(f"{what} {folder}: no weights ({', '.join(WEIGHT_FILES)})")


def resolve_sources(args: argparse.Namespace) -> tuple[str, str, bool]:
    """(model source, tokenizer source, local_files_only)."""
    if args.model_local_dir:
        model_dir = Path(args.model_local_dir)
        check_model_dir(model_dir)
        tok_dir = Path(args.tokenizer_local_dir or model_dir)
        if not tok_dir.is_dir() or not any((tok_dir / f).is_file() for f in TOKENIZER_FILES):
            raise TrainerError(f"--tokenizer-local-dir {tok_dir}: no tokenizer files ({', '.join(TOKENIZER_FILES)})")
        return str(model_dir), str(tok_dir), True
    if args.model_id:
        if _offline(args):
            raise TrainerError(f"--model-id {args.model_id} names a hub model but the run is offline "
                               "(--local-files-only, TRANSFORMERS_OFFLINE or HF_HUB_OFFLINE): mount the model "
                               "and pass --model-local-dir /models/<name>")
        return args.model_id, args.tokenizer_local_dir or args.model_id, False
    raise TrainerError("task causal-lm needs --model-local-dir (a folder written with save_pretrained) "
                       "or --model-id (a hub id, online only)")


def load_tokenizer(source: str, local: bool):
    from transformers import AutoTokenizer

    token = os.environ.get("HUGGINGFACE_HUB_TOKEN") or None
    try:
        tok = AutoTokenizer.from_pretrained(source, local_files_only=local, token=None if local else token)
    except (OSError, ValueError) as e:
        raise TrainerError(f"tokenizer {source}: {str(e).splitlines()[0][:200]}") from None
    if tok.eos_token_id is None:
        raise TrainerError(f"tokenizer {source} has no end-of-sequence token (eos_token); documents cannot be packed")
    return tok


def load_config(source: str, local: bool):
    from transformers import AutoConfig

    token = os.environ.get("HUGGINGFACE_HUB_TOKEN") or None
    try:
        return AutoConfig.from_pretrained(source, local_files_only=local, token=None if local else token)
    except (OSError, ValueError) as e:
        raise TrainerError(f"model config {source}: {str(e).splitlines()[0][:200]}") from None


def max_positions(config) -> int | None:
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def load_model(source: str, local: bool):
    from transformers import AutoModelForCausalLM

    token = os.environ.get("HUGGINGFACE_HUB_TOKEN") or None
    try:
        # float32 master weights: bf16 is autocast's business (--amp bf16), AdamW keeps its moments in float32
        return AutoModelForCausalLM.from_pretrained(source, local_files_only=local, dtype=torch.float32,
                                                    token=None if local else token)
    except (OSError, ValueError) as e:
        raise TrainerError(f"model {source}: {str(e).splitlines()[0][:200]}") from None


def param_signature(model: torch.nn.Module) -> str:
    text = ";".join(f"{k}:{tuple(v.shape)}" for k, v in model.state_dict().items())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def lr_at(step: int, total: int, warmup: int, base: float, schedule: str, min_ratio: float) -> float:
    """Learning rate for optimiser step `step` (0-based): linear warm-up, then cosine decay or constant."""
    if warmup and step < warmup:
        return base * (step + 1) / warmup
    if schedule == "constant" or total <= warmup:
        return base
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return base * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


# --------------------------------------------------------------------------------------------- state
@dataclass
class Progress:
    epoch: int = 0
    epoch_step: int = 0
    step: int = 0
    best: dict[str, Any] = field(default_factory=dict)


@dataclass
class Loaded:
    model: torch.nn.Module
    tokenizer: Any
    model_source: str
    seq_len: int
    warnings: list[str]


class LMRun:
    def __init__(self, trainer):
        self.t = trainer
        self.args, self.denv, self.device = trainer.args, trainer.denv, trainer.device
        self.log, self.stop, self.run_dir = trainer.log, trainer.stop, trainer.run_dir
        self.amp = engine.AMP_DTYPES[self.args.amp]
        args = self.args
        data_root = Path(args.data_root)
        self.train_path = Path(args.train_file or data_root / "train.jsonl")
        self.val_path = Path(args.val_file or data_root / "val.jsonl")
        self.cache_dir = Path(args.token_cache) if args.token_cache else self.run_dir / "tokens"

    # ---- set-up, each stage agreed on by every rank
    def _load(self) -> Loaded:
        args, main = self.args, self.denv.is_main
        warnings: list[str] = []
        if main:
            from trainer import checkpoint as ckpt

            ckpt.check_writable(self.run_dir)
            removed = lmc.remove_temp(self.run_dir)
            if removed:
                warnings.append(f"removed {len(removed)} leftover temporary folder(s) of an interrupted write: "
                                + ", ".join(removed[:5]))
        if args.clip_grad < 0:
            raise TrainerError(f"--clip-grad {args.clip_grad} must be >= 0 (0: off)")
        if not 0 <= args.min_lr_ratio <= 1:
            raise TrainerError(f"--min-lr-ratio {args.min_lr_ratio} must be within 0..1")
        model_src, tok_src, local = resolve_sources(args)
        tokenizer = load_tokenizer(tok_src, local)
        config = load_config(model_src, local)
        vocab = getattr(config, "vocab_size", None)
        if isinstance(vocab, int) and len(tokenizer) > vocab:
            raise TrainerError(f"tokenizer {tok_src} has {len(tokenizer)} tokens but model {model_src} has a "
                               f"vocabulary of {vocab}: they do not belong together")
        limit = max_positions(config)
        if limit is not None and args.seq_len > limit:
            raise TrainerError(f"--seq-len {args.seq_len} exceeds the maximum sequence length of model "
                               f"{model_src} ({limit}); use --seq-len {limit} or less")
        for path in (self.train_path, self.val_path):
            if not path.is_file():
                raise TrainerError(f"data file {path} does not exist (JSONL with `text` or `prompt`/`completion`)")
        torch.manual_seed(args.seed)
        model = load_model(model_src, local)
        if model.get_input_embeddings().weight.shape[0] < len(tokenizer):
            raise TrainerError(f"tokenizer {tok_src} has {len(tokenizer)} tokens, more than the "
                               f"{model.get_input_embeddings().weight.shape[0]} embeddings of model {model_src}")
        return Loaded(model, tokenizer, model_src, args.seq_len, warnings)

    def _tokenizer_key(self, tok) -> str:
        try:
            text = tok.backend_tokenizer.to_str()
        except AttributeError:
            text = repr(sorted(tok.get_vocab().items()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _build_caches(self, loaded: Loaded) -> tuple[Path, Path] | None:
        # one process per node tokenises (the others would only repeat it); the cache may be shared
        if self.denv.local_rank != 0:
            return None
        tok = loaded.tokenizer
        key = self._tokenizer_key(tok)
        vocab = loaded.model.get_input_embeddings().weight.shape[0]
        return tuple(lm_data.build_cache(p, self.cache_dir, tok, key, tok.eos_token_id, vocab)  # type: ignore
                     for p in (self.train_path, self.val_path))

    def _open(self, loaded: Loaded) -> tuple[lm_data.TokenFile, lm_data.TokenFile, dict, Path | None, dict | None]:
        key = self._tokenizer_key(loaded.tokenizer)
        vocab = loaded.model.get_input_embeddings().weight.shape[0]
        headers = [lm_data.build_cache(p, self.cache_dir, loaded.tokenizer, key, loaded.tokenizer.eos_token_id, vocab)
                   for p in (self.train_path, self.val_path)]  # present by now: only looks them up
        train, val = (lm_data.open_cache(h, self.args.seq_len) for h in headers)
        identity = {"model_type": getattr(loaded.model.config, "model_type", type(loaded.model).__name__),
                    "params": param_signature(loaded.model), "tokenizer": key, "seq_len": self.args.seq_len,
                    "train": train.digest, "val": val.digest}
        path, meta = lmc.find_resume(self.run_dir)
        if meta is not None:
            lmc.check_identity(meta, identity, path)
        return train, val, identity, path, meta

    # ---- the run
    def run(self) -> int:
        args, denv, device = self.args, self.denv, self.device
        self.stop.install()
        quiet_transformers()
        loaded = D.agree(self._load)
        for w in loaded.warnings:
            self.log.warn(w)
        D.agree(lambda: self._build_caches(loaded))
        train, val, identity, resume_path, meta = D.agree(lambda: self._open(loaded))

        engine.configure_device(device)
        base = loaded.model.to(device)
        base.config.use_cache = False
        model, units = fsdp.wrap(base, args.strategy, device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay,
                                      fused=device.type == "cuda")
        self.model, self.base, self.optimizer, self.tokenizer = model, base, optimizer, loaded.tokenizer
        self.train_data, self.val_data, self.identity = train, val, identity

        progress = Progress()
        if meta is not None:
            lmc.load(resume_path, model, optimizer)
            progress = Progress(meta["epoch"], meta["epoch_step"], meta["step"], dict(meta.get("best") or {}))
            rngs = meta.get("rng") or []
            if denv.rank < len(rngs) and meta.get("world_size") == denv.world_size:
                torch.manual_seed(int(rngs[denv.rank]))
            if meta.get("data_seed") is not None and meta["data_seed"] != args.seed:
                self.log.warn(f"--seed {args.seed} ignored: this run shuffles its data with seed {meta['data_seed']}, "
                              "the seed of its checkpoint")
                args.seed = int(meta["data_seed"])
            shape = (meta.get("world_size"), meta.get("batch_size"), meta.get("grad_accum"))
            if progress.epoch_step and shape != (denv.world_size, args.batch_size, args.grad_accum):
                self.log.warn(f"checkpoint was taken mid-epoch with world x batch x accumulation {shape[0]} x "
                              f"{shape[1]} x {shape[2]}; now {denv.world_size} x {args.batch_size} x "
                              f"{args.grad_accum}: epoch {progress.epoch + 1} starts again from its beginning")
                progress.epoch_step = 0

        per_step = args.batch_size * args.grad_accum
        self.steps_per_epoch = math.ceil(math.ceil(train.blocks / denv.world_size) / per_step)
        total = self.steps_per_epoch * args.epochs
        if args.max_steps:
            total = min(total, args.max_steps)
        self.total_steps = total
        self.warmup = args.warmup_steps if args.warmup_steps is not None else int(0.05 * total)
        n_params = sum(p.numel() for p in base.parameters())  # a DTensor (FSDP) counts its global size
        self.log.emit("DDP", "start", world=denv.world_size, backend=denv.backend if D.active() else "none",
                      device=str(device), local_world=denv.local_world_size, host=socket.gethostname(),
                      restart=denv.restart_count, task="causal-lm", strategy=args.strategy,
                      fsdp_units=units or None, model=loaded.model_source, model_type=identity["model_type"],
                      params=n_params, seq_len=args.seq_len,
                      data=f"{self.train_path} ({train.docs} docs, {train.tokens} tokens, {train.blocks} blocks) + "
                           f"{self.val_path} ({val.docs} docs, {val.blocks} blocks)",
                      amp=args.amp, batch_per_rank=args.batch_size, grad_accum=args.grad_accum,
                      tokens_per_step=per_step * args.seq_len * denv.world_size, lr=args.lr,
                      schedule=args.lr_schedule, warmup_steps=self.warmup, clip_grad=args.clip_grad,
                      epochs=args.epochs, steps_per_epoch=self.steps_per_epoch, threads=torch.get_num_threads(),
                      run_dir=str(self.run_dir))
        if meta is not None:
            self.log.emit("DDP", "resume", resumed_from=str(resume_path), epoch=progress.epoch,
                          epoch_step=progress.epoch_step, step=progress.step, saved_world=meta.get("world_size"),
                          kept="model, AdamW moments and step counts, data order")
        started = time.perf_counter()
        self._train(progress)
        best = progress.best
        self.log.emit("DONE", "done", world=denv.world_size, epochs=progress.epoch, steps=progress.step,
                      best_val_loss=best.get("val_loss"), best_val_ppl=best.get("val_ppl"),
                      best_epoch=best.get("epoch"), model=str(self.run_dir / lmc.BEST) if best else None,
                      latest=str(self.run_dir / lmc.LATEST), total_s=round(time.perf_counter() - started, 3))
        return 0

    def _micro(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Sum of the token losses of a micro-batch (labels -100 excluded), float32."""
        with engine.autocast(self.device, self.amp):
            logits = self.model(input_ids=x).logits
        return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), y[:, 1:].reshape(-1),
                               ignore_index=lm_data.IGNORE, reduction="sum")

    def _sync_ctx(self, last: bool):
        if last:
            return contextlib.nullcontext()
        if hasattr(self.model, "no_sync"):  # DDP: all-reduce the gradients once per optimiser step
            return self.model.no_sync()
        if hasattr(self.model, "set_requires_gradient_sync"):  # FSDP2: reduce-scatter once per step
            self.model.set_requires_gradient_sync(False)
            return _ResyncOnExit(self.model)
        return contextlib.nullcontext()

    def _train(self, progress: Progress) -> None:
        args, denv, device = self.args, self.denv, self.device
        data = self.train_data
        per_step = args.batch_size * args.grad_accum
        for epoch in range(progress.epoch, args.epochs):
            if args.max_steps and progress.step >= args.max_steps:
                break
            shard = shard_indices(data.blocks, denv.rank, denv.world_size, epoch, args.seed)
            steps = self.steps_per_epoch
            self.model.train()
            epoch_loss = epoch_tokens = 0.0
            t_epoch = t_log = time.perf_counter()
            log_tokens = 0.0
            log_loss = 0.0
            for s in range(progress.epoch_step, steps):
                window = shard[s * per_step:(s + 1) * per_step]
                if window.numel() == 0:  # every rank has as many blocks (padded shards): never, kept safe
                    window = shard[:per_step]
                micro = [data.batch(window[i:i + args.batch_size]) for i in range(0, window.numel(), args.batch_size)]
                count = sum(int((y[:, 1:] != lm_data.IGNORE).sum()) for _, y in micro)
                lr = lr_at(progress.step, self.total_steps, self.warmup, args.lr, args.lr_schedule, args.min_lr_ratio)
                for g in self.optimizer.param_groups:
                    g["lr"] = lr
                loss_sum = torch.zeros((), device=device, dtype=torch.float64)
                for k, (x, y) in enumerate(micro):
                    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                    with self._sync_ctx(k == len(micro) - 1):
                        loss = self._micro(x, y)
                        (loss / max(count, 1)).backward()
                    loss_sum += loss.detach().double()
                if args.clip_grad > 0:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), args.clip_grad)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                progress.step += 1
                progress.epoch_step = s + 1
                # one host sync per step (an LM step is long): loss, tokens and the SIGTERM vote of all ranks
                stats = D.all_reduce_sum(torch.stack([loss_sum, torch.tensor(float(count), device=device,
                                                                               dtype=torch.float64),
                                                      torch.tensor(float(self.stop.requested), device=device,
                                                                   dtype=torch.float64)])).tolist()
                epoch_loss += stats[0]
                epoch_tokens += stats[1]
                log_loss += stats[0]
                log_tokens += stats[1]
                at_max = bool(args.max_steps) and progress.step >= args.max_steps
                if progress.step % args.log_interval == 0:
                    now = time.perf_counter()
                    mean = log_loss / max(log_tokens, 1)
                    self.log.emit("TRAIN", "train", epoch=epoch + 1, step=progress.step, epoch_step=s + 1,
                                  epoch_steps=steps, loss=mean, ppl=math.exp(min(mean, 50)), lr=lr,
                                  tokens_per_s=log_tokens / max(now - t_log, 1e-9))
                    log_loss = log_tokens = 0.0
                    t_log = now
                if stats[2] and progress.epoch_step < steps:
                    self._checkpoint(progress, lmc.step_name(progress.step), "SIGTERM")
                    raise Preempted()
                if (args.checkpoint_steps and progress.step % args.checkpoint_steps == 0
                        and progress.epoch_step < steps and not at_max):
                    self._checkpoint(progress, lmc.step_name(progress.step), "every-steps")
                if at_max:
                    break
                if stats[2]:
                    break
            complete = progress.epoch_step >= steps
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            train_s = time.perf_counter() - t_epoch
            self._end_epoch(progress, epoch, complete, epoch_loss, epoch_tokens, train_s)
            if not complete:
                break

    @torch.no_grad()
    def _evaluate(self) -> tuple[float, float]:
        """Validation loss (mean over every label token of the validation set, all ranks) and its tokens."""
        args, denv, device = self.args, self.denv, self.device
        self.model.eval()
        idx = eval_indices(self.val_data.blocks, denv.rank, denv.world_size)
        sums = torch.zeros(2, device=device, dtype=torch.float64)
        # FSDP: every rank must run as many forward passes (each gathers the parameters collectively)
        batches = math.ceil(math.ceil(self.val_data.blocks / denv.world_size) / args.batch_size)
        for b in range(batches):
            part = idx[b * args.batch_size:(b + 1) * args.batch_size]
            real = part.numel() > 0
            x, y = self.val_data.batch(part if real else torch.zeros(1, dtype=torch.int64))
            x, y = x.to(device), y.to(device)
            loss = self._micro(x, y)
            if real:
                sums[0] += loss.double()
                sums[1] += (y[:, 1:] != lm_data.IGNORE).sum()
        self.model.train()
        loss_sum, tokens = D.all_reduce_sum(sums).tolist()
        return loss_sum / max(tokens, 1), tokens

    def _meta(self, progress: Progress) -> dict[str, Any]:
        seeds = D.all_gather_objects(int(torch.randint(0, 2**31 - 1, (1,)).item()))
        return {"format": lmc.FORMAT, "epoch": progress.epoch, "epoch_step": progress.epoch_step,
                "step": progress.step, "best": progress.best, "world_size": self.denv.world_size,
                "batch_size": self.args.batch_size, "grad_accum": self.args.grad_accum, "data_seed": self.args.seed,
                "strategy": self.args.strategy, "rng": seeds, "identity": self.identity,
                "config": {k: v for k, v in vars(self.args).items() if isinstance(v, (str, int, float, bool, type(None)))}}

    def _checkpoint(self, progress: Progress, name: str, reason: str) -> None:
        lmc.save(self.run_dir, name, self.model, self.optimizer, self._meta(progress))
        self.log.emit("CKPT", "checkpoint", dir=f"{lmc.CHECKPOINTS}/{name}", epoch=progress.epoch + 1,
                      step=progress.step, reason=reason)

    def _end_epoch(self, progress: Progress, epoch: int, complete: bool, loss_sum: float, tokens: float,
                   train_s: float) -> None:
        args = self.args
        val_loss, val_tokens = self._evaluate()
        val_ppl = math.exp(min(val_loss, 50))
        train_loss = loss_sum / tokens if tokens else None
        metrics = {"epoch": epoch + 1, "step": progress.step, "train_loss": train_loss, "val_loss": val_loss,
                   "val_ppl": val_ppl, "val_tokens": int(val_tokens), "train_s": round(train_s, 3),
                   "tokens_per_s": tokens / train_s if tokens and train_s > 0 else None}
        is_best = not progress.best or val_loss < progress.best["val_loss"]
        if is_best:
            progress.best = {"val_loss": val_loss, "val_ppl": val_ppl, "epoch": epoch + 1, "step": progress.step}
        stop = bool(D.all_reduce_sum(torch.tensor([float(self.stop.requested)], device=self.device)).item())
        if complete:
            progress.epoch, progress.epoch_step = epoch + 1, 0
            due = (epoch + 1) % args.checkpoint_every == 0 or epoch + 1 == args.epochs or stop
            name = lmc.epoch_name(epoch + 1) if due else None
        else:
            name = lmc.step_name(progress.step)
        if is_best:  # best/ before the checkpoint that records it (as best.pt before `latest`)
            lmc.export_pretrained(self.run_dir, lmc.BEST, self.model, self.base, self.tokenizer, metrics)
        if name is not None:
            if complete and args.save_epochs:
                lmc.export_pretrained(self.run_dir, lmc.epoch_name(epoch + 1), self.model, self.base,
                                      self.tokenizer, metrics)
            lmc.save(self.run_dir, name, self.model, self.optimizer, self._meta(progress))
        self.log.emit("EPOCH", "epoch", epoch=epoch + 1, epochs=args.epochs, step=progress.step,
                      train_loss=train_loss, val_loss=val_loss, val_ppl=val_ppl,
                      tokens_per_s=metrics["tokens_per_s"], train_s=metrics["train_s"],
                      checkpoint=f"{lmc.CHECKPOINTS}/{name}" if name else None, best=is_best)
        if stop:
            raise Preempted()


class _ResyncOnExit:
    def __init__(self, model):
        self.model = model

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.model.set_requires_gradient_sync(True)
        return False


def run(trainer) -> int:
    return LMRun(trainer).run()


register(Task(
    name="causal-lm",
    summary="fine-tune a Hugging Face causal LM from --model-local-dir on JSONL (perplexity, best/ via save_pretrained)",
    load=None,
    build_model=None,
    default_lr=5e-5,
    image=False,
    run=run,
    add_arguments=add_arguments,
    default_batch_size=8,
))
