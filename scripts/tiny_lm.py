#!/usr/bin/env python3
"""Build a real Hugging Face model folder and JSONL data on this machine, from the repository's own Markdown.

No hub access is needed: a byte-level BPE tokenizer (2,048 tokens) is trained with the `tokenizers` library
on the repository's Markdown, a small GPT-2 config (under 1M parameters) gets random weights, and both are
written with `save_pretrained`, so the trainer loads the folder with the very code that loads /models/<name>.
The Markdown's paragraphs become `train.jsonl` and `val.jsonl` (`{"text": ...}`, every 10th paragraph held out).

    .venv/bin/python scripts/tiny_lm.py     # what `make tiny-lm` runs: .cache/tiny-lm/models/tiny-lm and .cache/tiny-lm/data
    .venv/bin/python scripts/tiny_lm.py --out /tmp/lm --layers 1

The layout is that of the volumes: `models/` is what models-pvc holds at /models, `data/` what datasets-pvc holds
at /data (make simulate PVC="models-pvc=.cache/tiny-lm/models datasets-pvc=.cache/tiny-lm/data").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EOS = "<|endoftext|>"
VOCAB = 2048
VAL_EVERY = 10  # every 10th paragraph is held out for validation


def markdown_files(root: Path) -> list[Path]:
    """The repository's Markdown (README and docs/), sorted so that the build is reproducible."""
    files = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    return [f for f in files if f.is_file()]


def paragraphs(files: list[Path]) -> list[str]:
    out = []
    for f in files:
        for block in f.read_text(encoding="utf-8").split("\n\n"):
            block = block.strip()
            if len(block) >= 40:
                out.append(block)
    return out


def train_tokenizer(texts: list[str], vocab: int):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=vocab, min_frequency=2, special_tokens=[EOS], show_progress=False)
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=EOS, eos_token=EOS, unk_token=EOS,
                                   pad_token=EOS, model_max_length=256)


def build(out: Path, layers: int, width: int, heads: int, positions: int, seed: int, name: str = "tiny-lm") -> dict:
    """<out>/models/<name>/ (save_pretrained: config, weights, tokenizer) and <out>/data/{train,val}.jsonl."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    texts = paragraphs(markdown_files(ROOT))
    if len(texts) < 20:
        raise SystemExit(f"tiny_lm: only {len(texts)} Markdown paragraphs under {ROOT}; need at least 20")
    tok = train_tokenizer(texts, VOCAB)
    tok.model_max_length = positions
    config = GPT2Config(vocab_size=len(tok), n_positions=positions, n_embd=width, n_layer=layers, n_head=heads,
                        bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id,
                        tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config)
    params = sum(p.numel() for p in model.parameters())
    out.mkdir(parents=True, exist_ok=True)
    # written whole next to the target, then swapped in: a reader never sees half a folder
    tmp = Path(tempfile.mkdtemp(dir=out, prefix=".tmp-"))
    try:
        model.save_pretrained(tmp / "models" / name)
        tok.save_pretrained(tmp / "models" / name)
        for f in (tmp / "models" / name).iterdir():  # the weights come as a 0600 temporary file renamed
            f.chmod(0o644)
        data = tmp / "data"
        data.mkdir()
        with (data / "train.jsonl").open("w") as tr, (data / "val.jsonl").open("w") as va:
            for i, t in enumerate(texts):
                (va if i % VAL_EVERY == VAL_EVERY - 1 else tr).write(json.dumps({"text": t}) + "\n")
        for part in ("models", "data"):
            if (out / part).exists():
                shutil.rmtree(out / part)
            os.replace(tmp / part, out / part)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"model": str(out / "models" / name), "data": str(out / "data"), "params": params, "vocab": len(tok),
            "layers": layers, "width": width, "positions": positions, "paragraphs": len(texts)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / ".cache" / "tiny-lm", help="writes <out>/model and <out>/data")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=64, help="hidden size")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--positions", type=int, default=256, help="the model's maximum sequence length")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    info = build(args.out, args.layers, args.width, args.heads, args.positions, args.seed)
    print(f"tiny-lm: {info['model']} (GPT-2, {info['params']:,} parameters, {info['layers']} layers x "
          f"{info['width']}, {info['vocab']:,}-token byte-level BPE, {info['positions']} positions); "
          f"{info['data']}/train.jsonl + val.jsonl from {info['paragraphs']} Markdown paragraphs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
