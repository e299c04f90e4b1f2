"""A Job-based world fails as a whole: `restartPolicy: Never`, a bounded `backoffLimit`, a `podFailurePolicy`.

A torchrun world cannot take back one member. When one pod of an Indexed Job fails, the Job controller re-creates
that index alone (up to `backoffLimit` times, 6 when unset) and `restartPolicy: OnFailure` restarts the container in
place: either way the other ranks hang in their collectives until NCCL's timeout, then fail in turn.
`backoffLimitPerIndex` retries single indexes by design. So: `restartPolicy: Never`, `backoffLimit` written
down, and a `podFailurePolicy` whose `FailJob` rule ends the Job on a training error (restart the whole gang from a
level above: JobSet `failurePolicy.maxRestarts`, Argo CD, a person). Applies to Indexed Jobs, JobSet replicated
Jobs and a TrainJob runtime's Jobs (JobSet defaults their `restartPolicy` to OnFailure). With `backoffLimit: 0`
a missing policy or OnFailure is a warning: the first failure already ends the Job. Under torchrun a pre-empted or
evicted pod exits 1, not 143: torchrun's agent turns the SIGTERM into a SignalException and ends with it (torch
v2.13.0 `torch/distributed/elastic/multiprocessing/api.py` line 86, re-raised at `launcher/api.py` line 397; measured:
exit 1), so a rule keyed on exit code 143 never matches one; match `onPodConditions` `DisruptionTarget` instead.

Fails: `backoffLimit: 3` without a `podFailurePolicy`; `restartPolicy: OnFailure` with `backoffLimit: 2`;
`backoffLimitPerIndex: 1`; no `backoffLimit`; an `Ignore` rule on exit code 143 in front of torchrun.
Passes: `restartPolicy: Never`, `backoffLimit: 0` and a `podFailurePolicy` with `action: FailJob` on the
trainer's exit codes.
"""
from __future__ import annotations

from typing import Any, Iterator

from ..kube.objects import WARNING, Manifest, Problem
from .kit import Context, obj_problem

ID = "RESTART001"
NAME = "job-fails-as-a-whole"
SEVERITY = WARNING
DEFAULT_BACKOFF = 6


# What a SIGTERM leaves as a container's exit code where the process itself ends by it: 128 + 15.
SIGTERM_EXIT = 143


def sigterm_codes(owner: Manifest, field: str, js: dict[str, Any]) -> Iterator[Problem]:
    """podFailurePolicy rules that match exit code 143 on a container that starts torchrun, which exits 1 instead."""
    for i, rule in enumerate((js.get("podFailurePolicy") or {}).get("rules") or []):
        codes = rule.get("onExitCodes") if isinstance(rule, dict) else None
        if isinstance(codes, dict) and codes.get("operator") == "In" and SIGTERM_EXIT in (codes.get("values") or []):
            yield obj_problem(ID, owner, f"{field}.podFailurePolicy.rules[{i}].onExitCodes", f"rule {i} "
                              f"({rule.get('action')}) matches exit code {SIGTERM_EXIT} (a SIGTERM), but the container "
                              "starts torchrun, which exits 1 when a pre-emption or an eviction stops it: the rule "
                              "never matches one", "match the pod condition: onPodConditions [{type: DisruptionTarget}]",
                              severity=WARNING)


def check(ctx: Context) -> Iterator[Problem]:
    done = set()
    for t in ctx.topologies:
        jobs = t.workload.launcher.jobs(t.workload)
        if jobs is None or t.pods <= 1 or jobs[0].ref in done:
            continue
        owner, sites, default_policy = jobs
        done.add(owner.ref)
        for field, js in sites:
            if t.agent:
                yield from sigterm_codes(owner, field, js)
            pod_spec = ((js.get("template") or {}).get("spec")) or {}
            backoff = js.get("backoffLimit")
            retries = backoff if isinstance(backoff, int) else DEFAULT_BACKOFF
            policy = pod_spec.get("restartPolicy") or default_policy
            if js.get("backoffLimitPerIndex") is not None:
                yield obj_problem(ID, owner, f"{field}.backoffLimitPerIndex", "backoffLimitPerIndex retries one "
                                  "index alone while the other ranks wait in their collectives",
                                  "remove it; use backoffLimit: 0 and restart the whole gang from above")
            if policy == "OnFailure":
                where = f"{field}.template.spec.restartPolicy"
                note = " (JobSet's default)" if not pod_spec.get("restartPolicy") else ""
                yield obj_problem(ID, owner, where, f"restartPolicy is OnFailure{note}: the kubelet restarts a "
                                  "failed rank in place, alone" + (f", up to {retries} times" if retries else ""),
                                  "set restartPolicy: Never", severity=WARNING)
            if backoff is None:
                yield obj_problem(ID, owner, f"{field}.backoffLimit", f"backoffLimit is unset: a failed pod is "
                                  f"re-created alone up to {DEFAULT_BACKOFF} times while the others hang",
                                  "set backoffLimit: 0 (or bound it and add a podFailurePolicy with FailJob)")
            pfp = js.get("podFailurePolicy")
            rules = (pfp or {}).get("rules") or [] if isinstance(pfp, dict) else []
            fail_job = any(isinstance(r, dict) and r.get("action") == "FailJob" and r.get("onExitCodes")
                           for r in rules)
            if not pfp:
                if backoff is not None:
                    yield obj_problem(ID, owner, f"{field}.podFailurePolicy",
                                      "no podFailurePolicy" + (f": a failed pod is re-created alone up to {retries} "
                                                               "times while the others hang" if retries else
                                                               ": every failure, preemption included, ends the run "
                                                               "as BackoffLimitExceeded with no reason given"),
                                      "add podFailurePolicy rules: FailJob onExitCodes of the trainer (NotIn [0]), "
                                      "Ignore onPodConditions DisruptionTarget", severity=WARNING)
            elif not fail_job and retries:
                yield obj_problem(ID, owner, f"{field}.podFailurePolicy.rules", "podFailurePolicy has no FailJob rule "
                                  f"on exit codes: a failed rank is still retried alone up to {retries} times",
                                  "add a rule with action: FailJob and onExitCodes {operator: NotIn, values: [0]}")
