"""Large jobs set their rendezvous timeout explicitly.

On a large overlay the last pods may start minutes after the first (image pulls on many nodes, a gang admitted
late). torchrun waits `join_timeout` (c10d, etcd; default 600 s) or `timeout` (static; default 900 s) and then
fails with a RendezvousTimeoutError. Set it in `--rdzv-conf` (or `PET_RDZV_CONF`) for the backend in use, sized
for the environment. Large means more pods than the environment's `largeJobPods` (16 where no environment
declares one). The key must be the one the backend reads: static ignores `join_timeout`, c10d ignores `timeout`.

Fails: 64 pods with static rendezvous and no `--rdzv-conf`; c10d with `--rdzv-conf=timeout=1800`.
Passes: `PET_RDZV_CONF=timeout=1800,join_timeout=1800` on 64 pods; any job of 16 pods or fewer.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import ERROR, WARNING, Problem
from .kit import Context, env_problem, problem

ID = "RDZV003"
NAME = "explicit-rdzv-timeout"
NEEDS = "largeJobPods"  # from the environment's declaration (16 without one)
SEVERITY = WARNING
DEFAULT_LARGE = 16


def parse_conf(value: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in value.split(","):
        key, sep, val = item.partition("=")
        if sep and key.strip():
            out[key.strip()] = val.strip()
    return out


def check(ctx: Context) -> Iterator[Problem]:
    large = ctx.env.large_job_pods if ctx.env and ctx.env.large_job_pods is not None else DEFAULT_LARGE
    for t in ctx.topologies:
        if not t.agent or t.pods <= large or t.backend.startswith("c10d (standalone)"):
            continue
        v = t.first
        assert v.inv is not None, "t.agent: pod 0 has an invocation (Topology.agent checks first_view.inv)"
        s = v.inv.setting("rdzv_conf", v.pod.env, v.pod.env_fields)
        where = s.field or v.inv.field
        conf = parse_conf(s.value)
        key = "timeout" if t.backend == "static" else "join_timeout"
        other = "join_timeout" if key == "timeout" else "timeout"
        if key in conf:
            if not conf[key].isdigit():
                yield problem(ID, t, where, f"rendezvous {key} is '{conf[key]}', not a number of seconds",
                              f"write {key}=<seconds>", severity=ERROR)
            continue
        why = (f"the conf sets only {other}, which the {t.backend} backend does not read" if other in conf
               else f"torchrun's default of {'900' if key == 'timeout' else '600'} s applies")
        message = f"{t.pods} pods (large above {large}) and no rendezvous {key}: {why}"
        hint = f"set --rdzv-conf={key}=<seconds> (or PET_RDZV_CONF) sized for the slowest pod start"
        if s.origin == "env":
            yield env_problem(ID, ctx, t, v.pod, "PET_RDZV_CONF", message, hint, severity=WARNING)
        else:
            yield problem(ID, t, where, message, hint, severity=WARNING)
