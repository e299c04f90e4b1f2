"""The slow marks in conftest.py name modules and tests by name: a renamed test would slip back into `make test-fast`
unnoticed, and a stale name would mark nothing. Every name listed must exist."""
import ast
from pathlib import Path

from conftest import FAST_TRAINER_MODULES, SLOW_MODULES, SLOW_TESTS

TESTS = Path(__file__).resolve().parent


def _functions(module: str) -> set[str]:
    tree = ast.parse((TESTS / f"{module}.py").read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_slow_name_exists():
    for module in SLOW_MODULES | FAST_TRAINER_MODULES | set(SLOW_TESTS):
        assert (TESTS / f"{module}.py").is_file(), f"conftest.py names {module}, which is not a test module"
    for module, names in SLOW_TESTS.items():
        missing = names - _functions(module)
        assert not missing, f"conftest.py marks {sorted(missing)} in {module} slow, but no such test exists"
