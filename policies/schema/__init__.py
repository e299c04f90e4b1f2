"""Schema stage: check every rendered object strictly against the committed JSON schemas in schemas/.

Two validators read the same files behind one interface (validator.py): jsonschema-rs in-process (builtin.py, the
default) and kubeconform (kubeconform.py); `make_validator` chooses. lookup.py finds an object's schema, messages.py
turns a validator's errors into Problems.

Rules:
- `SCHEMA`: the object does not match its schema (unknown field, wrong type, missing required field, bad enum value).
- `SCHEMA-MISSING`: no schema for the object's apiVersion and kind.
- `SCHEMA-INPUT`: the object has no apiVersion or no kind, so no schema can be chosen.
- `SCHEMA-NOT-RUN`: the check could not run for the object (validator missing, crashed, reported nothing for it).

Passing (Job):  `spec.template.spec.containers: [{name: t, image: i, imagePullPolicy: Always}]`
Failing (Job):  `imagePullPolice: Always` ->
  `error SCHEMA overlays/x: Job/ns/n spec.template.spec.containers[0].imagePullPolice: Additional properties are not
  allowed ('imagePullPolice' was unexpected) (fix: did you mean "imagePullPolicy"?)`
"""
from __future__ import annotations

import subprocess

from .builtin import BuiltinValidator, installed_version
from .kubeconform import KubeconformValidator, find_kubeconform, kubeconform_message_errors
from .lookup import MAX_ERRORS_PER_OBJECT, MAX_MESSAGE, RULE, RULE_INPUT, RULE_MISSING, RULE_NOT_RUN, SCHEMAS_DIR, \
    find_schema, kubernetes_version
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


__all__ = ["BuiltinValidator", "KubeconformValidator", "MAX_ERRORS_PER_OBJECT", "MAX_MESSAGE", "RULE", "RULE_INPUT",
           "RULE_MISSING", "RULE_NOT_RUN", "SCHEMAS_DIR", "Validator", "ValidatorUnavailable", "as_applied", "dotted",
           "find_kubeconform", "find_schema", "installed_version", "kubeconform_message_errors", "kubernetes_version",
           "make_validator", "one_line"]
