"""The shape of policies/: controller knowledge lives in policies/launchers/ alone, no module imports itself back
through another, and the rule package's __init__ is the registry and nothing else."""
from __future__ import annotations

import ast
from pathlib import Path

from policies import launchers

POLICIES = Path(__file__).resolve().parent.parent / "policies"
# Literal kind names that are another tool's table, not controller knowledge: Argo CD's order of kinds inside a
# sync wave (gitops-engine pkg/sync/sync_tasks.go), which lists StatefulSet and Job among the built-in kinds.
ALLOWED = {("rules/argo007_sync_waves.py", "KIND_ORDER")}


def modules() -> list[Path]:
    return sorted(p for p in POLICIES.rglob("*.py"))


def module_name(path: Path) -> str:
    rel = path.relative_to(POLICIES.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(path: Path) -> set[str]:
    """Modules of this package that `path` imports, at any depth (function-level imports too), leaving out
    imports under `if TYPE_CHECKING:`."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    tree = ast.parse(path.read_text())
    skip = {id(n) for node in ast.walk(tree) if _type_checking(node) for n in ast.walk(node)}
    known = {module_name(p) for p in modules()}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")
            base = base[:len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in known else target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("policies"))
    return {m for m in out if m in known and m != name}


def test_no_import_cycles():
    graph = {module_name(p): imports(p) for p in modules()}
    cycles = []

    def visit(node: str, stack: list[str], done: set[str]) -> None:
        for nxt in sorted(graph.get(nxt_ := node, set())):
            if nxt in stack:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in done:
                visit(nxt, stack + [nxt], done)
        done.add(nxt_)

    done: set[str] = set()
    for start in sorted(graph):
        if start not in done:
            visit(start, [start], done)
    # A package's __init__ importing its own submodules (the launcher registry) is how a package is built.
    real = [c for c in cycles if not all(part.startswith(c.split(" -> ")[0]) for part in c.split(" -> "))]
    assert not real, "import cycles:\n" + "\n".join(sorted(set(real)))


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def launcher_words() -> set[str]:
    words = {launcher.id for launcher in launchers.LAUNCHERS}
    words |= {kind for launcher in launchers.LAUNCHERS for _, kind in launcher.kinds}
    return words


def test_no_kind_or_launcher_string_outside_the_launcher_modules():
    words = launcher_words()
    assert {"PyTorchJob", "TrainJob", "JobSet", "Job", "StatefulSet", "pytorchjob", "indexed-job"} <= words
    found = []
    for path in modules():
        rel = str(path.relative_to(POLICIES))
        if rel.startswith("launchers/"):
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        allowed_nodes = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and (rel, t.id) in ALLOWED
                                                    for t in node.targets):
                allowed_nodes |= {id(n) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                    and id(node) not in allowed_nodes and node.value in words:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not found, "controller knowledge outside policies/launchers/:\n" + "\n".join(found)


def test_the_check_fires_on_a_kind_string(tmp_path):
    """The scan above would see a consumer that branches on a kind (so it can fail)."""
    tree = ast.parse('def f(m):\n    """PyTorchJob in a docstring is documentation."""\n    return m.kind == "PyTorchJob"\n')
    docs = _docstrings(tree)
    hits = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs and n.value in launcher_words()]
    assert hits == ["PyTorchJob"]


def test_rules_init_is_the_registry_alone():
    tree = ast.parse((POLICIES / "rules" / "__init__.py").read_text())
    functions = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert functions == {"Rule", "_load"}, functions


def test_every_launcher_implements_the_protocol():
    for launcher in launchers.LAUNCHERS:
        assert launcher.id and launcher.title and launcher.kinds, launcher
        assert launchers.REGISTRY[launcher.kinds[0]] is launcher
    assert set(launchers.BY_ID) == {"pytorchjob", "trainjob", "jobset", "indexed-job", "statefulset", "volcano-job",
                                    "leaderworkerset", "katib-experiment", "appwrapper",
                                    "trainingruntime"}
