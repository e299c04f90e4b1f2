"""Benchmark of the validation layer: wall time of `make validate` on the repository, and how the render, schema
and policy stages grow over generated trees of up to 400 overlays. Medians of repeated runs; this machine is noisy."""
from __future__ import annotations

import argparse
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

from policies import engine  # noqa: E402
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

    def run():
        for u in units:
            u.problems.clear()
            engine.check_policies(u)

    run()  # warm-up
    return objects, objects / median_time(run, repeat)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="12,50,100,200,400", help="generated overlay counts")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    validator = make_validator("auto")
    print(f"schema validator: {validator.name}; kubectl: {shutil.which('kubectl') or 'venv'}")

    make = lambda env: subprocess.run(["make", "-s", "validate"], cwd=REPO, check=True, capture_output=True,
                                      env={**os.environ, **env})
    cold = median_time(lambda: make({"POLICIES_NO_CACHE": "1"}), args.repeat)
    make({})
    warm = median_time(lambda: make({}), args.repeat)
    print(f"make validate on the repository ({len(list((REPO / 'overlays').glob('*/*/kustomization.yaml')))} overlays + argocd/), median of {args.repeat}: cold (no render cache) "
          f"{cold:.2f} s, warm (unchanged overlays) {warm:.2f} s; target < 2 s cold: {'met' if cold < 2 else 'MISSED'}")
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
    print(f"\npolicy stage alone over {objects} rendered objects: median {rate:,.0f} objects/s "
          f"(target >= 20,000: {'met' if rate >= 20000 else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
