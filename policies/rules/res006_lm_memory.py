"""A causal-LM fine-tune's weights, gradients and AdamW state fit the memory of the GPU its pods ask for.

The trainer's `causal-lm` task keeps float32 master weights (bf16 is autocast's), float32 gradients and AdamW's
two float32 moments: 16 bytes per parameter. Under `ddp` every GPU holds all of it; under `fsdp` (FSDP2) each GPU
holds its 1/world share. Activations come on top, so a model whose state alone exceeds the GPU cannot train at all:
every rank runs out of memory at its first step. The parameter count is the manifest's `MODEL_PARAMS` env (`7B`,
`125M`, `1.3e9`), the strategy `--strategy` or `STRATEGY` (default ddp), the GPU's memory the pods'
`nvidia.com/gpu.product` node selector (`NVIDIA-H100-80GB-HBM3`: 80 GB). Without `MODEL_PARAMS`, or with a GPU
product whose memory it cannot read, the rule says it could not run. FSDP needs no other topology than DDP:
the same torchrun world, with its sharded checkpoints on the /out PVC (RESTART004).

Fails: `MODEL_PARAMS=7B` with `STRATEGY=ddp` on H100 80GB pods (112 GB per GPU).
Passes: the same with `STRATEGY=fsdp` over 512 ranks (0.22 GB per GPU); `MODEL_PARAMS=1B` with ddp (16 GB).
"""
from __future__ import annotations

import re
from typing import Iterator

from ..kube.objects import INFO, WARNING, Problem
from ..model.topology import Topology
from .kit import Context, problem_at

ID = "RES006"
NAME = "lm-state-fits-gpu"
SEVERITY = WARNING
BYTES_PER_PARAM = 16  # float32 weights 4 + gradients 4 + AdamW exp_avg 4 + exp_avg_sq 4
GPU_PRODUCT = "nvidia.com/gpu.product"
KNOWN_GB = {"tesla-t4": 16, "nvidia-tesla-t4": 16, "nvidia-l4": 24, "nvidia-a10g": 24}
_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_params(text: str) -> float | None:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmbgt]?)\s*", str(text).lower())
    return float(m.group(1)) * _SUFFIX[m.group(2)] if m else None


def gpu_gb(product: str) -> float | None:
    m = re.search(r"(\d+)GB", product, re.IGNORECASE)
    return float(m.group(1)) if m else KNOWN_GB.get(product.lower())


def _arg(tokens: list[str], flag: str) -> str | None:
    for i, tok in enumerate(tokens):
        if tok.startswith(flag + "="):
            return tok.split("=", 1)[1]
        if tok == flag and i + 1 < len(tokens):
            return tokens[i + 1]
    return None


def _info(ctx: Context, t: Topology, field: str, message: str) -> Problem:
    return problem_at(ID, ctx, t, field, message, "set MODEL_PARAMS (e.g. 7B) in the pods' env and a "
                      f"{GPU_PRODUCT} node selector naming the GPU", severity=INFO)


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if not t.gpus:
            continue
        v = t.first
        pod = v.pod
        tokens = list(v.inv.script_args) if v.inv is not None else list(pod.argv()[0])
        task = _arg(tokens, "--task") or pod.env.get("TASK")
        if task != "causal-lm":
            continue
        raw = pod.env.get("MODEL_PARAMS")
        params = parse_params(raw) if raw is not None else None
        if params is None:
            yield _info(ctx, t, pod.container_field, "causal-lm task without a readable MODEL_PARAMS "
                        f"({raw!r}): its memory per GPU was not checked")
            continue
        product = str((pod.spec.get("nodeSelector") or {}).get(GPU_PRODUCT) or "")
        capacity = gpu_gb(product) if product else None
        if capacity is None:
            yield _info(ctx, t, f"{pod.spec_field}.nodeSelector", f"causal-lm task on a GPU of unknown memory "
                        f"({product or f'no {GPU_PRODUCT} node selector'}): its memory per GPU was not checked")
            continue
        strategy = _arg(tokens, "--strategy") or pod.env.get("STRATEGY") or "ddp"
        world = t.world_size or 1
        share = world if strategy == "fsdp" else 1
        need = BYTES_PER_PARAM * params / share / 1e9
        if need > capacity:
            fsdp_need = BYTES_PER_PARAM * params / world / 1e9
            hint = (f"use --strategy fsdp (STRATEGY=fsdp): {fsdp_need:.3g} GB per GPU over {world} ranks"
                    if strategy != "fsdp" and fsdp_need <= capacity else
                    "use more GPUs (FSDP shares the state over the world), or a smaller model")
            yield problem_at(ID, ctx, t, pod.env_fields.get("MODEL_PARAMS") or pod.container_field,
                             f"causal-lm with MODEL_PARAMS={raw} under {strategy}"
                             f"{f' over {world} ranks' if share > 1 else ''} needs {need:.3g} GB per GPU for "
                             f"weights, gradients and AdamW state ({BYTES_PER_PARAM} bytes x {params:.3g} "
                             f"parameters{f' / {world}' if share > 1 else ''}) before activations; {product} has "
                             f"{capacity:g} GB", hint)
