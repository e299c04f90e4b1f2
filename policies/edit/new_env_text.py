"""What a new environment's files say (`make new-env`, policies/edit/new_env.py): the request, the environment it is copied
from, and the rewriting of the copied text: the environment's and the hardware's names and sizes in comments and
descriptions, the component's node selection, toleration and GPU resource, and the environment's declaration."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import scale, scale_edits, yamledit
from .yamledit import EditError

@dataclass
class Request:
    env: str
    source: str
    nodes: int
    gpus: int | None
    procs: int | None
    gpu_name: str | None = None
    label: tuple[str, str] | None = None
    toleration: dict[str, str] | None = None
    resource: str | None = None
    cluster: str | None = None
    namespace: str | None = None
    launcher: str | None = None


@dataclass
class Source:
    """The environment copied from: its overlays make scale understands, their topology, its hardware's name."""

    env: str
    overlays: list[scale.Overlay]
    skipped: list[Path]
    current: dict[Path, scale.Current]
    word: str | None  # the hardware as FROM's comments name it (T4, H100), None on CPUs
    gpus: int  # per pod
    pods: int



# ---------------------------------------------------------------- text rewriting


def _case_like(old: str, new: str) -> str:
    return new.lower() if old.islower() else new.upper() if old.isupper() else new


class Words:
    """The substitutions every copied file gets: the environment's name, the hardware's name, and the sizes its
    comments state (nodes, GPUs per node, quantities that were scaled)."""

    def __init__(self, req: Request, src: Source, gpu: str | None, quantities: dict[str, str]):
        self.req, self.src, self.gpu, self.quantities = req, src, gpu, quantities
        # Settings (not comments) whose text the hardware's name changed: the user should look at them.
        self.settings: list[str] = []

    def env_names(self, text: str) -> str:
        text = text.replace(f"components/{self.src.env}", f"components/{self.req.env}")
        return re.sub(rf"(?<![\w-]){re.escape(self.src.env)}(?![\w-])", self.req.env, text)

    def hardware(self, text: str) -> str:
        gpu = self.gpu
        if not self.src.word or not gpu:
            return text
        return re.sub(rf"(?i)(?<![A-Za-z0-9]){re.escape(self.src.word)}(?![A-Za-z0-9])",
                      lambda m: _case_like(m.group(0), gpu), text)

    def comment(self, line: str, p: scale_edits.Plan) -> str:
        """A comment line's sizes: make scale's topology phrases, then FROM's node count and per-node GPU count
        where the comment states them, and the quantities that were scaled."""
        for pattern, repl in scale_edits.COMMENT_RULES:
            line = pattern.sub(lambda m: repl(p, m), line)  # called here, in this iteration
        src = self.src
        line = re.sub(rf"\b{src.pods} (nodes|pods)\b", lambda m: f"{p.nodes} {m.group(1)}", line)
        line = re.sub(rf"\b{src.pods} x ", f"{p.nodes} x ", line)
        if src.gpus and p.gpus:
            line = re.sub(rf"\b{src.pods * src.gpus} GPUs\b", f"{p.nodes * p.gpus} GPUs", line)
        if self.gpu and src.gpus == 1 and p.gpus != 1:
            line = re.sub(rf"\bone (NVIDIA |AMD )?{re.escape(self.gpu)}\b", lambda m: f"{p.gpus} {m.group(1) or ''}"
                          f"{self.gpu}s", line)
        for old, new in self.quantities.items():
            line = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w.])", new, line)
        return line

    def file(self, text: str, p: scale_edits.Plan, name: str = "") -> str:
        lines = []
        for line in self.env_names(text).splitlines(keepends=True):
            code, hash_, rest = line.partition("#")
            renamed = self.hardware(code)
            if renamed != code and renamed.strip():
                self.settings.append(f"{name}: {renamed.strip()} (was {code.strip()})")
            lines.append(renamed + hash_ + self.comment(self.hardware(rest), p) if hash_ else renamed)
        return "".join(lines)


# ---------------------------------------------------------------- the component


def _chunks(text: str) -> list[list[str]]:
    """A JSON-patch file's text cut into its operations, each with the comment lines above it (the first chunk may be
    a header alone)."""
    chunks: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if line.startswith("- ") and any(not ln.startswith("#") and ln.strip() for ln in chunks[-1]):
            comments: list[str] = []
            while chunks[-1] and chunks[-1][-1].startswith("#"):
                comments.insert(0, chunks[-1].pop())
            chunks.append(comments)
        chunks[-1].append(line)
    return chunks


def _value_block(value: Any) -> list[str]:
    import yaml

    body = yaml.safe_dump(value, default_flow_style=False, sort_keys=False, indent=2)
    return ["  value:\n"] + [f"    {ln}\n" for ln in body.splitlines()]  # `    - key: ...` as the repository writes it


def component_patch(path: Path, text: str, req: Request, p: scale_edits.Plan, notes: list[str],
                    same_hardware: bool = False) -> str:
    """Node selection, toleration and /dev/shm in one of the component's JSON patches, edited as text (its flow
    mappings stay as they are written). FROM's node selector stays where the new environment's GPU is FROM's own
    (h100-4x8 from 64x8-h100) and no GPU_LABEL replaces it; for other hardware it goes."""
    import yaml

    try:
        ops = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise EditError(f"{yamledit.rel(path)}: not valid YAML: {' '.join(str(exc).split())[:200]}") from None
    if not isinstance(ops, list):
        return text
    out: list[str] = []
    dropped = False
    for chunk in _chunks(text):
        body = "".join(ln for ln in chunk if not ln.startswith("#"))
        op = yaml.safe_load(body) if body.strip() else None
        op = op[0] if isinstance(op, list) and op and isinstance(op[0], dict) else None
        path_ = str(op.get("path", "")) if op else ""
        value = op.get("value") if op else None
        if path_.endswith("/nodeSelector") and isinstance(value, dict):
            if req.label is not None:
                chunk = _replace_value(chunk, {req.label[0]: req.label[1]})
            elif not same_hardware:  # FROM's GPU model names other hardware: no selector rather than a wrong one
                dropped = True
                continue
        elif path_.endswith("/tolerations") and isinstance(value, list) and req.toleration is not None:
            chunk = _replace_value(chunk, [dict(req.toleration)])
        elif isinstance(value, dict) and value.get("name") == "dshm" and p.ratio != 1 and \
                isinstance(value.get("emptyDir"), dict) and "sizeLimit" in value["emptyDir"]:
            new = scale_edits.scale_qty(value["emptyDir"]["sizeLimit"], p.ratio)
            chunk = [re.sub(r"(sizeLimit:\s*)([^,}\s]+)", lambda m: m.group(1) + new, ln) for ln in chunk]
        out += chunk
    if dropped and not any("node selector" in n for n in notes):
        notes.append("the accelerator node selector was left out (no GPU_LABEL given): the pods go to any node with "
                     f"{p.gpus} free GPUs; give GPU_LABEL=<key>=<value> to pin them to your GPU model")
    return "".join(out)


def _replace_value(chunk: list[str], value: Any) -> list[str]:
    """The chunk with its `value:` (and everything indented below it) replaced by `value`."""
    for i, line in enumerate(chunk):
        if line.startswith("  value:"):
            end = i + 1
            while end < len(chunk) and (chunk[end].startswith("    ") or not chunk[end].strip()):
                end += 1
            return chunk[:i] + _value_block(value) + chunk[end:]
    return chunk


def policy_text(text: str, req: Request, src: Source, p: scale_edits.Plan, gpu: str | None) -> str:
    """The environment's declaration: its name, GPUs per node, capacity, and `real: true`."""
    lines = text.splitlines(keepends=True)
    out = []
    what = f"{p.gpus} {gpu or 'GPU'} per node" if p.gpus else "CPU only"
    for line in lines:
        m = re.match(r"^(\s*)(gpusPerNode|gpuCapacity|largeJobPods|name):(\s*)(\S+)(\s*#.*)?$", line.rstrip("\n"))
        if m:
            indent, key, space, value, comment = m.groups()
            if key == "name" and value == src.env:
                value = req.env
            elif key == "gpusPerNode":
                value, comment = str(p.gpus), f"  # {what}"
            elif key == "gpuCapacity":
                value, comment = str(p.nodes * p.gpus), f"  # {p.nodes} nodes x {p.gpus}" if p.gpus else "  # CPU only"
            elif key == "largeJobPods" and value.isdigit() and int(value) >= src.pods:
                value = str(max(int(value), p.nodes))
                comment = f"  # above {value} pods a job needs gang admission (the whole pool: {p.nodes} nodes)"
            line = f"{indent}{key}:{space}{value}{comment or ''}\n"
        out.append(line)
    text = "".join(out)
    if not re.search(r"^\s+real:", text, re.M):
        text = re.sub(r"^(spec:\n)", "\\1  real: true                # a cluster you deploy to (rules ARGO010, IMG004)\n",
                      text, count=1, flags=re.M)
    return text


