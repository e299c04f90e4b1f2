"""The causal-LM task's pieces without processes: JSONL reading and packing, the learning-rate schedule, flags."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from tests.trainer_helpers import ROOT
from trainer import lm_data
from trainer.errors import TrainerError
from trainer.tasks.causal_lm import check_model_dir, lr_at
from trainer.cli import parse_args

sys.path.insert(0, str(ROOT / "scripts"))
import tiny_lm  # noqa: E402

TEXTS = [p for p in tiny_lm.paragraphs(tiny_lm.markdown_files(ROOT))][:200]


@pytest.fixture(scope="module")
def tok():
    return tiny_lm.train_tokenizer(TEXTS, 512)


def cache(tmp_path: Path, tok, lines: list[str], seq_len: int = 8) -> lm_data.TokenFile:
    src = tmp_path / "d.jsonl"
    src.write_text("".join(line + "\n" for line in lines))
    header = lm_data.build_cache(src, tmp_path / "cache", tok, "k", tok.eos_token_id, len(tok))
    return lm_data.open_cache(header, seq_len)


def test_text_documents_are_packed_with_eos_and_every_token_in_the_loss(tmp_path, tok):
    lines = [json.dumps({"text": t}) for t in TEXTS[:20]]
    tf = cache(tmp_path, tok, lines)
    expected = sum(len(tok(t, add_special_tokens=False)["input_ids"]) + 1 for t in TEXTS[:20])
    assert tf.tokens == expected and tf.docs == 20 and tf.blocks == expected // 8
    first = tok(TEXTS[0], add_special_tokens=False)["input_ids"]
    x, y = tf.batch(torch.tensor([0]))
    assert x[0].tolist() == (first + [tok.eos_token_id])[:8]
    assert torch.equal(x, y)


def test_prompt_tokens_are_left_out_of_the_loss(tmp_path, tok):
    tf = cache(tmp_path, tok, [json.dumps({"prompt": "Question: what is DDP?", "completion": " Data parallel."})], 4)
    n_prompt = len(tok("Question: what is DDP?", add_special_tokens=False)["input_ids"])
    ids = torch.from_numpy(tf.ids.astype("int64"))
    mask = torch.from_numpy(tf.mask.astype(bool))
    assert not mask[:n_prompt].any() and mask[n_prompt:].all() and ids[-1] == tok.eos_token_id
    x, y = tf.batch(torch.arange(tf.blocks))
    assert (y.flatten()[:n_prompt] == lm_data.IGNORE).all()


@pytest.mark.parametrize("line,message", [
    ("{not json", "d.jsonl:2: not JSON"),
    ("[1, 2]", "d.jsonl:2: expected a JSON object"),
    ('{"prompt": "p"}', "d.jsonl:2: no `text` field and no `prompt`/`completion` pair (found prompt)"),
    ('{"text": 3}', "d.jsonl:2: field `text` must be a string"),
])
def test_a_bad_line_names_file_and_line(tmp_path, tok, line, message):
    with pytest.raises(TrainerError, match=None) as e:
        cache(tmp_path, tok, ['{"text": "fine"}', line])
    assert message in str(e.value)
    assert not list((tmp_path / "cache").glob("*.json"))  # nothing half-written left for a reader


def test_ids_beyond_the_model_vocabulary_are_refused(tmp_path, tok):
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"text": TEXTS[0]}) + "\n")
    with pytest.raises(TrainerError, match="beyond the model's vocabulary of 10: tokenizer and model do not match"):
        lm_data.build_cache(src, tmp_path / "cache", tok, "k", tok.eos_token_id, 10)


def test_fewer_tokens_than_one_block(tmp_path, tok):
    with pytest.raises(TrainerError, match="fewer than one block of --seq-len 4096"):
        cache(tmp_path, tok, ['{"text": "short"}'], 4096)


def test_warmup_then_cosine_to_the_floor():
    lrs = [lr_at(s, 100, 10, 1.0, "cosine", 0.1) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))
    assert lrs[-1] == pytest.approx(0.1, abs=1e-3)
    assert lr_at(55, 100, 10, 1.0, "cosine", 0.0) == pytest.approx(0.5)
    assert lr_at(50, 100, 0, 2.0, "constant", 0.1) == 2.0
    assert not math.isnan(lr_at(5, 5, 10, 1.0, "cosine", 0.1))


def test_model_folder_checks(tmp_path):
    with pytest.raises(TrainerError, match="no such folder"):
        check_model_dir(tmp_path / "absent")
    (tmp_path / "m").mkdir()
    with pytest.raises(TrainerError, match="no config.json"):
        check_model_dir(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text("{}")
    with pytest.raises(TrainerError, match="no weights"):
        check_model_dir(tmp_path / "m")
    (tmp_path / "m" / "model.safetensors").write_bytes(b"")
    check_model_dir(tmp_path / "m")


def test_task_flags_and_defaults(monkeypatch):
    for k in ("BATCH_SIZE", "LR", "STRATEGY", "SEQ_LEN"):
        monkeypatch.delenv(k, raising=False)
    a = parse_args(["--task", "causal-lm"])
    assert (a.batch_size, a.lr, a.strategy, a.seq_len, a.grad_accum, a.lr_schedule) == (8, 5e-5, "ddp", 512, 1, "cosine")
    monkeypatch.setenv("STRATEGY", "fsdp")
    assert parse_args(["--task", "causal-lm"]).strategy == "fsdp"
    monkeypatch.setenv("STRATEGY", "zero3")
    with pytest.raises(SystemExit):
        parse_args(["--task", "causal-lm"])
