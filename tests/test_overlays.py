"""The repository's own overlays: every one renders, validates strictly and forms the intended world."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES, REPO, run_cli
from policies.argocd import identity

ALL = sorted(p.parent.relative_to(REPO) for p in (REPO / "overlays").glob("*/*/kustomization.yaml"))
GRID = {"pytorchjob", "trainjob", "indexed-job", "statefulset"}
# Variants beside the environment x launcher grid, by their folder's name (kind-cpu/statefulset-etcd: the etcd
# rendezvous; kind-cpu/pytorchjob-elastic: an elastic world of 2 to 3 workers; 64x8-h100/statefulset-lm: the
# causal-lm task; and the copies `make new-env` makes of them).
VARIANTS = {p for p in ALL if p.parts[2] not in GRID}
OVERLAYS = [p for p in ALL if p not in VARIANTS]
ENVIRONMENTS = identity.environments_in_tree(REPO)
_STATED = re.compile(r"^# (\d+) (?:nodes x (\d+) [\w-]+|pods x (\d+) processes[^:]*): world size (\d+)")


def stated(env: str) -> tuple[int, int, int, int]:
    """(pods, processes per pod, world size, GPUs per pod) an environment's overlays say they form: the first line
    of their set-topology.yaml (`# 4 nodes x 1 T4: world size 4.`, `# 2 pods x 2 processes ...: world size 4.`),
    the same in each, and on GPUs as many per pod as its declaration's gpusPerNode. Derived from the tree, so a new
    environment is checked like the others."""
    found = set()
    for topo in sorted((REPO / "overlays" / env).glob("*/patches/set-topology.yaml")):
        m = _STATED.match(topo.read_text().split("\n", 1)[0])
        assert m, f"{topo.relative_to(REPO)}: its first line does not state the world it forms"
        pods, gpus, procs, world = m.groups()
        found.add((int(pods), int(gpus or procs), int(world), int(gpus or 0)))
    assert len(found) == 1, f"the overlays of {env} state different worlds: {sorted(found)}"
    (expected,) = found
    declared = yaml.safe_load((REPO / "components" / env / "policy.yaml").read_text())["spec"]
    assert expected[3] == declared.get("gpusPerNode", expected[3]), env
    return expected


EXPECTED = {env: stated(env) for env in ENVIRONMENTS}
# (pods, processes per pod, world size, GPUs per pod) where a variant's world differs from its environment's; an
# elastic world has no one size (None), its node range is checked below.
EXPECTED_VARIANT = {Path("overlays/kind-cpu/pytorchjob-elastic"): (3, 1, None, 0)}
ELASTIC_RANGE = {Path("overlays/kind-cpu/pytorchjob-elastic"): (2, 3)}


def test_every_environment_runs_every_launcher():
    envs = {p.parts[1] for p in OVERLAYS}
    assert envs == set(ENVIRONMENTS) == set(identity.load(REPO).environments)
    for env in envs:
        assert {p.parts[2] for p in OVERLAYS if p.parts[1] == env} == GRID, env
    assert {Path("overlays/kind-cpu/statefulset-etcd"), Path("overlays/kind-cpu/pytorchjob-elastic"),
            Path("overlays/64x8-h100/statefulset-lm")} & set(ALL) <= VARIANTS


def test_make_validate_passes_on_the_repository():
    proc = run_cli("validate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.splitlines()[-1]
    assert last.startswith(f"OK: {len(ALL)} rendered folders") and "0 errors, 0 warnings" in last, last
    assert "schema: " in last and "skipped" not in last  # says which validator ran


@pytest.fixture(scope="module")
def plan_json():
    proc = run_cli("validate", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("overlay", ALL, ids=str)
def test_overlay_topology(overlay):
    from policies.report.engine import collect, validate

    (unit,) = collect([str(REPO / overlay)], REPO / "overlays")
    validate([unit], None)
    # The one info line allowed: a real environment's image pinned to the template's placeholder digest, until its
    # first release is pinned (IMG004; make new-env makes such an environment).
    assert not [p.line() for p in unit.problems if not (p.rule == "IMG004" and p.severity == "info")]
    (t,) = unit.topologies
    nodes, nproc, world, gpus = EXPECTED_VARIANT.get(overlay, EXPECTED[overlay.parts[1]])
    assert (t.pods, t.nnodes_max, t.nproc, t.world_size, t.gpus) == (nodes, nodes, nproc, world, gpus)
    assert (t.nnodes_min, t.nnodes_max) == ELASTIC_RANGE.get(overlay, (nodes, nodes))
    assert t.pg_backend and t.pg_backend[0] == ("nccl" if gpus else "gloo")
    if gpus == 0:
        assert t.cpu_limit is not None and t.nproc <= t.cpu_limit


def test_h100_overlay_has_the_large_scale_settings():
    from policies.report.engine import collect

    (unit,) = collect([str(REPO / "overlays/64x8-h100/indexed-job")], REPO / "overlays")
    kinds = {m.kind: m for m in unit.manifests}
    job = kinds["Job"].obj
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "h100"
    spec = job["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols["dshm"]["emptyDir"]["medium"] == "Memory"
    assert {vols[n]["persistentVolumeClaim"]["claimName"] for n in ("data", "out", "models")} == {
        "datasets-pvc", "outputs-pvc", "models-pvc"}
    mounts = {m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
    assert {"/data", "/out", "/models", "/dev/shm", "/tmp"} <= mounts
    # The optional hf-token Secret as a file that HF_TOKEN_PATH names (huggingface_hub reads it), not an env var.
    assert vols["hf-token"]["secret"] == {"secretName": "hf-token", "optional": True,
                                          "items": [{"key": "HF_TOKEN", "path": "token"}]}
    (hf_mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "hf-token"]
    assert hf_mount["readOnly"] is True
    env = next(m for m in unit.manifests if m.kind == "ConfigMap" and m.name == "ddp-env")
    assert env.obj["data"]["HF_TOKEN_PATH"] == hf_mount["mountPath"] + "/token"
    assert not [e for e in spec["containers"][0]["envFrom"] if "secretRef" in e]
    assert not [m for m in unit.manifests if m.kind == "Secret"]  # referenced by name only
    assert spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert env.obj["data"]["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"


def test_name_prefix_pitfall_is_caught():
    proc = run_cli("validate", str(FIXTURES / "overlays/name-prefix"))
    assert proc.returncode == 1
    out = proc.stdout
    assert "error TOPO003" in out and "expected pod 0 'team-ddp-train-run-001-0.ddp-train'" in out
    assert "error TOPO004" in out and "no Service 'ddp-train'" in out


def test_plan_shows_the_world_per_overlay():
    proc = run_cli("plan")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.count("### overlays/") == len(ALL)
    assert "| 64   | 64     | 8        | 512   | 8       | 512  |" in out
    assert "completion index" in out and "rendezvous (c10d)" in out
