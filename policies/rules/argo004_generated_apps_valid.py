"""An ApplicationSet can be expanded here, and every Application it generates is valid against the Application CRD.

The schema stage checks the ApplicationSet as written, but its template only becomes an Application once the
generator's values are filled in; a value of the wrong type, or a template key missing from an element
(`goTemplateOptions: [missingkey=error]` makes Argo CD refuse the whole set), only shows then. This rule fills in
each element of the list generators (`{{.key}}` with `goTemplate`, else `{{key}}`) and validates the result
against the pinned Application schema (schemas/crds/argoproj.io). Other generators, `templatePatch` and template
expressions beyond a plain key cannot be expanded statically: a warning says so, and the other ARGO rules then
cannot see those Applications.

Fails: a template `path: "overlays/{{.env}}/{{.launcher}}"` with an element that has no `launcher`; a template
whose `syncPolicy.retry.limit` is `"{{.retries}}"` (a string where the CRD wants an integer).
Passes: the repository's argocd/applicationset.yaml.
"""
from __future__ import annotations

from typing import Any, Iterator

from ..kube.objects import WARNING, Manifest, Problem
from .kit import Context, obj_problem

ID = "ARGO004"
NAME = "generated-apps-valid"
# Only Applications (written out or generated) are read: other overlays skip the rule.
KINDS = ("Application", "ApplicationSet")
_VALIDATOR: list[Any] = []


def _validator() -> Any:
    if not _VALIDATOR:
        from ..schema import BuiltinValidator

        _VALIDATOR.append(BuiltinValidator())
    return _VALIDATOR[0]


def check(ctx: Context) -> Iterator[Problem]:
    apps, failed = ctx.argo.apps, ctx.argo.failed
    for m, why in failed:
        where, sep, text = why.partition(": ")
        field = where if sep and where.startswith("spec.") else "spec.generators"
        severity = WARNING if "only list generators" in why or "not expanded here" in why \
            or "more than a plain key" in why else None
        if severity:
            yield obj_problem(ID, m, field, f"cannot be expanded here: {text if sep else why}; the ARGO rules do not "
                              "see its Applications", "use a list generator with plain {{.key}} values, or check "
                              "the generated Applications another way", severity=WARNING)
        else:
            yield obj_problem(ID, m, field, f"Argo CD cannot generate an Application: {text if sep else why}",
                              "add the key to every element, or remove it from the template")
    for app in apps:
        if app.element is None:
            continue  # written-out Applications go through the schema stage like any object
        generated = Manifest(app.obj, app.manifest.source, app.manifest.index)
        for p in _validator().validate([generated]):
            field = p.field or ""
            tfield = "spec.template" + field[len("spec"):] if field.startswith("spec") else \
                ("spec.template." + field if field else "spec.template")
            yield obj_problem(ID, app.manifest, tfield,
                              f"generated Application {app.name} ({app.field}) is not valid: {p.message}",
                              p.hint or "fix the template or the element so the result matches the Application CRD")
