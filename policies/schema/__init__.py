"""Schema stage: check every rendered object strictly against the committed JSON schemas in schemas/.

Two validators read the same files behind one interface (validator.py): jsonschema-rs in-process (builtin.py, the
default) and kubeconform (kubeconform.py); `make_validator` chooses. lookup.py finds an object's schema, messages.py
turns a validator's errors into Problems.

Rules:
- `SCHEMA`: the object does not match its schema (unknown field, wrong type, missing required field, bad enum value),
  or has neither a name nor a generateName (the API server validates every object's metadata).
- `SCHEMA-MISSING`: no schema for the object's apiVersion and kind.
- `SCHEMA-INPUT`: the object has no apiVersion or no kind, so no schema can be chosen.
- `SCHEMA-NOT-RUN`: the check could not run for the object (validator missing, crashed, reported nothing for it);
  at info severity, a CRD validation rule that could not be evaluated here (cel.py).
- `SCHEMA-CEL`: the object fails one of its CRD's own rules (`x-kubernetes-validations`), which the API server
  evaluates at admission (cel.py); checked with either validator, on objects without SCHEMA errors (the API server
  does not run the rules of an object its schema already refuses).
- `SCHEMA-CEL-COST` (warning): an upper bound of a rule's runtime cost on the object (cel_cost.py, cel-go's
  estimator on the object's sizes) is past the API server's per-call limit, or the bounds of all its rules are past
  its per-object budget: the API server may refuse the object. A rule bounded past the whole budget is not evaluated
  (SCHEMA-NOT-RUN, info).

Passing (Job):  `spec.template.spec.containers: [{name: t, image: i, imagePullPolicy: Always}]`
Failing (Job):  `imagePullPolice: Always` ->
  `error SCHEMA overlays/x: Job/ns/n spec.template.spec.containers[0].imagePullPolice: Additional properties are not
  allowed ('imagePullPolice' was unexpected) (fix: did you mean "imagePullPolicy"?)`
"""
from __future__ import annotations

import subprocess

from ..kube.objects import Manifest, Problem
from .builtin import BuiltinValidator, installed_version
from .cel import RULE_CEL, RULE_CEL_COST, evaluate_manifests
from .cel_transition import Transition, has_transition_rules, transition_problems
from .kubeconform import KubeconformValidator, find_kubeconform, kubeconform_message_errors
from .lookup import (MAX_ERRORS_PER_OBJECT, MAX_MESSAGE, RULE, RULE_INPUT, RULE_MISSING, RULE_NOT_RUN, SCHEMAS_DIR,
                     find_schema, kubernetes_version)
from .messages import as_applied, dotted, one_line
from .validator import Validator, ValidatorUnavailable


def make_validator(prefer: str = "auto") -> Validator:
    """`auto`: kubeconform if installed, else jsonschema-rs; `kubeconform`: kubeconform or ValidatorUnavailable;
    `builtin`: jsonschema-rs. `validator.name` says which one runs."""
    if prefer == "builtin":
        return BuiltinValidator()
    if prefer not in ("auto", "kubeconform"):
        raise ValueError(f"unknown validator {prefer!r}: choose auto, kubeconform or builtin")
    binary = find_kubeconform()
    if binary is None:
        if prefer == "kubeconform":
            raise ValidatorUnavailable("kubeconform not found ($KUBECONFORM, bin/, PATH): run make setup, "
                                       "or choose the builtin validator")
        return BuiltinValidator()
    try:
        return KubeconformValidator(binary)
    except (OSError, subprocess.SubprocessError, ValidatorUnavailable) as e:
        if prefer == "kubeconform":
            raise ValidatorUnavailable(f"kubeconform at {binary} does not run: {e}") from e
        fallback = BuiltinValidator()
        fallback.name += f"; kubeconform at {binary} does not run: {one_line(str(e))}"
        return fallback


def crd_rules(manifests: list[Manifest], found: list[Problem]) -> list[Problem]:
    """The CRD rules' problems (cel.py) of the manifests, in their order after the validator's `found`, skipping the
    objects `found` already gives a SCHEMA error (the API server's hasBlockingErr skips their rules too)."""
    from ..launchers import as_admitted

    refused = {p.obj for p in found if p.rule == RULE}
    # (evaluate_schema fills in the CRD's defaults itself, as as_validated does for the validators)
    extra = evaluate_manifests((m, as_applied(as_admitted(m))) for m in manifests
                               if isinstance(m.obj, dict) and m.ref not in refused)
    if not extra:
        return found
    order = {m.ref: i for i, m in reversed(list(enumerate(manifests)))}
    merged = [(order.get(p.obj or "", len(manifests)), n, p) for n, p in enumerate(found + extra)]
    return [p for _, _, p in sorted(merged, key=lambda t: (t[0], t[1]))]


__all__ = ["BuiltinValidator", "KubeconformValidator", "MAX_ERRORS_PER_OBJECT", "MAX_MESSAGE", "RULE", "RULE_INPUT",
           "RULE_CEL", "RULE_CEL_COST", "RULE_MISSING", "RULE_NOT_RUN", "crd_rules", "has_transition_rules",
           "Transition", "transition_problems", "SCHEMAS_DIR", "Validator", "ValidatorUnavailable", "as_applied", "dotted",
           "find_kubeconform", "find_schema", "installed_version", "kubeconform_message_errors", "kubernetes_version",
           "make_validator", "one_line"]
