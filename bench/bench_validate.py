"""Benchmark of the validation layer: wall time of `make validate` on the repository, how the render, schema and
policy stages grow over generated trees of up to 400 overlays, and the two schema validators (jsonschema-rs
in-process, kubeconform) side by side on the 200-overlay tree, wall and CPU time. Medians of repeated runs; this
machine is noisy."""
from __future__ import annotations

import argparse
import atexit
import gc
import json
import resource
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from policies.report import engine  # noqa: E402
from policies.schema import make_validator  # noqa: E402

ENVS = {"kind-cpu": (2, 2), "gke-t4": (4, 1), "64x8-h100": (64, 8)}
LAUNCHERS = ("indexed-job", "statefulset", "pytorchjob", "trainjob")


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def make_tree(root: Path, count: int) -> Path:
    """`count` overlays: copies of the repository's overlays under numbered environment folders."""
    shutil.copytree(REPO / "base", root / "base")
    shutil.copytree(REPO / "components", root / "components")
    made = 0
    i = 0
    while made < count:
        for env in ENVS:
            for launcher in LAUNCHERS:
                if made >= count:
                    break
                src = REPO / "overlays" / env / launcher
                dst = root / "overlays" / f"{env}-{i:03d}" / launcher
                shutil.copytree(src, dst)
                made += 1
        i += 1
    return root / "overlays"


def stages(overlays: Path, validator, repeat: int) -> dict[str, float]:
    render_t, schema_t, policy_t, objects = [], [], [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        units = engine.collect([str(overlays)], overlays)
        render_t.append(time.perf_counter() - start)
        gc.freeze()  # as `policies.cli validate` does after collecting
        t = engine.Timings()
        engine.validate(units, validator, t)
        assert not engine.failed(units), [p.line() for u in units for p in u.problems][:5]
        schema_t.append(t.schema)
        policy_t.append(t.policy)
        objects = sum(len(u.manifests) for u in units)
    return {"units": len(units), "objects": objects, "render": statistics.median(render_t),
            "schema": statistics.median(schema_t), "policy": statistics.median(policy_t)}


def policy_throughput(overlays: Path, repeat: int) -> tuple[int, float]:
    """The policy stage alone, over already rendered objects: objects per second."""
    units = engine.collect([str(overlays)], overlays)
    objects = sum(len(u.manifests) for u in units)
    gc.freeze()  # as `policies.cli validate` does after collecting

    def run():
        for u in units:
            u.problems.clear()
            engine.check_policies(u)

    run()  # warm-up
    return objects, objects / median_time(run, repeat)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def schema_stage_child(name: str, overlays: Path) -> None:
    """In a fresh process (so compiling schemas and starting kubeconform count, as in a real run): the schema
    stage alone over every overlay's rendered objects; prints {"wall", "cpu"} (this process and its children)."""
    units = [u for u in engine.collect([str(overlays)], overlays) if not u.failed_input and u.manifests]
    cpu0, kids0, start = time.process_time(), _children_cpu(), time.perf_counter()
    validator = make_validator(name)  # jsonschema-rs is imported here; kubeconform -v runs here
    found = validator.validate_units([u.manifests for u in units])
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu0 + _children_cpu() - kids0
    bad = [p.line() for ps in found for p in ps][:3]
    print(json.dumps({"wall": wall, "cpu": cpu, "name": validator.name, "objects": sum(len(u.manifests) for u in units),
                      "units": len(units), "problems": bad}))


ONE_FILE_CHILD = """
import sys
from policies import schema
from policies.render import loader
path = sys.argv[1]
manifests = loader.parse(open(path, encoding="utf-8").read(), path)
found = schema.BuiltinValidator().validate(manifests)
assert not found, [p.line() for p in found][:3]
"""


def kustomize_gc(repeat: int) -> None:
    """CPU of rendering the repository's overlays and argocd/ with kubectl kustomize, one process each, with the Go
    settings render.py gives it against Go's defaults (GOGC=100), interleaved."""
    from policies.render.gitops import kubectl
    from policies.render.render import KUSTOMIZE_GO_ENV

    folders = sorted(str(p.parent) for p in (REPO / "overlays").glob("*/*/kustomization.yaml")) + [str(REPO / "argocd")]
    base = {k: v for k, v in os.environ.items() if k not in KUSTOMIZE_GO_ENV}
    settings = {"render.py's (" + " ".join(f"{k}={v}" for k, v in KUSTOMIZE_GO_ENV.items()) + ")":
                {**base, **KUSTOMIZE_GO_ENV}, "Go's default (GOGC=100)": {**base, "GOGC": "100"}}
    cpu: dict[str, list[float]] = {name: [] for name in settings}
    for _ in range(repeat):
        for name, env in settings.items():
            kids0 = _children_cpu()
            for folder in folders:
                subprocess.run([kubectl(), "kustomize", folder], env=env, check=True, capture_output=True)
            cpu[name].append(_children_cpu() - kids0)
    print(f"\nkubectl kustomize of the repository's {len(folders)} folders, one process each, CPU s (median of "
          f"{repeat}, interleaved): " + "; ".join(f"{n}: {statistics.median(c):.2f}" for n, c in cpu.items()))


def one_file_side_by_side(overlays: Path, repeat: int) -> None:
    """Both validators as whole processes on one file that holds every rendered object of the tree (what a user's
    `make validate PATHS=rendered.yaml` or a CI step on a `kustomize build` output reads): kubeconform with the
    command the project gives it (`-n` = cores), against a Python process that reads the file with the project's
    loader and runs the in-process schema stage. Paired and interleaved; wall and CPU, median of `repeat`."""
    import yaml

    units = [u for u in engine.collect([str(overlays)], overlays) if not u.failed_input and u.manifests]
    objects = [m.obj for u in units for m in u.manifests]
    path = overlays.parent / "rendered.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    commands = {"jsonschema-rs (in-process, one process)": [sys.executable, "-c", ONE_FILE_CHILD, str(path)]}
    try:
        kc = make_validator("kubeconform")
        commands[kc.name] = kc.command(path)  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - absent: said in the table
        commands[f"kubeconform: could not run ({exc})"] = []
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, cmd in commands.items():
            if not cmd:
                continue
            kids0, start = _children_cpu(), time.perf_counter()
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(_children_cpu() - kids0)
            assert proc.returncode == 0, (name, proc.stderr[-500:])
    med = statistics.median
    print(f"\none rendered file, {len(objects)} objects, {path.stat().st_size // 1024} KB, each validator a whole "
          f"process ({os.cpu_count()} cores), paired, median of {repeat}:")
    print("\n| validator | wall s | CPU s |\n|---|---:|---:|")
    for name in commands:
        print(f"| {name} | {med(wall[name]):.3f} | {med(cpu[name]):.3f} |" if wall[name] else f"| {name} | | |")


def validators_side_by_side(overlays: Path, repeat: int) -> None:
    """Both validators on one tree: the schema stage alone, and the whole `policies.cli validate` (render cache
    warm, so the schema stage is not hidden behind kustomize), wall and CPU (children included), median of `repeat`."""
    env = {k: v for k, v in os.environ.items() if k != "POLICIES_NO_CACHE"}
    cli = lambda name: subprocess.run([sys.executable, "-m", "policies.cli", "validate", "--schema", name,
                                       str(overlays)], cwd=REPO, env=env, capture_output=True, text=True)
    rows = []
    for name in ("builtin", "kubeconform"):
        first = cli(name)  # also warms the render cache
        if first.returncode != 0:
            why = (first.stderr or first.stdout).strip().splitlines()
            rows.append(f"| {name} | could not run: {why[-1] if why else f'exit {first.returncode}'} | | | | |")
            continue
        stage_w, stage_c, e2e_w, e2e_c, label, objects = [], [], [], [], name, 0
        for _ in range(repeat):
            out = subprocess.run([sys.executable, __file__, "--schema-stage", name, str(overlays)], cwd=REPO, env=env,
                                 capture_output=True, text=True, check=True).stdout
            data = json.loads(out)
            assert not data["problems"], data["problems"]
            stage_w.append(data["wall"])
            stage_c.append(data["cpu"])
            label, objects = data["name"], data["objects"]
            kids0, start = _children_cpu(), time.perf_counter()
            assert cli(name).returncode == 0
            e2e_w.append(time.perf_counter() - start)
            e2e_c.append(_children_cpu() - kids0)
        med = statistics.median
        rows.append(f"| {label} | {objects} | {med(stage_w):.3f} | {med(stage_c):.3f} | {med(e2e_w):.2f} | "
                    f"{med(e2e_c):.2f} |")
    print(f"\nschema validators side by side on {overlays.parent.name} ({os.cpu_count()} cores), median of {repeat}:")
    print("\n| validator | objects | schema stage wall s | schema stage CPU s | validate wall s | validate CPU s |")
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--schema-stage":
        schema_stage_child(sys.argv[2], Path(sys.argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="12,50,100,200,400", help="generated overlay counts")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--validators-only", action="store_true",
                    help="only the two schema validators side by side on the 200-overlay tree")
    ap.add_argument("--side-by-side", type=int, default=200, help="overlays in the tree the validators share")
    args = ap.parse_args()
    if args.validators_only:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # as in main(): the child processes keep bytecode
        os.environ["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="bench-pycache-")
        atexit.register(shutil.rmtree, os.environ["PYTHONPYCACHEPREFIX"], True)
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["POLICIES_CACHE_DIR"] = str(Path(tmp) / "cache")
            tree = make_tree(Path(tmp) / f"tree-{args.side_by_side}", args.side_by_side)
            validators_side_by_side(tree, args.repeat)
            one_file_side_by_side(tree, args.repeat)
        return 0
    validator = make_validator("auto")
    from policies.render.gitops import kubectl

    print(f"schema validator: {validator.name}; kubectl: {kubectl()}")
    # A checkout keeps Python's bytecode in __pycache__; where PYTHONDONTWRITEBYTECODE is set (these sessions) every
    # process would compile policies/ from source (0.1-0.3 s of CPU each). The processes the bench starts get a
    # bytecode cache of their own, outside the checkout (PYTHONPYCACHEPREFIX), as a user's checkout has one.
    pycache = tempfile.mkdtemp(prefix="bench-pycache-")
    atexit.register(shutil.rmtree, pycache, True)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = pycache
    print(f"python {sys.version.split()[0]}; bytecode cache: on (PYTHONPYCACHEPREFIX={pycache}, filled by the "
          "first run of each command)")

    overlays = len(list((REPO / "overlays").glob("*/*/kustomization.yaml")))
    for schema in ("builtin", "kubeconform"):
        make = lambda env: subprocess.run(["make", "-s", "validate", f"SCHEMA={schema}"], cwd=REPO, check=True,
                                          capture_output=True, env={**os.environ, **env})
        try:
            make({"POLICIES_NO_CACHE": "1"})  # fills the bytecode cache
        except subprocess.CalledProcessError as exc:
            why = (exc.stderr or b"").decode().strip().splitlines()
            print(f"make validate SCHEMA={schema}: could not run ({why[-1] if why else exc.returncode})")
            continue
        cold = median_time(lambda: make({"POLICIES_NO_CACHE": "1"}), args.repeat)
        make({})
        warm = median_time(lambda: make({}), args.repeat)
        # The target is `make validate`'s, which runs the in-process validator unless SCHEMA= says otherwise.
        verdict = (f"target < 2 s cold: {'met' if cold < 2 else 'MISSED'}" if schema == "builtin" else
                   "opt-in (the target is the default validator's)")
        print(f"make validate SCHEMA={schema}{' (the default)' if schema == 'builtin' else ''} on the repository "
              f"({overlays} overlays + argocd/), median of {args.repeat}: cold (no render cache) {cold:.2f} s, warm "
              f"(unchanged overlays) {warm:.2f} s; {verdict}")
    kustomize_gc(args.repeat)
    os.environ["POLICIES_NO_CACHE"] = "1"  # the stage table below measures real rendering

    print("\n| overlays | objects | render s | schema s | schema obj/s | policy s | policy obj/s | total s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            root = Path(tmp) / f"tree-{size}"
            overlays = make_tree(root, size)
            s = stages(overlays, validator, max(1, args.repeat // 2))
            total = s["render"] + s["schema"] + s["policy"]
            print(f"| {s['units']} | {s['objects']} | {s['render']:.2f} | {s['schema']:.3f} | "
                  f"{s['objects'] / s['schema']:,.0f} | {s['policy']:.3f} | {s['objects'] / s['policy']:,.0f} | "
                  f"{total:.2f} |")
        largest = Path(tmp) / f"tree-{max(int(s) for s in args.sizes.split(','))}" / "overlays"
        objects, rate = policy_throughput(largest, args.repeat)
        os.environ["POLICIES_CACHE_DIR"] = str(Path(tmp) / "cache")
        side = Path(tmp) / f"tree-{args.side_by_side}" / "overlays"
        side = side if side.is_dir() else make_tree(side.parent, args.side_by_side)
        validators_side_by_side(side, args.repeat)
        one_file_side_by_side(side, args.repeat)
    print(f"\npolicy stage alone over {objects} rendered objects: median {rate:,.0f} objects/s "
          f"(target >= 20,000: {'met' if rate >= 20000 else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
