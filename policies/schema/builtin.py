"""The in-process validator (the default): jsonschema-rs over the committed schemas, each compiled once per process."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..kube.objects import Manifest, Problem
from .lookup import RULE, RULE_NOT_RUN, SCHEMAS_DIR, load_schema, triage
from .defaulting import as_validated
from .messages import cap, dotted, in_order, missing_field_problems, one_line, unknown_field_problems

_COMPILED: dict[Path, tuple[Any, dict[str, Any]]] = {}  # per process: schema file -> (compiled validator, schema)


def installed_version(module: Any) -> str:
    """The version of an installed package whose distribution is named like its module, from the
    `<name>-<version>.dist-info` folder beside it: what importlib.metadata reads, without importing it (0.06 s of
    every `make validate`); else importlib.metadata."""
    name = module.__name__
    site = Path(module.__file__).resolve().parent.parent
    for info in sorted(site.glob(f"{name}-*.dist-info")):
        return info.name[len(name) + 1:-len(".dist-info")]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown version"


class BuiltinValidator:
    """jsonschema-rs over the committed schemas; each schema file is compiled on first use, once per process."""

    def __init__(self, root: Path | None = None) -> None:
        import jsonschema_rs  # (fail here, not mid-run, if the package is missing)

        self.root = root or SCHEMAS_DIR
        self.name = f"jsonschema-rs {installed_version(jsonschema_rs)} (in-process)"

    def _compiled(self, path: Path) -> tuple[Any, dict[str, Any]]:
        hit = _COMPILED.get(path)
        if hit is None:
            import jsonschema_rs

            schema = load_schema(path)
            # Formats are annotations in 2020-12 (kubeconform does not assert them either).
            hit = (jsonschema_rs.validator_for(schema, validate_formats=False), schema)
            _COMPILED[path] = hit
        return hit

    def validate_units(self, units: list[list[Manifest]]) -> list[list[Problem]]:
        """Each unit's problems. One thread: jsonschema-rs holds the GIL while it validates (two threads measured
        slower than one), and most of a run's schema time is compiling each schema once."""
        return [self.validate(manifests) for manifests in units]

    def validate(self, manifests: list[Manifest]) -> list[Problem]:
        import jsonschema_rs

        problems, todo = triage(manifests, self.root)
        for i, m, path in todo:
            try:
                validator, schema = self._compiled(path)
            except (OSError, ValueError, jsonschema_rs.ValidationError) as e:
                problems.append((i, Problem(RULE_NOT_RUN, one_line(f"schema check could not run: {path.name}: {e}"),
                                            m.source, obj=m.ref, hint="run make schemas (the schema file is unreadable)")))
                continue
            obj = as_validated(m, path)
            if validator.is_valid(obj):
                continue
            found: list[Problem] = []
            for err in validator.iter_errors(obj):
                path_ = list(err.instance_path)
                unexpected = getattr(err.kind, "unexpected", None)
                if err.kind.name == "additionalProperties" and unexpected:
                    found += unknown_field_problems(m, schema, path_, list(unexpected), err.message)
                elif err.kind.name == "required":
                    found += missing_field_problems(m, path_, [str(err.kind.as_dict().get("property"))], err.message)
                else:
                    found.append(Problem(RULE, one_line(err.message), m.source, obj=m.ref, field=dotted(path_) or None))
            problems += [(i, p) for p in cap(m, found)]
        return in_order(problems)
