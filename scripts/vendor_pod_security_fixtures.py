"""Vendor Pod Security Admission's pod fixtures (k8s.io/pod-security-admission, test/testdata at a tag) into
tests/fixtures/pod-security/upstream-fixtures.json, deduplicated: each distinct pod once (its metadata.name, which is the
fixture's own name, left out), and an index of (level, version, pass|fail, name) -> pod.

    .venv/bin/python scripts/vendor_pod_security_fixtures.py /path/to/pod-security-admission.git
    .venv/bin/python scripts/vendor_pod_security_fixtures.py MIRROR --tag v0.36.0 --out PATH

MIRROR is a git repository (bare or not) of kubernetes/pod-security-admission holding the tag. Beside the pods it
records, per check, the substring upstream's test/run.go expects in a refused fail fixture's message
(fixtureGenerator.expectErrorSubstring, else the check ID: test/fixtures.go:266-268); the table below is checked
against the literals in test/fixtures_*.go at the tag, and the script fails where they differ.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = "kubernetes/pod-security-admission"
TESTDATA = "test/testdata"
OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "pod-security" / "upstream-fixtures.json"

# check ID -> (the test/fixtures_*.go file that registers its generators, expectErrorSubstring or None for the ID)
EXPECT = {
    "allowPrivilegeEscalation": ("allowPrivilegeEscalation", None),
    "appArmorProfile": ("appArmorProfile", "forbidden AppArmor profile"),
    "capabilities_baseline": ("capabilities_baseline", "capabilities"),
    "capabilities_restricted": ("capabilities_restricted", "unrestricted capabilities"),
    "hostNamespaces": ("hostNamespaces", "host namespaces"),
    "hostPathVolumes": ("hostPathVolumes", "hostPath"),
    "hostPorts": ("hostPorts", "hostPort"),
    "hostProbesAndHostLifecycle": ("hostProbesAndHostLifecycle", "probe or lifecycle host"),
    "privileged": ("privileged", None),
    "procMount": ("procMount", "procMount"),
    "procMount_restricted": ("procMount", "procMount"),
    "restrictedVolumes": ("restrictedVolumes", "restricted volume types"),
    "runAsNonRoot": ("runAsNonRoot", None),
    "runAsUser": ("runAsUser", None),
    "seLinuxOptions": ("seLinuxOptions", "seLinuxOptions"),
    "seccompProfile_baseline": ("seccompProfile_baseline", "seccompProfile"),
    "seccompProfile_restricted": ("seccompProfile_restricted", "seccompProfile"),
    "sysctls": ("sysctls", "forbidden sysctl"),
    "windowsHostProcess": ("windowsHostProcess", "hostProcess"),
}


def git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", "-C", mirror, *args], check=True, capture_output=True, text=True).stdout


def check_expectations(mirror: str, tag: str) -> None:
    """Every expectErrorSubstring literal in a fixtures file is one the table gives that file's checks, and back."""
    files = {f for f, _ in EXPECT.values()}
    listed = {p.rsplit("/", 1)[1][len("fixtures_"):-3] for p in git(mirror, "ls-tree", "--name-only", tag, "test/")
              .split() if re.fullmatch(r"test/fixtures_\w+\.go", p) and not p.endswith("_test.go")}
    if listed != files:
        sys.exit(f"fixtures files differ from the table: {sorted(listed ^ files)}")
    for name in files:
        text = git(mirror, "show", f"{tag}:test/fixtures_{name}.go")
        found = set(re.findall(r'expectErrorSubstring:\s*"([^"]*)"', text))
        want = {s for f, s in EXPECT.values() if f == name and s is not None}
        if found != want:
            sys.exit(f"test/fixtures_{name}.go: expectErrorSubstring {sorted(found)}, the table says {sorted(want)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mirror")
    ap.add_argument("--tag", default="v0.36.0")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    commit = git(args.mirror, "rev-parse", f"{args.tag}^{{commit}}").strip()
    check_expectations(args.mirror, args.tag)
    entries = [line.split("\t", 1) for line in git(args.mirror, "ls-tree", "-r", args.tag, TESTDATA).splitlines()]
    blobs = {path: meta.split()[2] for meta, path in entries if path.endswith(".yaml")}
    batch = subprocess.run(["git", "-C", args.mirror, "cat-file", "--batch"], check=True, capture_output=True,
                           input="".join(f"{b}\n" for b in blobs.values()).encode()).stdout
    texts: dict[str, str] = {}
    pos = 0
    for sha in blobs.values():
        header_end = batch.index(b"\n", pos)
        size = int(batch[pos:header_end].split()[2])
        texts[sha] = batch[header_end + 1:header_end + 1 + size].decode()
        pos = header_end + 1 + size + 1
    bodies: list[str] = []
    ids: dict[str, int] = {}
    cases: dict[str, dict[str, int]] = {}
    for path in sorted(blobs, key=lambda p: (p.split("/")[2], int(p.split("/")[3][3:]), p.split("/")[4],
                                             p.split("/")[5])):
        level, version, outcome, filename = path.split("/")[2:]
        pod = yaml.safe_load(texts[blobs[path]])
        name = filename[:-len(".yaml")]
        if pod.get("metadata", {}).get("name") != name:
            sys.exit(f"{path}: metadata.name is not {name}")
        del pod["metadata"]["name"]
        body = json.dumps(pod, sort_keys=True, separators=(",", ":"))
        if body not in ids:
            ids[body] = len(bodies)
            bodies.append(body)
        cases.setdefault(f"{level}/{version}/{outcome}", {})[name] = ids[body]
    header = {
        "repo": REPO, "tag": args.tag, "commit": commit, "path": TESTDATA,
        "note": "each pod once, metadata.name (the fixture's name) left out; cases: {'level/version/pass|fail': "
                "{name: pod index}}; expect_error_substring: what test/run.go expects in a fail fixture's refusal",
        "regenerate": f"python scripts/vendor_pod_security_fixtures.py MIRROR --tag {args.tag}",
    }
    expect = {check: (s if s is not None else check) for check, (_, s) in sorted(EXPECT.items())}
    out = ('{\n"source": ' + json.dumps(header, sort_keys=True) + ',\n"expect_error_substring": '
           + json.dumps(expect, sort_keys=True) + ',\n"pods": [\n' + ",\n".join(bodies) + '\n],\n"cases": {\n'
           + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in cases.items())
           + "\n}\n}\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(out)
    print(f"{args.out}: {sum(map(len, cases.values()))} cases, {len(bodies)} distinct pods, {len(out)} bytes")


if __name__ == "__main__":
    main()
