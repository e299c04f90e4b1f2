"""Flag types and environment defaults shared by the trainer's parser and the tasks that add flags of their own."""
from __future__ import annotations

import argparse
import os
from typing import Any

from trainer import contract


def env(name: str, default: Any) -> Any:
    """Environment default for a flag; argparse converts string defaults with the flag's type. The variable must be
    declared in trainer/contract.py, which the validator checks manifests against."""
    if name not in contract.ENV:
        raise KeyError(f"{name} is read by the trainer but not declared in trainer/contract.py")
    return os.environ.get(name, default)


def boolean(text: str) -> bool:
    low = str(text).strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def positive(kind):
    def check(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    check.__name__ = f"positive {kind.__name__}"
    return check


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value
