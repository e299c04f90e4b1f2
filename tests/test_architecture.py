"""The shape of policies/ and trainer/: controller knowledge lives in policies/launchers/ alone, no module of either
package imports itself back through another (type-only imports included), nothing in policies/ imports the trainer or
torch, the rule package's __init__ is the registry and nothing else, and the trainer's command line and task registry
load without torch."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from policies import launchers
from policies.rules import NOT_RULES

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "policies"
TRAINER = ROOT / "trainer"
# Literal kind names that are another tool's table, not controller knowledge: Argo CD's order of kinds inside a
# sync wave (gitops-engine pkg/sync/sync_tasks.go), which lists StatefulSet and Job among the built-in kinds.
ALLOWED = {("rules/argo007_sync_waves.py", "KIND_ORDER")}


def modules(package: Path = POLICIES) -> list[Path]:
    return sorted(p for p in package.rglob("*.py"))


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path, package: Path = POLICIES) -> set[str]:
    """Modules of `package` that `path` imports, at any depth (function-level and type-only imports too)."""
    name = module_name(path)
    parent = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    tree = ast.parse(path.read_text())
    known = {module_name(p) for p in modules(package)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = parent.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in known else target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith(package.name))
    return {m for m in out if m in known and m != name}


def import_cycles(package: Path) -> list[str]:
    """Import circles in `package`, type-only and function-level imports included."""
    graph = {module_name(p): imports(p, package) for p in modules(package)}
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
    return sorted({c for c in cycles if not all(part.startswith(c.split(" -> ")[0]) for part in c.split(" -> "))})


def test_no_import_cycles():
    real = import_cycles(POLICIES)
    assert not real, "import cycles:\n" + "\n".join(real)


def test_no_import_cycles_in_the_trainer():
    real = import_cycles(TRAINER)
    assert not real, "import cycles:\n" + "\n".join(real)


def test_the_cycle_check_sees_a_function_level_import(tmp_path):
    """The trainer's circle telemetry -> mlflow_log -> telemetry ran through an import inside a function: the graph
    must see one (so the check above can fail)."""
    pkg = tmp_path / "trainer"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from trainer import b\n")
    (pkg / "b.py").write_text("from trainer.a import f\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert import_cycles(pkg) == ["trainer.a -> trainer.b -> trainer.a"]
    finally:
        ROOT = saved


def test_the_trainers_command_line_and_registry_load_without_torch():
    """The validation layer reads a manifest's trainer arguments with the trainer's own parser (trainer/cli.py): that
    must not import torch, nor a task module."""
    code = ("import sys; import trainer.cli, trainer.tasks, trainer.stop; "
            "trainer.cli.parse_args(['--task', 'causal-lm'], environ={}); "
            "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'trainer.tasks.'))"
            " and m != 'trainer.tasks.causal_lm_flags'); print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


_MAIN_WITHOUT_TORCH = """
import json, sys
from trainer import train
try:
    train.main(sys.argv[1:])
    code = 'returned'
except SystemExit as e:
    code = e.code
print(json.dumps({'code': code, 'torch': sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))}))
"""


def test_train_help_and_refused_arguments_end_before_torch_is_imported():
    """`python -m trainer.train --help` took 3 s: train.py imported torch.distributed before reading its arguments.
    --help (exit 0) and a refused argument (exit 2, argparse's or the parser's own checks) end before torch is
    imported, through train.main and through the entry point the pods start (the file, under -X importtime)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TASK", "EPOCHS", "RUN_ID")}
    for argv, want in ((["--help"], 0), (["--epochs", "0"], 2), (["--task", "nope"], 2), (["--run-id", ".."], 2)):
        res = subprocess.run([sys.executable, "-c", _MAIN_WITHOUT_TORCH, *argv], cwd=ROOT, capture_output=True,
                             text=True, timeout=60, env=env)
        got = json.loads(res.stdout.strip().splitlines()[-1])
        assert got == {"code": want, "torch": []}, (argv, got, res.stderr[-2000:])
    for argv, want in ((["--help"], 0), (["--batch-size", "-1"], 2)):
        res = subprocess.run([sys.executable, "-X", "importtime", str(TRAINER / "train.py"), *argv], cwd="/",
                             capture_output=True, text=True, timeout=60, env=env)
        assert res.returncode == want, res.stderr[-2000:]
        imported = [line.rsplit("|", 1)[-1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")]
        assert "trainer.cli" in imported and "argparse" in imported, imported
        assert not [m for m in imported if m == "torch" or m.startswith("torch.")], argv
    assert "usage: train.py" in subprocess.run([sys.executable, "-m", "trainer.train", "--help"], cwd=ROOT,
                                               capture_output=True, text=True, timeout=60, env=env).stdout


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
        assert all(launchers.REGISTRY[gk] is launcher for gk in launcher.kinds), launcher
        assert launchers.BY_ID[launcher.id] is launcher
    assert len(launchers.BY_ID) == len(launchers.LAUNCHERS), "two launchers share an id"
    assert len(launchers.REGISTRY) == sum(len(launcher.kinds) for launcher in launchers.LAUNCHERS), \
        "two launchers claim one kind"


def test_every_launcher_module_is_in_the_registry():
    """The registry is what every consumer lists launchers from: each Launcher a module of policies/launchers/
    defines is in it (discovered, not written in a list)."""
    import importlib
    import pkgutil

    from policies.launchers.base import Launcher

    defined = set()
    for info in pkgutil.iter_modules(launchers.__path__):
        module = importlib.import_module(f"policies.launchers.{info.name}")
        defined |= {id(v) for v in vars(module).values() if isinstance(v, Launcher)}
    assert defined == {id(launcher) for launcher in launchers.LAUNCHERS}


def test_policies_import_neither_the_trainer_nor_torch():
    """The validation layer runs without torch: every module of policies/ imported, none of them pulls in the
    trainer or torch (the simulator asks the trainer in a process of its own)."""
    code = ("import importlib, pkgutil, sys, policies\n"
            "for m in pkgutil.walk_packages(policies.__path__, 'policies.'):\n"
            "    if not m.name.endswith('__main__'):\n"
            "        importlib.import_module(m.name)\n"
            "print(sorted(n for n in sys.modules if n.split('.')[0] in ('torch', 'trainer')))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=POLICIES.parent, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    found = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{path.relative_to(POLICIES)}: {n}" for n in names if n.split(".")[0] in ("torch", "trainer")]
    assert not found, found


def test_the_import_check_sees_a_cycle_through_a_type_only_import(tmp_path, monkeypatch):
    """An import under `if TYPE_CHECKING:` counts (so the cycle check above can fail on one)."""
    pkg = tmp_path / "policies"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n")
    (pkg / "b.py").write_text("from .a import A\n")
    monkeypatch.setattr(sys.modules[__name__], "POLICIES", pkg)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert imports(pkg / "a.py", pkg) == {"policies.b"} and imports(pkg / "b.py", pkg) == {"policies.a"}


# About 500 lines: past this a module states at its top (its docstring) why it stays one file.
LONG_MODULE = 525


def test_a_long_module_says_why_it_is_one():
    long = []
    for path in modules():
        text = path.read_text()
        if text.count("\n") > LONG_MODULE and "one file because" not in (ast.get_docstring(ast.parse(text)) or ""):
            long.append(f"{path.relative_to(POLICIES)}: {text.count(chr(10))} lines")
    assert not long, "split these, or say at their top why they are one file:\n" + "\n".join(long)


def rule_imports_outside_rules(package: Path = POLICIES) -> list[str]:
    """Modules outside policies/rules/ that import one rule module (the registry, policies.rules, is how rules are
    found; a rule module itself is a rule's, not a library)."""
    found = []
    for path in modules(package):
        if "rules" in path.relative_to(package).parts[:-1]:
            continue
        found += [f"{path.relative_to(package)}: {m}" for m in sorted(imports(path, package))
                  if m.startswith("policies.rules.") and m.rsplit(".", 1)[1] not in NOT_RULES]
    return found


def test_no_module_outside_rules_imports_a_rule():
    """Rules are pure: what the model works out (a world's pod-loss survival, policies/model/recovery.py) is the model's,
    and the engine, plan and simulate read it without running a rule (issue 34 item 2)."""
    assert not rule_imports_outside_rules(), rule_imports_outside_rules()


def test_the_rule_import_check_sees_one(tmp_path, monkeypatch):
    pkg = tmp_path / "policies"
    (pkg / "rules").mkdir(parents=True)
    for name in ("__init__.py", "engine.py", "rules/__init__.py", "rules/restart007_x.py"):
        (pkg / name).write_text("")
    (pkg / "engine.py").write_text("from .rules.restart007_x import survival\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)  # module_name reads the module's ROOT
    assert rule_imports_outside_rules(pkg) == ["engine.py: policies.rules.restart007_x"]


def attributes_set_outside_init(source: str, cls: str) -> tuple[set[str], list[str]]:
    """Class `cls` of `source`: the attributes its __init__ assigns (self.X = / self.X: T = / self.X += ..., tuple
    targets too), and `method: X` for every attribute another method assigns that __init__ does not, or that the
    class body declares without a value (an attribute that exists only once some method has run)."""

    def targets(node: ast.AST) -> list[str]:
        names = []
        for n in ast.walk(node):
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                    for e in ast.walk(t):
                        if (isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self"
                                and isinstance(e.ctx, ast.Store)):
                            names.append(e.attr)
        return names

    (klass,) = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef) and n.name == cls]
    methods = [n for n in klass.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    (init,) = [m for m in methods if m.name == "__init__"]
    in_init = set(targets(init))
    late = [f"{m.name}: {a}" for m in methods if m is not init for a in targets(m) if a not in in_init]
    late += [f"class body: {n.target.id}" for n in klass.body
             if isinstance(n, ast.AnnAssign) and n.value is None and isinstance(n.target, ast.Name)]
    return in_init, late


def test_every_attribute_of_the_trainer_is_set_in_its_init():
    """The Trainer's state is what its __init__ says (issue 34 item 5): no attribute first appears in run() or in a
    method of the loop. What run() builds is None until then (trainer/loop.py `Built`)."""
    in_init, late = attributes_set_outside_init((TRAINER / "loop.py").read_text(), "Trainer")
    assert not late, late
    assert {"config", "store", "built", "identity", "steps_per_epoch", "val_idx", "interval_step"} <= in_init


def test_the_trainer_attribute_check_sees_a_late_one():
    source = ("class Trainer:\n    later: int\n    def __init__(self):\n        self.a, self.b = 1, 2\n"
              "    def run(self):\n        self.a = 3\n        self.c: int = 4\n        (self.b, self.d) = (5, 6)\n"
              "        self.e += 1\n        x = self.f\n")
    in_init, late = attributes_set_outside_init(source, "Trainer")
    assert in_init == {"a", "b"} and late == ["run: c", "run: d", "run: e", "class body: later"]


def test_the_trainer_reads_its_configuration_never_a_namespace():
    """The run's flags become a RunConfig in one place, trainer/cli.py (trainer/config.py builds it from argparse's
    Namespace); no other module of the training side takes or passes a Namespace."""
    allowed = {"cli.py", "config.py", "report.py", "launch.py"}  # report and torchrun's launcher: CLIs of their own
    found = [str(p.relative_to(TRAINER)) for p in modules(TRAINER)
             if p.name not in allowed and "Namespace" in p.read_text()]
    assert not found, found


# Writers that replace a file by renaming a temporary one over it, outside the transaction: neither edits the user's
# files (a cache entry, a compiled helper library), and a half-written one is never read.
RENAMES_ALLOWED = {"render/render.py": "the render cache (policies/render/render.py _write_atomic)",
                   "simulate/host.py": "the simulator's compiled serial-port library under .sim/"}


def commit_callers(package: Path = POLICIES) -> list[str]:
    """Modules of `package` that call transaction.commit (or import it by name), policies/edit/pipeline.py aside."""
    found = []
    for path in modules(package):
        name = str(path.relative_to(package))
        if name in ("edit/pipeline.py", "render/transaction.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr == "commit" and isinstance(node.value, ast.Name)
                    and node.value.id == "transaction"):
                found.append(f"{name}:{node.lineno}: transaction.commit")
            elif (isinstance(node, ast.ImportFrom) and (node.module or "").endswith("transaction")
                  and any(a.name == "commit" for a in node.names)):
                found.append(f"{name}:{node.lineno}: imports commit")
    return found


def hand_written_renames(package: Path = POLICIES) -> list[str]:
    """Calls of os.replace, os.rename and tempfile.mkstemp / NamedTemporaryFile outside policies/render/transaction.py
    (and the writers RENAMES_ALLOWED names): a file of the user's replaced by hand, outside the journal."""
    found = []
    for path in modules(package):
        name = str(path.relative_to(package))
        if name == "render/transaction.py" or name in RENAMES_ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and (node.value.id, node.attr) in {("os", "replace"), ("os", "rename"), ("tempfile", "mkstemp"),
                                                       ("tempfile", "NamedTemporaryFile")}):
                found.append(f"{name}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_only_the_edit_pipeline_commits():
    """Every edit command (make scale, new-run, recover, init, new-env, remove-env, the image pinning) writes through
    the one pipeline, policies/edit/pipeline.py, so the journal, recovery and held signals hold for all alike (issue 34 item
    3, issue 32 item 5); nothing else replaces a file by hand."""
    assert not commit_callers(), commit_callers()
    assert not hand_written_renames(), hand_written_renames()


def test_the_pipeline_checks_see_a_second_writer(tmp_path, monkeypatch):
    pkg = tmp_path / "policies"
    pkg.mkdir()
    (pkg / "edit").mkdir()
    (pkg / "edit" / "pipeline.py").write_text("from ..render import transaction\ntransaction.commit(1, 2)\n")
    (pkg / "scale.py").write_text("from . import transaction\ntransaction.commit(1, 2)\n")
    (pkg / "pin.py").write_text("from .transaction import commit\n")
    (pkg / "init.py").write_text("import os\nos.replace('a', 'b')\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert commit_callers(pkg) == ["pin.py:1: imports commit", "scale.py:2: transaction.commit"]
    assert hand_written_renames(pkg) == ["init.py:2: os.replace"]


# ---------------------------------------------------------------- one reading per fact (issue 34 item 4)

# Who reads each fact, and the modules allowed to name its table (relative to policies/).
GPU_OWNER = "launchers/pods.py"  # GPU_RESOURCES, container_resources, gpu_resources, drop_gpus
GPU_TABLE_USERS = {"launchers/__init__.py",  # re-exports the table
                   "edit/new_env.py"}  # checks GPU_RESOURCE against it and renames FROM's resource to the one asked for
GIT_OWNER = "git.py"
REL_OWNER = "render/files.py"
ENVIRONMENT_OWNER = "rules/environment.py"
ENVIRONMENT_WRITERS = {"edit/new_env_text.py"}  # make new-env writes the new environment's declaration, line by line


def _code_strings(tree: ast.AST) -> list[ast.Constant]:
    docs = _docstrings(tree)
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def second_readings(package: Path = POLICIES) -> list[str]:
    """Places outside a fact's owner that read it again: a GPU resource name (or the table of them), a git process, a
    function that says a path relative to a folder, an environment declaration's file or keys."""
    gpu_names = set(launchers.GPU_RESOURCES)
    env_words = {"policy.yaml", "podLosses", "gpusPerNode", "gpuCapacity", "largeJobPods"}
    found = []
    for path in modules(package):
        rel = path.relative_to(package).as_posix()
        tree = ast.parse(path.read_text())
        for node in _code_strings(tree):
            if rel != GPU_OWNER and node.value in gpu_names:
                found.append(f"{rel}:{node.lineno}: GPU resource {node.value!r} (read GPUs through {GPU_OWNER})")
            if rel != ENVIRONMENT_OWNER and rel not in ENVIRONMENT_WRITERS and node.value in env_words \
                    and not rel.startswith("rules/"):
                found.append(f"{rel}:{node.lineno}: environment declaration {node.value!r} (read it through "
                             f"{ENVIRONMENT_OWNER}'s load or for_overlay)")
        for node in ast.walk(tree):
            name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else \
                node.name if isinstance(node, ast.alias) else None
            if name == "GPU_RESOURCES" and rel not in (GPU_OWNER, *GPU_TABLE_USERS):
                found.append(f"{rel}:{getattr(node, 'lineno', 0)}: GPU_RESOURCES (ask {GPU_OWNER}'s readers)")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and rel != REL_OWNER and \
                    node.name.lstrip("_") in ("rel", "rel_source", "relative_path"):
                found.append(f"{rel}:{node.lineno}: def {node.name} (say paths with {REL_OWNER}'s rel)")
            if isinstance(node, ast.Call) and rel != REL_OWNER and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "relative_to" and "cwd()" in ast.unparse(node):
                found.append(f"{rel}:{node.lineno}: a path relative to the working folder (say it with "
                             f"{REL_OWNER}'s rel)")
            if isinstance(node, ast.Call) and rel != GIT_OWNER and any(
                    isinstance(a, (ast.List, ast.Tuple)) and a.elts and isinstance(a.elts[0], ast.Constant)
                    and a.elts[0].value == "git" for a in node.args):
                found.append(f"{rel}:{node.lineno}: runs git itself (run it through {GIT_OWNER})")
    return found


def test_each_fact_has_one_reader():
    """GPUs are read in policies/launchers/pods.py alone (the resource names it knows, every counter and make scale's
    writer asking it), git runs through policies/git.py (one-line errors, bounded time), paths are said relative
    to a folder by files.rel alone, and an environment's declaration is read by environment.py alone (make scale's
    podLosses and ARGO010's `real` included): no module reads one of them a second way."""
    assert not second_readings(), "a fact read outside its owner:\n" + "\n".join(second_readings())


def test_the_one_reader_check_sees_each_second_reading(tmp_path):
    pkg = tmp_path / "policies"
    (pkg / "launchers").mkdir(parents=True)
    (pkg / "scale_edits.py").write_text('GPU = "nvidia.com/gpu"\n\ndef losses(d):\n    return d / "policy.yaml"\n')
    (pkg / "diff.py").write_text('import subprocess\n\ndef head(root):\n'
                                 '    return subprocess.run(["git", "-C", root, "rev-parse", "HEAD"])\n')
    (pkg / "repo_edit.py").write_text('def rel(root, path):\n    """A path relative to nvidia.com/gpu."""\n'
                                      '    return str(path)\n')
    (pkg / "trainjob.py").write_text("from .launchers.pods import GPU_RESOURCES\n")
    (pkg / "transaction.py").write_text("from pathlib import Path\n\ndef shown(p):\n"
                                        "    return str(p.resolve().relative_to(Path.cwd().resolve()))\n")
    found = [line.split(" (")[0] for line in second_readings(pkg)]
    assert found == ["diff.py:4: runs git itself", "repo_edit.py:1: def rel",
                     "scale_edits.py:1: GPU resource 'nvidia.com/gpu'",
                     "scale_edits.py:4: environment declaration 'policy.yaml'",
                     "trainjob.py:1: GPU_RESOURCES", "transaction.py:4: a path relative to the working folder"], found
