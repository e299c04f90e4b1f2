"""The one interface every schema validator implements (kubeconform's pkg/validator is the model)."""
from __future__ import annotations

from typing import Protocol

from ..kube.objects import Manifest, Problem

class ValidatorUnavailable(RuntimeError):
    """The validator asked for cannot run here (e.g. `prefer="kubeconform"` and no kubeconform binary)."""


class Validator(Protocol):
    """A schema validator: its `name` as reports show it, and the problems of a set of manifests, or of several sets
    at once (a run's units: kubeconform starts once per run, not once per overlay)."""

    name: str

    def validate(self, manifests: list[Manifest]) -> list[Problem]: ...

    def validate_units(self, units: list[list[Manifest]]) -> list[list[Problem]]: ...
