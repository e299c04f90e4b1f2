"""`causal-lm`: fine-tune a Hugging Face causal language model (AutoModelForCausalLM) on JSONL text: its model, data
and step; the loop, checkpoints, stop vote and telemetry are the trainer's (trainer/loop.py).

The model and tokenizer come from a local folder (`--model-local-dir /models/<name>`, always with
local_files_only), or from the hub only when `--model-id` names one and the run is online (the `hf-token`
Secret's HUGGINGFACE_HUB_TOKEN for gated models). Data: `--train-file` and `--val-file` (JSONL, `text` or
`prompt`/`completion`; trainer/lm_data.py), tokenised once and packed into `--seq-len` blocks that each rank
reads from disk for its own shard. A step: `--grad-accum` micro-batches of `--batch-size` blocks, the loss the mean
over the step's label tokens, gradient clipping, a warm-up and cosine schedule of the learning rate by global step.
Validation: loss, perplexity and next-token accuracy over every validation token. Its exports: a Hugging Face folder
`<run>/epoch-NNNN/` after each checkpointed epoch and `<run>/best/` when the validation loss is the lowest so far;
its checkpoints are the sharded format (trainer/checkpoint/sharded.py), under `ddp` or `fsdp` (trainer/fsdp.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

from trainer import distributed as D
from trainer import engine
from trainer import lm_data
from trainer.checkpoint import files
from trainer.config import RunConfig
from trainer.errors import TrainerError
from trainer.tasks import Context, Task

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
METRICS = "metrics.json"


# --------------------------------------------------------------------------------------------- loading
def quiet_transformers() -> None:
    """Progress bars and advice meant for notebooks would fill every rank's log: errors only."""
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    # DCP says it once per save in a world of one (python train.py, no torchrun): expected here
    warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")


def _offline(args: RunConfig) -> bool:
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


def resolve_sources(args: RunConfig) -> tuple[str, str, bool]:
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
        # float32 master weights: bf16 is autocast's business (--amp bf16), AdamW keeps its moments in float32.
        # Attention through torch's scaled_dot_product_attention (its flash kernel on a GPU in bf16), where the
        # model supports it; the [DDP] line says which implementation the model runs (attn=).
        kwargs = dict(local_files_only=local, dtype=torch.float32, token=None if local else token)
        try:
            return AutoModelForCausalLM.from_pretrained(source, attn_implementation="sdpa", **kwargs)
        except ValueError as e:
            if "scaled_dot_product_attention" not in str(e) and "sdpa" not in str(e):
                raise
        return AutoModelForCausalLM.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as e:
        raise TrainerError(f"model {source}: {str(e).splitlines()[0][:200]}") from None
    except Exception as e:  # a damaged weights file (safetensors' SafetensorError, a torch unpickling error, ...)
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        raise TrainerError(f"model {source}: its weights cannot be read ({type(e).__name__}: {first}); copy the "
                           "folder again or write it with save_pretrained") from None


CAUSAL_SDPA = "sdpa_causal"


def _sdpa_causal(module, query, key, value, attention_mask, **kwargs):
    """transformers' SDPA attention without a mask: is_causal=True (the flash kernel on a GPU in bf16)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(module, query, key, value, None, **kwargs)


def causal_attention(model) -> str:
    """The attention the model trains with; returns its name (the [DDP] line's attn=).

    The task's blocks are full (packed, never padded), so every layer's mask is the plain causal one. transformers'
    own `sdpa` builds that mask per forward pass and, without an attention mask, first checks whether the position
    ids hold packed sequences with `(mask[:, -1] == 0).all()` in Python: a host sync per step (found by
    tests/test_trainer_lm_step.py). `sdpa_causal` is the same SDPA call with is_causal=True and no mask, registered
    as an attention of its own, which transformers gives no mask to build. Only for a model whose every layer attends
    causally to the whole block (no sliding window, no encoder); any other keeps what it loaded with."""
    from transformers import AttentionInterface

    config = model.config
    implementation = getattr(config, "_attn_implementation", None)
    full = all(t == "full_attention" for t in (getattr(config, "layer_types", None) or ["full_attention"]))
    if (implementation != "sdpa" or not full or getattr(config, "sliding_window", None)
            or getattr(config, "use_sliding_window", False) or getattr(config, "is_encoder_decoder", False)):
        return str(implementation)
    AttentionInterface.register(CAUSAL_SDPA, _sdpa_causal)
    model.set_attn_implementation(CAUSAL_SDPA)
    return CAUSAL_SDPA


def lr_at(step: int, total: int, warmup: int, base: float, schedule: str, min_ratio: float) -> float:
    """Learning rate for optimiser step `step` (0-based): linear warm-up, then cosine decay or constant."""
    if warmup and step < warmup:
        return base * (step + 1) / warmup
    if schedule == "constant" or total <= warmup:
        return base
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return base * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


# --------------------------------------------------------------------------------------------- the run
def _tokenizer_key(tok) -> str:
    try:
        text = tok.backend_tokenizer.to_str()
    except AttributeError:
        text = repr(sorted(tok.get_vocab().items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class _ResyncOnExit:
    def __init__(self, model):
        self.model = model

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.model.set_requires_gradient_sync(True)
        return False


def _sync_ctx(model, last: bool):
    """Gradients are reduced once per optimiser step: on the last micro-batch."""
    if last:
        return contextlib.nullcontext()
    if hasattr(model, "no_sync"):  # DDP
        return model.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2: reduce-scatter once per step
        model.set_requires_gradient_sync(False)
        return _ResyncOnExit(model)
    return contextlib.nullcontext()


def token_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Sum of the next-token losses of a micro-batch (labels -100 excluded), float32: what --compile compiles beside
    the model (the float32 copy of the logits and the log-softmax fuse into one kernel)."""
    return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), y[:, 1:].reshape(-1),
                           ignore_index=lm_data.IGNORE, reduction="sum")


class LMRun:
    """The TaskRun of causal-lm (trainer/tasks/__init__.py)."""

    unit = "tokens"
    schedules_lr = True  # the step sets the learning rate: a saved optimiser's lr is the schedule's, not a flag

    def __init__(self, args: RunConfig, world: int, model, tokenizer, source: str, train: lm_data.TokenFile,
                 val: lm_data.TokenFile, train_path: Path, val_path: Path, tokenizer_key: str):
        self.args, self.world, self.model, self.tokenizer, self.source = args, world, model, tokenizer, source
        self.train, self.val = train, val
        self.model_name = getattr(model.config, "model_type", type(model).__name__)
        self.data_identity = {"tokenizer": tokenizer_key, "seq_len": args.seq_len, "train": train.digest,
                              "val": val.digest}
        self.description = (f"{train_path} ({train.docs} docs, {train.tokens} tokens, {train.blocks} blocks) + "
                            f"{val_path} ({val.docs} docs, {val.blocks} blocks)")
        self.train_size, self.val_size = train.blocks, val.blocks
        self.strategy, self.weight_decay, self.accumulation = args.strategy, args.weight_decay, args.grad_accum
        self.index_device = torch.device("cpu")  # the blocks are read from the memory-mapped cache per batch
        self.device = torch.device("cpu")
        self.amp = engine.AMP_DTYPES[args.amp]
        self.loss_fn = torch.compile(token_loss) if getattr(args, "compile", False) else token_loss
        self.warnings: list[str] = []
        self.total = self.warmup = 0

    def to(self, device: torch.device, channels_last: bool) -> None:
        self.device = device
        self.model.config.use_cache = False

    def start(self, total_steps: int) -> dict[str, Any]:
        args = self.args
        self.total = total_steps
        self.warmup = args.warmup_steps if args.warmup_steps is not None else int(0.05 * total_steps)
        return {"strategy": args.strategy, "model": self.source, "model_type": self.model_name,
                "attn": getattr(self.model.config, "_attn_implementation", None),
                "params": sum(p.numel() for p in self.model.parameters()),  # a DTensor (FSDP) counts its global size
                "seq_len": args.seq_len, "grad_accum": args.grad_accum,
                "tokens_per_step": args.batch_size * args.grad_accum * args.seq_len * self.world,
                "schedule": args.lr_schedule, "warmup_steps": self.warmup, "clip_grad": args.clip_grad}

    def lr(self, step: int) -> float:
        a = self.args
        return lr_at(step, self.total, self.warmup, a.lr, a.lr_schedule, a.min_lr_ratio)

    def fetch(self, window: torch.Tensor) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], int]:
        b = self.args.batch_size
        micro = [self.train.batch(window[i:i + b]) for i in range(0, window.numel(), b)]
        # counted on the host in numpy: the labels never leave it here, and the step reads no tensor back
        return micro, sum(int(np.count_nonzero(y[:, 1:].numpy() != lm_data.IGNORE)) for _, y in micro)

    def _forward(self, model, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sum of the token losses of a micro-batch (labels -100 excluded), float32, and the logits."""
        with engine.autocast(self.device, self.amp):
            logits = model(input_ids=x).logits
        return self.loss_fn(logits, y), logits

    def train_step(self, model, optimizer: torch.optim.Optimizer, batch, step: int) -> tuple[torch.Tensor, float, int]:
        micro, count = batch
        lr = self.lr(step)
        for g in optimizer.param_groups:
            g["lr"] = lr
        loss_sum = torch.zeros((), device=self.device, dtype=torch.float64)
        for k, (x, y) in enumerate(micro):
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            with _sync_ctx(model, k == len(micro) - 1):
                loss, _ = self._forward(model, x, y)
                (loss / max(count, 1)).backward()
            loss_sum += loss.detach().double()
        if self.args.clip_grad > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), self.args.clip_grad)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss_sum, count, sum(x.shape[0] for x, _ in micro)

    def val_step(self, model, idx: torch.Tensor) -> torch.Tensor:
        # FSDP: every rank runs as many forward passes (each gathers the parameters collectively), so a rank
        # without validation blocks left runs one on a block it does not count
        real = idx.numel() > 0
        x, y = self.val.batch(idx if real else torch.zeros(1, dtype=torch.int64))
        x, y = x.to(self.device), y.to(self.device)
        loss, logits = self._forward(model, x, y)
        if not real:
            return torch.zeros(3, device=self.device, dtype=torch.float64)
        labels = y[:, 1:]
        counted = labels != lm_data.IGNORE
        correct = ((logits[:, :-1].argmax(dim=-1) == labels) & counted).sum()
        return torch.stack([loss.double(), correct.double(), counted.sum().double()])

    def train_fields(self, loss: float, step: int) -> dict[str, Any]:
        return {"ppl": math.exp(min(loss, 50)), "lr": self.lr(step - 1)}

    def val_fields(self, val_loss: float) -> dict[str, Any]:
        return {"val_ppl": math.exp(min(val_loss, 50))}

    def exports(self, epoch: int, checkpointed: bool, is_best: bool) -> list[str]:
        names = ["best"] if is_best else []
        if checkpointed and self.args.save_epochs:
            names.append(f"epoch-{epoch:04d}")
        return names

    def export(self, run_dir: Path, name: str, model, metrics: dict[str, Any]) -> None:
        """Collective: gather the full weights on rank 0 (CPU), which writes <run>/<name>/ with save_pretrained
        (model, config, tokenizer) and metrics.json, swapped in whole."""
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))

        def write() -> None:
            if not D.is_main():
                return
            target, tmp, old = run_dir / name, run_dir / f"{files.TMP_PREFIX}{name}", run_dir / f"{files.TMP_PREFIX}old-{name}"
            try:
                shutil.rmtree(tmp, ignore_errors=True)
                self.model.save_pretrained(tmp, state_dict=full)
                self.tokenizer.save_pretrained(tmp)
                # transformers writes the weights through a 0600 temporary file: give them the usual mode, so that
                # an inference server running as another user of the pod's group can read best/
                for f in tmp.iterdir():
                    f.chmod(files.FILE_MODE)
                files.atomic_write(tmp / METRICS, (json.dumps(metrics, sort_keys=True) + "\n").encode())
                shutil.rmtree(old, ignore_errors=True)
                if target.exists():
                    os.replace(target, old)
                os.replace(tmp, target)
                shutil.rmtree(old, ignore_errors=True)
            except OSError as e:
                raise TrainerError(f"cannot write {target}: {e.strerror or e}") from None

        D.agree(write)

    def exported_step(self, run_dir: Path, name: str) -> int | None:
        try:
            step = json.loads((run_dir / name / METRICS).read_text()).get("step")
        except (OSError, ValueError, AttributeError):
            return None
        return step if isinstance(step, int) else None


def build(task: Task, ctx: Context) -> LMRun:
    """Each stage agreed on by every rank: check and load model and tokenizer, tokenise (one process per node), open
    the token caches."""
    args, denv = ctx.config, ctx.denv
    data_root = Path(args.data_root)
    train_path = Path(args.train_file or data_root / "train.jsonl")
    val_path = Path(args.val_file or data_root / "val.jsonl")
    cache_dir = Path(args.token_cache) if args.token_cache else ctx.run_dir / "tokens"
    quiet_transformers()

    def load():
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
        for path in (train_path, val_path):
            if not path.is_file():
                raise TrainerError(f"data file {path} does not exist (JSONL with `text` or `prompt`/`completion`)")
        model = load_model(model_src, local)
        causal_attention(model)
        embeddings = model.get_input_embeddings().weight.shape[0]
        if embeddings < len(tokenizer):
            raise TrainerError(f"tokenizer {tok_src} has {len(tokenizer)} tokens, more than the {embeddings} "
                               f"embeddings of model {model_src}")
        return model, tokenizer, model_src, _tokenizer_key(tokenizer), embeddings

    model, tokenizer, source, key, vocab = D.agree(load)

    def caches() -> list[Path]:
        # present after the tokenising stage: only looks them up
        return [lm_data.build_cache(p, cache_dir, tokenizer, key, tokenizer.eos_token_id, vocab)
                for p in (train_path, val_path)]

    # one process per node tokenises (the others would only repeat it); the cache may be shared
    D.agree(lambda: caches() if denv.local_rank == 0 else None)
    train, val = D.agree(lambda: [lm_data.open_cache(h, args.seq_len) for h in caches()])
    return LMRun(args, denv.world_size, model, tokenizer, source, train, val, train_path, val_path, key)
