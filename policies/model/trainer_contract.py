"""The trainer's contract (trainer/contract.py: every environment variable /app/trainer/train.py reads and the values
it accepts), read by the validation layer as the file it is, not as a module of the trainer package: the validator
imports nothing of the trainer, and an installed ddp-check ships the one file as data (pyproject.toml), so the
contract is declared once, in trainer/, for both. The file imports the standard library only."""
from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from ..render.paths import DATA

PATH = DATA / "trainer" / "contract.py"
_NAME = "policies._trainer_contract"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(_NAME, PATH)
    if spec is None or spec.loader is None:  # pragma: no cover - the file ships with the checkout and the wheel
        raise ImportError(f"{PATH}: the trainer's contract cannot be read")
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


contract = _load()
