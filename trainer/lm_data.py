"""JSONL text for the causal-LM task: tokenised once into a token cache on disk, packed into blocks, read per rank.

Each line of a JSONL file is an object with a `text` field (the loss on every token) or `prompt` and
`completion` fields (the loss on the completion only). Documents are tokenised in order, each followed by
the end-of-sequence token, concatenated, and cut into blocks of `seq_len` tokens (the tail that does not
fill a block is dropped). The cache holds two flat arrays, the token ids and a 0/1 "counts in the loss"
mask, as raw files beside a JSON header; every rank maps them (np.memmap) and reads only the blocks of its
own shard, one batch at a time, so no rank holds the data set in memory or on its device.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from trainer.errors import TrainerError

CACHE_FORMAT = 1
CHUNK_LINES = 2048  # lines tokenised per batch call: bounded memory on any file size
IGNORE = -100  # label of a token left out of the loss (Hugging Face's convention)


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def _records(path: Path) -> Iterator[tuple[int, str, str | None]]:
    """(line number, text or prompt, completion or None) for each non-blank line; one-line errors otherwise."""
    try:
        f = path.open("r", encoding="utf-8")
    except OSError as e:
        raise TrainerError(f"cannot read {path}: {e.strerror or e}") from None
    with f:
        try:
            for no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as e:
                    raise TrainerError(f"{path}:{no}: not JSON ({str(e).split(':')[0]})") from None
                if not isinstance(obj, dict):
                    raise TrainerError(f"{path}:{no}: expected a JSON object with `text` or `prompt`/`completion`")
                if "text" in obj:
                    if not isinstance(obj["text"], str):
                        raise TrainerError(f"{path}:{no}: field `text` must be a string")
                    yield no, obj["text"], None
                elif "prompt" in obj and "completion" in obj:
                    if not (isinstance(obj["prompt"], str) and isinstance(obj["completion"], str)):
                        raise TrainerError(f"{path}:{no}: fields `prompt` and `completion` must be strings")
                    yield no, obj["prompt"], obj["completion"]
                else:
                    raise TrainerError(f"{path}:{no}: no `text` field and no `prompt`/`completion` pair "
                                       f"(found {', '.join(sorted(obj)) or 'no fields'})")
        except UnicodeDecodeError as e:
            raise TrainerError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def _encode(tokenizer, texts: list[str]) -> list[list[int]]:
    return tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []


def tokenise(path: Path, tokenizer, eos_id: int, vocab_size: int, out_ids, out_mask) -> tuple[int, int]:
    """Append the file's tokens and loss mask to the open binary files; returns (documents, tokens)."""
    docs = tokens = 0
    dtype = np.uint32

    def flush(chunk: list[tuple[int, str, str | None]]) -> None:
        nonlocal docs, tokens
        first = _encode(tokenizer, [c[1] for c in chunk])
        done = [c for c in chunk if c[2] is not None]
        second = iter(_encode(tokenizer, [c[2] for c in done if c[2] is not None]))  # (done: all of them)
        for (no, _, completion), a in zip(chunk, first):
            b = next(second) if completion is not None else []
            ids = np.asarray([*a, *b, eos_id], dtype=np.int64)
            if ids.max(initial=0) >= vocab_size:
                raise TrainerError(f"{path}:{no}: the tokenizer produced id {int(ids.max())}, beyond the model's "
                                   f"vocabulary of {vocab_size}: tokenizer and model do not match")
            mask = np.ones(len(ids), dtype=np.uint8)
            if completion is not None:
                mask[:len(a)] = 0  # the prompt conditions the completion; it is not learnt
            out_ids.write(ids.astype(dtype).tobytes())
            out_mask.write(mask.tobytes())
            docs += 1
            tokens += len(ids)

    chunk: list[tuple[int, str, str | None]] = []
    for rec in _records(path):
        chunk.append(rec)
        if len(chunk) >= CHUNK_LINES:
            flush(chunk)
            chunk = []
    flush(chunk)
    return docs, tokens


@dataclass
class TokenFile:
    """Packed blocks of one JSONL file, memory-mapped."""

    path: Path  # the JSONL file it came from
    ids: np.ndarray  # flat uint32
    mask: np.ndarray  # flat uint8
    seq_len: int
    docs: int
    digest: str

    @property
    def blocks(self) -> int:
        return self.ids.shape[0] // self.seq_len

    @property
    def tokens(self) -> int:
        return self.ids.shape[0]

    def batch(self, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """input_ids and labels (int64, CPU) of the blocks `indices`; masked tokens get label -100."""
        idx = np.sort(indices.numpy())  # ascending reads from the map; the order inside a batch is irrelevant
        starts = idx * self.seq_len
        rows = starts[:, None] + np.arange(self.seq_len)[None, :]
        ids = torch.from_numpy(self.ids[rows].astype(np.int64))
        mask = torch.from_numpy(self.mask[rows].astype(bool))
        return ids, torch.where(mask, ids, torch.full_like(ids, IGNORE))


def build_cache(path: Path, cache_dir: Path, tokenizer, tokenizer_key: str, eos_id: int, vocab_size: int) -> Path:
    """Tokenise `path` into `cache_dir` unless a cache of the same file and tokenizer is there; returns the
    header's path. Files are written under temporary names and renamed, so a reader never sees half a cache."""
    if not path.is_file():
        raise TrainerError(f"data file {path} does not exist (JSONL with `text` or `prompt`/`completion` per line)")
    digest = file_digest(path)
    key = hashlib.sha256(f"{CACHE_FORMAT}:{digest}:{tokenizer_key}".encode()).hexdigest()[:16]
    header = cache_dir / f"{path.stem}-{key}.json"
    if header.exists():
        return header
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd_i, tmp_i = tempfile.mkstemp(dir=cache_dir, prefix=".tmp-ids.")
        fd_m, tmp_m = tempfile.mkstemp(dir=cache_dir, prefix=".tmp-mask.")
    except OSError as e:
        raise TrainerError(f"token cache {cache_dir} is not writable: {e.strerror or e}") from None
    try:
        with os.fdopen(fd_i, "wb") as fi, os.fdopen(fd_m, "wb") as fm:
            docs, tokens = tokenise(path, tokenizer, eos_id, vocab_size, fi, fm)
        if tokens == 0:
            raise TrainerError(f"{path} has no documents")
        ids_name, mask_name = f"{path.stem}-{key}.ids", f"{path.stem}-{key}.mask"
        os.replace(tmp_i, cache_dir / ids_name)
        os.replace(tmp_m, cache_dir / mask_name)
        meta = {"format": CACHE_FORMAT, "source": str(path), "sha256_16": digest, "tokenizer": tokenizer_key,
                "docs": docs, "tokens": tokens, "ids": ids_name, "mask": mask_name, "dtype": "uint32"}
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".tmp-header.")
        with os.fdopen(fd, "w") as f:
            json.dump(meta, f)
        os.replace(tmp, header)
    except OSError as e:
        raise TrainerError(f"cannot write the token cache in {cache_dir}: {e.strerror or e}") from None
    finally:
        for t in (tmp_i, tmp_m):
            Path(t).unlink(missing_ok=True)
    return header


def open_cache(header: Path, seq_len: int) -> TokenFile:
    meta: dict[str, Any] = json.loads(header.read_text())
    folder = header.parent
    ids = np.memmap(folder / meta["ids"], dtype=np.uint32, mode="r")
    mask = np.memmap(folder / meta["mask"], dtype=np.uint8, mode="r")
    tf = TokenFile(Path(meta["source"]), ids, mask, seq_len, int(meta["docs"]), meta["sha256_16"])
    if tf.blocks == 0:
        raise TrainerError(f"{tf.path} has {tf.tokens} tokens: fewer than one block of --seq-len {seq_len}")
    return tf
