"""The causal-lm task's flags (torch-free: the command line lists them without importing the task)."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from trainer.flags import boolean, non_negative_int, positive

SCHEDULES = ("cosine", "constant")
STRATEGIES = ("ddp", "fsdp")


def add_arguments(p: argparse.ArgumentParser, env: Callable[[str, Any], Any]) -> None:
    g = p.add_argument_group("causal-lm task")
    g.add_argument("--model-local-dir", default=env("MODEL_LOCAL_DIR", None),
                   help="[MODEL_LOCAL_DIR] folder with config.json and the weights (save_pretrained's layout)")
    g.add_argument("--tokenizer-local-dir", default=env("TOKENIZER_LOCAL_DIR", None),
                   help="[TOKENIZER_LOCAL_DIR] tokenizer folder; None: --model-local-dir")
    g.add_argument("--model-id", default=env("MODEL_ID", None),
                   help="[MODEL_ID] hub id, used only without --model-local-dir and when online "
                        "(HUGGINGFACE_HUB_TOKEN for gated models)")
    g.add_argument("--local-files-only", type=boolean, nargs="?", const=True, default=env("LOCAL_FILES_ONLY", "false"),
                   help="[LOCAL_FILES_ONLY] never contact the hub (also when TRANSFORMERS_OFFLINE or HF_HUB_OFFLINE is 1)")
    g.add_argument("--train-file", default=env("TRAIN_FILE", None),
                   help="[TRAIN_FILE] JSONL, `text` or `prompt`/`completion` per line; None: <data-root>/train.jsonl")
    g.add_argument("--val-file", default=env("VAL_FILE", None),
                   help="[VAL_FILE] validation JSONL; None: <data-root>/val.jsonl")
    g.add_argument("--seq-len", type=positive(int), default=env("SEQ_LEN", "512"),
                   help="[SEQ_LEN] tokens per packed block (at most the model's maximum)")
    g.add_argument("--grad-accum", type=positive(int), default=env("GRAD_ACCUM", "1"),
                   help="[GRAD_ACCUM] micro-batches of --batch-size blocks per optimiser step")
    g.add_argument("--clip-grad", type=float, default=env("CLIP_GRAD", "1.0"),
                   help="[CLIP_GRAD] gradient norm clipping (0: off)")
    g.add_argument("--warmup-steps", type=non_negative_int, default=env("WARMUP_STEPS", None),
                   help="[WARMUP_STEPS] linear warm-up; None: 5 %% of the run's steps")
    g.add_argument("--lr-schedule", choices=SCHEDULES, default=env("LR_SCHEDULE", "cosine"),
                   help="[LR_SCHEDULE] after the warm-up: cosine decay to --min-lr-ratio x --lr, or constant")
    g.add_argument("--min-lr-ratio", type=float, default=env("MIN_LR_RATIO", "0.1"),
                   help="[MIN_LR_RATIO] the cosine schedule's final learning rate, as a fraction of --lr")
    g.add_argument("--weight-decay", type=float, default=env("WEIGHT_DECAY", "0.0"),
                   help="[WEIGHT_DECAY] AdamW weight decay")
    g.add_argument("--strategy", choices=STRATEGIES, default=env("STRATEGY", "ddp"),
                   help="[STRATEGY] ddp: a model replica per rank; fsdp: FSDP2 fully_shard, parameters, "
                        "gradients and optimiser state sharded over the ranks")
    g.add_argument("--token-cache", default=env("TOKEN_CACHE", None),
                   help="[TOKEN_CACHE] folder of the tokenised data; None: <out-dir>/<run-id>/tokens")
    g.add_argument("--save-epochs", type=boolean, nargs="?", const=True, default=env("SAVE_EPOCHS", "true"),
                   help="[SAVE_EPOCHS] write <run>/epoch-NNNN/ with save_pretrained after each checkpointed epoch")
