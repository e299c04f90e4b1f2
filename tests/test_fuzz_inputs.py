"""Fuzz the validator with a few hundred generated hostile inputs in one folder, validated by one CLI run under an
address-space and CPU limit: YAML alias bombs and self-references, deep nesting (flow, block, JSON, through
aliases), huge and aliased scalars, bytes that are not UTF-8, binary, NUL and control characters, mangled
manifests, tags without a JSON form, thousands of empty documents, symlinks (loops, dangling, to a device or a
FIFO), FIFOs and sockets. Every input must come out as lines of the report (the ones the loader refuses as exactly
one line, naming the file and saying why), with no traceback, within the memory limit."""
from __future__ import annotations

import os
import random
import re
import resource
import socket
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES, REPO

SEED = 15
MEMORY_LIMIT = 1_500_000_000  # bytes of address space for the whole run
CPU_LIMIT_S = 240  # a hang guard, not a speed target (make bench measures speed)
# Argo CD's rule fixtures are left out: an Application renders the folder it names, whose problems are that folder's,
# not the fuzzed file's.
MANIFESTS = sorted((FIXTURES / "upstream/runs-as-written").glob("*.yaml")) + [
    p for p in sorted((FIXTURES / "rules").glob("*/fail/*.yaml")) if not p.parent.parent.name.startswith("ARGO")][:40]

HARNESS = """
import resource, sys
from policies.cli import main
rc = main(sys.argv[1:])
sys.stdout.flush()
print(f"peak_rss_kib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}", file=sys.stderr)
sys.exit(rc)
"""


def _laughs(rng: random.Random, levels: int, fanout: int, merge: bool = False) -> str:
    out = ["apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: b{rng.randrange(10**6)}", "data:"]
    if merge:
        out.append("  m0: &a0 {k: v, j: w}")
        out += [f"  m{i}: &a{i} {{<<: [" + ", ".join([f"*a{i - 1}"] * fanout) + f"], k{i}: [" +
                ", ".join([f"*a{i - 1}"] * fanout) + "]}" for i in range(1, levels)]
    else:
        out.append("  l0: &a0 [" + ",".join(["lol"] * fanout) + "]")
        out += [f"  l{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * fanout) + "]" for i in range(1, levels)]
    return "\n".join(out) + "\n"


def _deep(rng: random.Random, style: str, depth: int) -> str:
    if style == "flow-seq":
        return "[" * depth + "]" * depth
    if style == "flow-map":
        return "{a: " * depth + "1" + "}" * depth
    if style == "block-seq":
        return "- " * depth + "x\n"
    if style == "block-map":
        return "".join(f"{' ' * i}k{i}:\n" for i in range(depth)) + " " * depth + "v\n"
    if style == "json":
        return '{"a":' * depth + "1" + "}" * depth
    # through aliases: each level nests the previous anchor inside a few more levels
    lines, step = [], 40
    lines.append("a0: &a0 " + "[" * step + "]" * step)
    for i in range(1, depth // step + 2):
        lines.append(f"a{i}: &a{i} " + "[" * step + f"*a{i - 1}" + "]" * step)
    return "\n".join(lines) + "\n"


def _mangle(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 6)):
        op, at = rng.randrange(7), rng.randrange(max(1, len(chars)))
        if op == 0:
            del chars[at:at + rng.randint(1, 40)]
        elif op == 1:
            chars.insert(at, rng.choice([":", "[", "{", "]", "}", "-", "&x ", "*x", "!!", "\t", "'", '"', "#", "|", "?"]))
        elif op == 2:
            chars[at:at] = list("\n" + " " * rng.randint(0, 9))
        elif op == 3:
            chars[at:at] = list(rng.choice(["<<: *x\n", "---\n", "...\n", "%YAML 1.1\n", "~\n", "null: x\n"]))
        elif op == 4:
            chars[at:at] = list(str(rng.choice([10**400, -1, 1e308, "0x1F", "1e999", ".inf", "NaN", "09"])))
        elif op == 5:
            lines = "".join(chars).splitlines(keepends=True)
            if lines:
                i = rng.randrange(len(lines))
                lines.insert(i, lines[i])
            chars = list("".join(lines))
        else:
            chars[at:at] = list(chr(rng.choice([0x85, 0x2028, 0xFEFF, 0x1F600, 0xE9])))
    return "".join(chars)


def generate(folder: Path) -> dict[str, str | None]:
    """Write the inputs; return file name -> what its one INPUT line must say (None: any report, as long as it
    is made of report lines)."""
    rng = random.Random(SEED)
    expect: dict[str, str | None] = {}
    manifests = [m.read_text() for m in MANIFESTS]

    def put(name: str, data: str | bytes, what: str | None) -> None:
        path = folder / name
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        expect[name] = what

    for i in range(30):
        put(f"bomb-{i:02d}.yaml", _laughs(rng, rng.randint(6, 9), rng.randint(8, 12)), "excessive aliasing")
    for i in range(8):
        put(f"merge-bomb-{i:02d}.yaml", _laughs(rng, rng.randint(6, 8), rng.randint(8, 10), merge=True),
            "excessive aliasing")
    for i, text in enumerate(["a: &x [*x]\n", "a: &x {b: *x}\n", "a: &x {b: [1, {c: *x}]}\n", "- &x [a, [b, *x]]\n",
                              "a: &x\n  b: &y\n    c: *x\n", "&x [*x]\n"]):
        put(f"self-{i}.yaml", text, "contains an alias to itself")
    styles = ["flow-seq", "flow-map", "block-seq", "block-map", "json", "aliases"]
    for i in range(36):
        style = styles[i % len(styles)]
        depth = rng.choice([257, 300, 1000, 5000, 20000, 100000]) if style not in ("block-map", "aliases") else \
            rng.choice([257, 400, 1200])
        put(f"deep-{i:02d}.{'json' if style == 'json' else 'yaml'}", _deep(rng, style, depth), "deeper than 256 levels")
    for i in range(3):
        put(f"huge-scalar-{i}.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: h\ndata:\n  k: " +
            "x" * (3 * 1024 * 1024 + rng.randint(1, 5000)) + "\n", "holds more than 3 MiB")
    for i in range(5):
        put(f"aliased-scalar-{i}.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: h\ndata:\n  k: &s " +
            "y" * (256 * 1024) + "\n  l: [" + ", ".join(["*s"] * (13 + i)) + "]\n", "expands to more than 3 MiB")
    for i in range(40):
        base = rng.choice(manifests).encode()
        at = rng.randrange(len(base))
        put(f"not-utf8-{i:02d}.yaml", base[:at] + bytes([rng.choice([0x80, 0xBF, 0xC0, 0xFF, 0xFE, 0xED])]) +
            base[at:], "not UTF-8 text")
    for i in range(40):
        put(f"binary-{i:02d}.{rng.choice(['yaml', 'yml', 'json'])}", b"\xff" + rng.randbytes(rng.randint(1, 4096)),
            "not UTF-8 text")
    for i in range(25):
        base = rng.choice(manifests)
        at = rng.randrange(len(base))
        put(f"nul-{i:02d}.yaml", base[:at] + "\x00" * rng.randint(1, 3) + base[at:], "invalid YAML")
    for i in range(10):
        base = rng.choice(manifests)
        at = rng.randrange(len(base))
        put(f"control-{i:02d}.yaml", base[:at] + chr(rng.choice([1, 7, 8, 0x0B, 0x1B, 0x7F])) + base[at:],
            "invalid YAML")
    for i in range(110):
        put(f"mangled-{i:03d}.yaml", _mangle(rng, rng.choice(manifests)), None)
    for i, (text, what) in enumerate([("a: !!python/object:os.system x\n", "invalid YAML"),
                                      ("a: !!set {x, y}\n", "has no JSON form"),
                                      ("a: !!binary gA==\n", "is not UTF-8 text"),
                                      ("? [a, b]\n: c\n", "as a mapping key"),
                                      ("a: 1\na: 2\n", "duplicate key")]):
        put(f"tag-{i}.yaml", text, what)
    put("empty-docs.yaml", "---\n" * 20_000, None)
    put("many-keys.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: k\ndata:\n" +
        "".join(f"  k{i}: v\n" for i in range(10_000)), None)
    put("long-key.json", '{"' + "k" * 2_000_000 + '": 1}', None)

    links = {"loop.yaml": "loop.yaml", "cycle-a.yaml": "cycle-b.yaml", "cycle-b.yaml": "cycle-a.yaml",
             "dangling.yaml": "nowhere/x.yaml", "zero.yaml": "/dev/zero", "to-fifo.yaml": "fifo.yaml"}
    for name, target in links.items():
        (folder / name).symlink_to(target)
    expect.update({"loop.yaml": "a symlink loop", "cycle-a.yaml": "a symlink loop", "cycle-b.yaml": "a symlink loop",
                   "dangling.yaml": "which does not exist", "zero.yaml": "a device, not a regular file",
                   "to-fifo.yaml": "a FIFO, not a regular file"})
    os.mkfifo(folder / "fifo.yaml")
    expect["fifo.yaml"] = "a FIFO, not a regular file"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "socket.yaml"))
    sock.close()
    expect["socket.yaml"] = "a socket, not a regular file"
    return expect


def test_fuzzed_hostile_inputs_are_one_line_each_within_bounds(tmp_path):
    folder = tmp_path / "hostile"
    folder.mkdir()
    expect = generate(folder)
    assert len(expect) >= 300

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT_S, CPU_LIMIT_S))

    proc = subprocess.run([sys.executable, "-c", HARNESS, "validate", "--schema", "builtin", str(folder)], cwd=REPO,
                          capture_output=True, timeout=600, preexec_fn=limit)
    out, err = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
    assert "Traceback" not in out + err and "internal error" not in err, err[-3000:]
    assert proc.returncode == 1, (proc.returncode, err[-2000:])
    *lines, summary = out.splitlines()
    # Every file is a unit: checked, or skipped as no Kubernetes manifest at all (the 2 MB key's JSON, for one).
    counted = re.match(r"FAILED: (\d+) files(?: \((\d+) files? skipped: not Kubernetes\))?, ", summary)
    assert counted and int(counted[1]) + int(counted[2] or 0) == len(expect), summary
    by_file: dict[str, list[str]] = {}
    for line in lines:
        if line.startswith("recovery "):  # what a workload that read survives (not a problem)
            continue
        assert line.split(" ", 1)[0] in ("error", "warning", "info", "suppressed"), line
        source = line.split(" ", 2)[2]
        name = next((n for n in expect if source.startswith(f"{folder / n}:") or source.startswith(f"{folder / n} ")),
                    None)
        assert name is not None, line
        by_file.setdefault(name, []).append(line)
    for name, what in expect.items():
        if what is None:
            continue
        got = by_file.get(name, [])
        assert len(got) == 1 and got[0].startswith(f"error INPUT {folder / name}") and what in got[0], (name, got)
    peak_kib = int(err.rsplit("peak_rss_kib=", 1)[1].split()[0])
    assert peak_kib * 1024 < MEMORY_LIMIT
