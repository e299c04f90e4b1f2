"""The trainer's contract (trainer/contract.py): declared once, torch-free, equal to what the trainer's parser reads,
and checked by `make validate` on every environment the tree holds (rules TRAINER001 and TRAINER002)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO
from policies.argocd import identity
from trainer import contract

ENVIRONMENTS = identity.environments_in_tree(REPO)


def test_the_contract_imports_no_torch():
    code = "import sys, trainer.contract; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr


def test_the_contract_is_what_the_parser_reads():
    """Every flag whose default comes from a variable ([NAME] in its help) is declared with that flag and the same
    choices, and every declared flag is one the parser has: neither side can add a variable alone."""
    from trainer.cli import build_parser

    parser = build_parser()
    read = {}
    for action in parser._actions:
        m = re.match(r"\[([A-Z][A-Z0-9_]*)\]", action.help or "")
        if m:
            read[m.group(1)] = (action.option_strings[0], tuple(sorted(action.choices or ())))
    declared = {v.name: (v.flag, tuple(sorted(v.choices))) for v in contract.ENV.values() if v.flag}
    assert read == declared


def test_the_contract_accepts_the_parser_defaults_and_refuses_what_argparse_refuses():
    from trainer.cli import build_parser

    defaults = {a.option_strings[0]: a.default for a in build_parser()._actions if a.option_strings}
    for var in contract.FLAGS.values():
        default = defaults[var.flag]
        if isinstance(default, str):
            assert var.refuses(default) is None, (var, default)
    cases = {"EPOCHS": ("3", "0"), "SEED": ("-1", "x"), "PG_TIMEOUT": ("2.5", "inf"), "CHANNELS_LAST": ("On", "2"),
             "RUN_ID": ("run-001", "a/b"), "CHECKPOINT_STEPS": ("0", "-1"), "DIST_BACKEND": ("gloo", "glo"),
             "LR": ("3e-3", "0")}
    for name, (good, bad) in cases.items():
        assert contract.ENV[name].refuses(good) is None and contract.ENV[name].refuses(bad), name


def test_trainer_reads_no_undeclared_variable():
    from trainer.cli import env_reader

    env = env_reader({"EPOCHS": "5"})
    assert env("EPOCHS", "3") == "5" and env("SEED", "42") == "42"
    with pytest.raises(KeyError, match="not declared in trainer/contract.py"):
        env("EPOCHZ", "3")


@pytest.mark.parametrize("argv, start", [
    (["torchrun", "--nnodes=2", contract.SCRIPT, "--task=synthetic"], 3),
    (["python", "-m", "trainer.train", "--epochs", "2"], 3),
    (["python", "other.py"], None),
])
def test_what_starts_the_trainer(argv, start):
    assert contract.starts_trainer(argv) == start


@pytest.fixture(scope="module")
def typos(tmp_path_factory):
    """The issue's two typos on every environment of the tree: DIST_BACKEND=glo in each environment's ConfigMap,
    NPROC_PER_NOD for NPROC_PER_NODE in every topology patch that sets the variable; `make validate`'s JSON."""
    root = tmp_path_factory.mktemp("typos")
    for d in ("base", "components", "overlays"):
        shutil.copytree(REPO / d, root / d)
    renamed = []
    for env in ENVIRONMENTS:
        kfile = root / "components" / env / "kustomization.yaml"
        text, n = re.subn(r"- DIST_BACKEND=\w+", "- DIST_BACKEND=glo", kfile.read_text())
        assert n == 1, f"components/{env} sets DIST_BACKEND once in its ConfigMap"
        kfile.write_text(text)
        for topo in sorted((root / "overlays" / env).glob("*/patches/set-topology.yaml")):
            text = topo.read_text()
            if "name: NPROC_PER_NODE\n" in text:
                topo.write_text(text.replace("name: NPROC_PER_NODE\n", "name: NPROC_PER_NOD\n"))
                renamed.append(topo.parent.parent.relative_to(root).as_posix())
    proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "--format", "json", str(root / "overlays")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr
    return root, json.loads(proc.stdout), renamed


def _by_overlay(root, report):
    out = {u["source"].replace(str(root) + "/", ""): [] for u in report["units"]}
    for p in report["problems"]:
        out[p["source"].replace(str(root) + "/", "")].append(p)
    return out


def test_dist_backend_glo_fails_every_overlay_of_every_environment(typos):
    root, report, _ = typos
    units = _by_overlay(root, report)
    overlays = sorted(p.parent.relative_to(REPO).as_posix() for env in ENVIRONMENTS
                      for p in (REPO / "overlays" / env).glob("*/kustomization.yaml"))
    assert sorted(units) == overlays
    for overlay, problems in units.items():
        found = [p for p in problems if p["rule"] == "TRAINER001"]
        assert found and all(p["severity"] == "error" for p in found), overlay
        assert "DIST_BACKEND is 'glo'" in found[0]["message"] and "auto, nccl, gloo" in found[0]["message"]


def test_nproc_per_nod_is_an_error_where_the_world_changes_and_a_warning_where_it_does_not(typos):
    """The typo leaves the base's NPROC_PER_NODE in force: where the patch meant another number the world is not the
    one written (an error, issue 31 item 4), where it meant the base's own it is the same world (a warning)."""
    root, report, renamed = typos
    units = _by_overlay(root, report)
    assert {p.split("/")[1] for p in renamed} == set(ENVIRONMENTS)
    severities = set()
    for overlay in renamed:
        patch = (root / overlay / "patches" / "set-topology.yaml").read_text()
        meant = re.search(r"name: NPROC_PER_NOD\n\s+value: \"(\d+)\"", patch).group(1)
        launcher = overlay.split("/")[2].removesuffix("-lm")
        base = "".join(p.read_text() for p in sorted((root / "base" / launcher).glob("*.yaml")))
        in_force = re.search(r"name: NPROC_PER_NODE\n\s+value: \"(\d+)\"", base)
        found = [p for p in units[overlay] if p["rule"] == "TRAINER002"]
        expected = "error" if in_force and in_force.group(1) != meant else "warning"
        severities.add(expected)
        assert [p["severity"] for p in found] == [expected], overlay
        assert found[0]["hint"] == "rename NPROC_PER_NOD to NPROC_PER_NODE"
        if expected == "error":
            assert f"NPROC_PER_NOD is '{meant}'" in found[0]["message"] and \
                f"NPROC_PER_NODE is '{in_force.group(1)}'" in found[0]["message"], found[0]["message"]
        else:
            assert "NPROC_PER_NOD is set" in found[0]["message"]
    assert "error" in severities  # 64x8-h100's 8 processes per pod against the base's 1


@pytest.mark.parametrize("name, field", [
    ("runtime-epochs-zero", "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].command[3]"),
    ("runtime-env-glo", "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].env[0]"),
])
def test_a_value_the_runtime_writes_is_reported_on_the_runtime(name, field):
    """A command or env the TrainJob leaves to its runtime is the runtime's: the problem names the
    ClusterTrainingRuntime and its field (the TrainJob's spec.trainer only where the TrainJob writes it)."""
    path = REPO / "tests" / "fixtures" / "rules" / "TRAINER001" / "fail" / f"{name}.yaml"
    proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "--format", "json", str(path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1, proc.stderr
    assert [(p["rule"], p["object"], p["field"]) for p in report["problems"] if p["severity"] == "error"] == \
        [("TRAINER001", "ClusterTrainingRuntime/ddp-torch", field)]


def _parser_refuses(args: list[str]) -> bool:
    """What trainer/cli.py's parser does with these arguments: refuses (exit 2) or prints the usage (--help)."""
    import contextlib
    import io

    from trainer.cli import build_parser

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            build_parser({}).parse_args(args)
        except SystemExit:
            return True
    return False


def test_refused_arguments_are_what_the_parser_refuses():
    """contract.refused against the real parser on 600 generated command lines: options exact, as unique or
    ambiguous prefixes, misspelt, `=value` or separate, BOOL flags with and without a value, positionals, `--`."""
    import random

    from trainer.cli import build_parser

    assert set(contract.OPTIONS) == {s for a in build_parser({})._actions for s in a.option_strings}
    assert contract.OPTIONAL_VALUE == {a.option_strings[0] for a in build_parser({})._actions if a.nargs == "?"}
    rng = random.Random(11)
    flags = [f for f in contract.FLAGS]

    good = {contract.CHOICE: None, contract.BOOL: "true", contract.POSITIVE_INT: "2", contract.NON_NEGATIVE_INT: "0",
            contract.INT: "1", contract.POSITIVE_FLOAT: "0.5", contract.FLOAT: "0.5", contract.SECONDS: "5",
            contract.FOLDER_NAME: "run-1", contract.TEXT: "t"}

    def value(flag: str) -> str:
        """A value the option `flag` names (itself, or the one option it is a prefix of) accepts."""
        match = [flag] if flag in contract.FLAGS else [f for f in contract.FLAGS if f.startswith(flag)]
        if len(match) != 1:
            return "v"
        var = contract.FLAGS[match[0]]
        return var.choices[0] if var.kind == contract.CHOICE else good[var.kind]

    for _ in range(600):
        args: list[str] = []
        for _ in range(rng.randint(0, 4)):
            flag = rng.choice(flags)
            shape = rng.random()
            if shape < 0.1:  # a typo: one character dropped
                k = rng.randrange(3, len(flag))
                flag = flag[:k] + flag[k + 1:]
            elif shape < 0.2:  # a prefix, unique or not
                flag = flag[:rng.randint(3, len(flag))]
            if flag in contract.OPTIONAL_VALUE and rng.random() < 0.5:
                args.append(flag)
            elif rng.random() < 0.5:
                args.append(f"{flag}={value(flag)}")
            else:
                args += [flag, value(flag)]
        if rng.random() < 0.05:
            args.insert(rng.randrange(len(args) + 1), "stray")
        if rng.random() < 0.03:
            args.append("--help")
        if rng.random() < 0.03:
            args += ["--", "x"]
        assert bool(contract.refused(args)) == _parser_refuses(args), (args, contract.refused(args))


def test_the_contract_binds_where_the_image_is_the_trainers(tmp_path):
    """`-m trainer.train` and /app/trainer/train.py are this repository's trainer only in its image: gitops.yaml's
    identity.image (or the template's example image) gives an error, any other image a warning that names the
    condition, since another image may hold another program at that path (a team's own `trainer` package)."""
    fixtures = REPO / "tests" / "fixtures" / "rules"
    ours = "registry.corp.example/ml/ddp-trainer"
    repo = tmp_path / "fork"
    repo.mkdir()
    (repo / "gitops.yaml").write_text((REPO / "gitops.yaml").read_text().replace(identity.EXAMPLE_IMAGE, ours))
    cases = {  # file -> (image written in it, severity expected)
        repo / "declared.yaml": (f"{ours}:0.2.0", "error"),
        repo / "example.yaml": ("ghcr.io/example/ddp-trainer:0.1.0-cpu", "error"),
        repo / "other.yaml": ("registry.corp.example/nlp/trainer:1.4", "warning"),
        tmp_path / "outside.yaml": (f"{ours}:0.2.0", "warning"),  # no identity above it declares that image
    }
    for rule, name in (("TRAINER001", "dist-backend-glo"), ("TRAINER002", "dist-backnd"), ("TRAINER003", "epocs")):
        text = (fixtures / rule / "fail" / f"{name}.yaml").read_text()
        for path, (image, _) in cases.items():
            path.with_name(f"{rule}-{path.name}").write_text(text.replace("ghcr.io/example/ddp-trainer:0.1.0-cpu",
                                                                          image))
    paths = sorted(str(p) for p in tmp_path.rglob("TRAINER*.yaml"))
    proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "--format", "json", *paths],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    report = json.loads(proc.stdout)
    found = {(p["source"].rsplit("/", 1)[1], p["severity"]): p["message"] for p in report["problems"]
             if p["rule"].startswith("TRAINER")}
    for rule in ("TRAINER001", "TRAINER002", "TRAINER003"):
        for path, (image, severity) in cases.items():
            key = (f"{rule}-{path.name}", severity)
            assert key in found, (key, sorted(found))
            assert (f"{rule}-{path.name}", "error" if severity == "warning" else "warning") not in found, key
            if severity == "warning":
                assert found[key].startswith(f"if image {image} holds this repository's trainer "
                                             f"(gitops.yaml's identity.image: "), found[key]
    assert proc.returncode == 1, proc.stderr  # the declared and example images' errors
