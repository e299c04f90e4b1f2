"""Real data: the digits example of docs/trainer.md, as documented, reaches >= 95 % held-out accuracy with 2 DDP
processes on CPU."""

from __future__ import annotations

import argparse
import shlex

import pytest
import torch

from trainer.tasks import digits
from trainer.tasks.models import DigitsCNN
from trainer_helpers import ROOT, metrics, run, tagged, torchrun_cmd

DOCUMENTED = "torchrun --nproc-per-node 2 trainer/train.py --task digits"


def documented_digits_args() -> list[str]:
    """The trainer's flags in the documented digits command (the first code block of docs/trainer.md)."""
    for line in (ROOT / "docs" / "trainer.md").read_text().splitlines():
        if line.startswith(DOCUMENTED):
            words = shlex.split(line.split("#")[0])
            return words[words.index("trainer/train.py") + 1:]
    raise AssertionError(f"docs/trainer.md no longer shows `{DOCUMENTED} ...`")


@pytest.mark.timeout(150)
def test_the_documented_digits_example_reaches_95_percent_on_held_out_images(tmp_path):
    args = documented_digits_args()
    assert args[:2] == ["--task", "digits"] and "--batch-size" not in args and "--epochs" not in args
    args[args.index("--out-dir") + 1] = str(tmp_path)
    res = run(torchrun_cmd(args + ["--run-id", "digits"], nproc=2), timeout=120)
    assert res.returncode == 0, res.output[-3000:]
    start = tagged(res.stdout, "DDP")[0]
    assert start["data"] == "sklearn digits (1438 train + 359 held-out 8x8 images)"
    epochs = tagged(res.stdout, "EPOCH")
    assert float(epochs[-1]["val_acc"]) >= 0.95, epochs[-1]
    done = tagged(res.stdout, "DONE")[0]
    assert float(done["best_val_acc"]) >= 0.95

    # Check the reported figure independently: evaluate best.pt here on the held-out split.
    data = digits.load(argparse.Namespace())
    model = DigitsCNN(data.num_classes)
    state = torch.load(tmp_path / "digits" / "best.pt", weights_only=True)
    model.load_state_dict(state["model"])
    model.eval()
    with torch.no_grad():
        correct = (model(data.val_x).argmax(dim=1) == data.val_y).sum().item()
    assert correct / len(data.val_y) >= 0.95
    best_event = min((e for e in metrics(tmp_path / "digits") if e["event"] == "epoch"), key=lambda e: e["val_loss"])
    # the all-reduced accuracy of the 2 ranks' halves equals the accuracy over the whole held-out set
    assert correct / len(data.val_y) == pytest.approx(best_event["val_acc"], abs=1e-12)
