"""The loader reads YAML as kustomize and the API server do (go-yaml), within its bounds on any input: no YAML 1.1
base-60 numbers, integers past what go-yaml reads stay text (no internal error past Python's 4,300 digits), merge keys
expanded as kustomize renders them, and an input file of any size hashed in chunks under the same bound."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from policies.render.loader import parse
from policies.render.render import kubectl

HEAD = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\n"
CM = HEAD + "data:\n"


def kustomize_reads(tmp_path: Path, text: str) -> dict:
    """What kustomize renders of one resource, parsed back (the reference for every case below)."""
    (tmp_path / "r.yaml").write_text(text)
    (tmp_path / "kustomization.yaml").write_text("resources: [r.yaml]\n")
    proc = subprocess.run([kubectl(), "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    (m,) = parse(out, "kustomize")
    return m.obj


@pytest.mark.parametrize("scalar, expected", [
    ("12:30", "12:30"), ("1:30:00", "1:30:00"), ("-1:0", "-1:0"), ("190:20:30.15", "190:20:30.15"),
    ("1_000", 1000), ("0x1F", 31), ("3.5", 3.5), ("017", 15),
])
def test_scalars_read_as_go_yaml_reads_them(tmp_path, scalar, expected):
    text = HEAD + f"spec:\n  v: {scalar}\n"
    (m,) = parse(text, "x.yaml")
    assert m.obj["spec"]["v"] == expected
    assert kustomize_reads(tmp_path, text)["spec"]["v"] == expected


def test_a_time_in_an_env_value_is_no_schema_error(tmp_path):
    """`value: 12:30` is the string "12:30" for kubectl and the API server; PyYAML's 750 was a false SCHEMA error."""
    pod = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n    - name: c\n      image: busybox:1\n"
           "      env:\n        - name: START\n          value: 12:30\n")
    f = tmp_path / "pod.yaml"
    f.write_text(pod)
    proc = run_cli("validate", "--schema", "builtin", str(f))
    assert "SCHEMA" not in proc.stdout, proc.stdout


def test_a_long_base_60_scalar_is_read_in_linear_time(tmp_path):
    """A 1 MB `1:0:0:...` scalar (within the API server's 1 MiB of ConfigMap data, TOPO011) is the string it is,
    read in one pass: YAML 1.1's base-60 reading took minutes."""
    f = tmp_path / "b60.yaml"
    f.write_text(CM + "  k: 1" + ":0" * 500_000 + "\n")
    proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "--schema", "builtin", str(f)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("where", ["value", "key", "overlay"])
def test_an_integer_of_5000_digits_is_text_not_an_internal_error(tmp_path, where):
    big = "9" * 5000
    if where == "value":
        text = CM + f"  k: x\nspec:\n  num: {big}\n"
    else:
        text = CM + f"  ? {big}\n  : x\n"  # a plain key of more than 1,024 characters must be explicit
    if where == "overlay":
        (tmp_path / "cm.yaml").write_text(text)
        (tmp_path / "kustomization.yaml").write_text("resources: [cm.yaml]\n")
        target = tmp_path
    else:
        target = tmp_path / "big.yaml"
        target.write_text(text)
    proc = run_cli("validate", "--schema", "none", str(target))
    assert "internal error" not in proc.stderr and proc.returncode in (0, 1), proc.stderr
    (m,) = parse(text, "x.yaml")
    if where == "value":
        assert m.obj["spec"]["num"] == big  # go-yaml: neither int64, uint64 nor float64, so the string
    else:
        assert big in m.obj["data"]


def test_integers_go_yaml_reads_stay_numbers():
    (m,) = parse(HEAD + (f"spec:\n  a: {2**63 - 1}\n  b: {'9' * 30}\n  c: 0x{'f' * 20}\n"), "x")
    # past uint64 but decimal: go-yaml's float64 (yamlStyleFloat), which encoding/json writes 1e+30
    assert m.obj["spec"]["a"] == 2**63 - 1 and m.obj["spec"]["b"] == 1e30 and type(m.obj["spec"]["b"]) is float
    assert m.obj["spec"]["c"] == "0x" + "f" * 20  # past uint64 and not decimal: go-yaml's text


MERGE = HEAD + """base: &b
  a: "1"
  b: "2"
data:
  <<: *b
  b: "3"
  c: "4"
list:
  - &x {p: 1}
  - <<: [*x, {q: 2}]
    r: 3
"""


def test_merge_keys_are_expanded_as_kustomize_renders_them(tmp_path):
    (m,) = parse(MERGE, "merge.yaml")
    assert m.obj["data"] == {"a": "1", "b": "3", "c": "4"}
    assert m.obj["list"][1] == {"p": 1, "q": 2, "r": 3}
    assert {k: v for k, v in m.obj.items()} == kustomize_reads(tmp_path, MERGE)


def test_merge_keys_in_a_file_and_on_stdin(tmp_path):
    f = tmp_path / "merge.yaml"
    f.write_text(MERGE)
    for proc in (run_cli("validate", "--schema", "none", str(f)), run_cli("validate", "--schema", "none", "-",
                                                                            stdin=MERGE)):
        assert proc.returncode == 0 and "INPUT" not in proc.stdout, proc.stdout + proc.stderr


def test_a_duplicate_key_beside_a_merge_is_still_refused():
    with pytest.raises(Exception) as exc:
        parse(MERGE.replace('  c: "4"\n', '  c: "4"\n  c: "5"\n'), "dup.yaml")
    assert "duplicate key 'c'" in str(exc.value)


def test_a_5_gb_sparse_file_in_an_overlay_is_one_line(tmp_path):
    """The render cache key read every input whole: MemoryError, an internal error. Now each file is hashed in
    chunks within the loader's input bound, and one larger is refused before kustomize reads it."""
    overlay = tmp_path / "o"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("configMapGenerator:\n  - name: big\n    files: [blob]\n")
    with open(overlay / "blob", "wb") as f:
        f.truncate(5 * 1024 ** 3)
    env = dict(os.environ, POLICIES_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run(["prlimit", "--as=2000000000", sys.executable, "-m", "policies.cli", "validate",
                           "--schema", "none", str(overlay)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"error INPUT {overlay / 'blob'}: larger than 32 MiB" in proc.stdout


@pytest.mark.parametrize("scalar, expected", [
    # goyaml.v2/resolve.go (sigs.k8s.io/yaml 742f5e6), the reader of kubectl, kubeconform and Argo CD:
    ("y", True), ("Y", True), ("n", False), ("N", False),              # resolveMap
    ("0o17", 15), ("0O17", 15), ("0X1F", 31), ("0B11", 3), ("-0b11", -3),  # strconv.ParseInt(plain, 0, 64)
    ("1e3", 1000), ("1.5e3", 1500), ("1_0e1", 100), ("+.5", 0.5), ("-.5", -0.5), ("08", 8), (".5e3", 500),
    ("2.0", 2), ("-0.0", 0), ("2.5", 2.5),                              # whole floats: encoding/json writes 2
    ("-9223372036854775809", -(2 ** 63)), ("18446744073709551616", 2 ** 64),  # past int64: a float64, written whole
    ("1e999", "1e999"), ("0x", "0x"), ("1e", "1e"), ("12:30", "12:30"), ("10Gi", "10Gi"), ("yes", True),
])
def test_plain_scalars_resolve_as_go_yaml_v2_resolves_them(scalar, expected):
    """What kubectl apply -f reads from a file as written (kustomize's output is already normalised: it quotes "y"
    and writes 1e3 as 1000, tests above)."""
    (m,) = parse(HEAD + f"spec:\n  v: {scalar}\n", "x.yaml")
    got = m.obj["spec"]["v"]
    assert got == expected and type(got) is type(expected), (scalar, got)


def test_a_key_go_yaml_reads_as_a_boolean_becomes_its_text():
    """sigs.k8s.io/yaml turns a boolean key into "true"/"false": a ConfigMap key `y` is the key "true"."""
    (m,) = parse(CM + "  y: a\n  N: b\n  o: c\n", "x.yaml")
    assert m.obj["data"] == {"true": "a", "false": "b", "o": "c"}


def test_a_whole_float_replica_count_is_the_pods_the_controller_makes(tmp_path):
    """`replicas: 2.0` (or 2e0) reaches the API server as 2: the model counts 2 pods, not its default of 1."""
    sts = ("apiVersion: v1\nkind: Service\nmetadata: {name: t}\nspec: {clusterIP: None, selector: {app: t}}\n---\n"
           "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: t}\nspec:\n  replicas: 2e0\n  serviceName: t\n"
           "  selector: {matchLabels: {app: t}}\n  template:\n    metadata: {labels: {app: t}}\n    spec:\n"
           "      containers:\n      - {name: t, image: 'x:1', command: [torchrun, --nnodes=3, --nproc-per-node=1, "
           "--rdzv-backend=c10d, '--rdzv-endpoint=t-0.t:29500', train.py]}\n")
    f = tmp_path / "sts.yaml"
    f.write_text(sts)
    proc = run_cli("validate", "--format", "json", str(f))
    [topo] = [p for p in json.loads(proc.stdout)["problems"] if p["rule"] == "TOPO001"]
    assert "statefulset creates 2 pods" in topo["message"], topo
