"""Argo CD as the ARGO rules see it: the Applications a set of manifests declares (literal ones and those an
ApplicationSet's list generator makes), where their paths lead in this repository, and what those paths render."""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field as dc_field
from pathlib import Path
from typing import Any, Callable, Collection, Iterator

from ..render import gitops
from . import gomatch
from .. import launchers
from ..render.paths import repo_root
from ..launchers.podspecs import pod_sites
from ..render.kustomization import kustomization_file
from ..render.render import render
from ..kube import scopes
from ..kube.values import dig, group_of, kueue_queue, listing
from ..kube.objects import Manifest

SYNC_WAVE = "argocd.argoproj.io/sync-wave"
GROUP = "argoproj.io"
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
# The one explicit opt-in that lets a training workload keep its name across runs: Argo CD deletes and re-creates it
# (kubectl replace --force) on every change, which ends a running training. Plain Replace=true is a PUT and still
# fails on immutable fields.
REPLACE_OPT_IN = ("Force=true", "Replace=true")
# Workload kinds whose change means a new training run (their pod templates are immutable or not reconciled).
WORKLOAD_KINDS = launchers.run_kinds()
RUN_ID_ENV = "RUN_ID"
# Cluster-scoped kinds the overlays may render (an AppProject's clusterResourceWhitelist must name them).
CLUSTER_SCOPED = {*scopes.CLUSTER_SCOPED, *launchers.cluster_scoped()}


def annotations_of(m: Manifest) -> dict[str, Any]:
    a = m.metadata.get("annotations")
    return a if isinstance(a, dict) else {}


def sync_wave(m: Manifest) -> int | None:
    """The object's sync wave (default 0), None when the annotation is not an integer."""
    raw = annotations_of(m).get(SYNC_WAVE, "0")
    try:
        return int(str(raw).strip())
    except ValueError:
        return None


def sync_options(text: Any) -> list[str]:
    return [o.strip() for o in str(text or "").split(",") if o.strip()]


def replace_opt_in(m: Manifest) -> bool:
    opts = sync_options(annotations_of(m).get(SYNC_OPTIONS))
    return all(o in opts for o in REPLACE_OPT_IN)


# ---------------------------------------------------------------- Applications, literal and generated


class ExpandError(ValueError):
    """An ApplicationSet that cannot be expanded here (a generator other than list, an unknown template key)."""


@dataclass
class App:
    """One Application: `obj` is the Application itself; `manifest` the object in git it comes from (the
    Application, or the ApplicationSet that generates it); `field` the path in that object a problem points at."""

    obj: dict[str, Any]
    manifest: Manifest
    field: str
    spec_field: str
    element: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name") or "")

    @property
    def spec(self) -> dict[str, Any]:
        s = self.obj.get("spec")
        return s if isinstance(s, dict) else {}

    @property
    def sources(self) -> list[tuple[str, dict[str, Any]]]:
        """(field, source) for `source` and every entry of `sources`."""
        out = []
        if isinstance(self.spec.get("source"), dict):
            out.append((f"{self.spec_field}.source", self.spec["source"]))
        for i, s in enumerate(self.spec.get("sources") or []):
            if isinstance(s, dict):
                out.append((f"{self.spec_field}.sources[{i}]", s))
        return out

    @property
    def sync_policy(self) -> dict[str, Any]:
        p = self.spec.get("syncPolicy")
        return p if isinstance(p, dict) else {}

    @property
    def automated(self) -> dict[str, Any] | None:
        """The automated sync policy when it is on (present and not `enabled: false`)."""
        a = self.sync_policy.get("automated")
        if not isinstance(a, dict) or a.get("enabled") is False:
            return None
        return a

    @property
    def self_heal(self) -> bool:
        return bool(self.automated and self.automated.get("selfHeal"))

    @property
    def options(self) -> list[str]:
        return [str(o).strip() for o in self.sync_policy.get("syncOptions") or []]

    @property
    def destination(self) -> dict[str, Any]:
        d = self.spec.get("destination")
        return d if isinstance(d, dict) else {}

    def at(self, field: str) -> str:
        """The field a problem points at: the generator element for a generated Application (that is what the user
        edits: the template is shared by all), else the Application's own field."""
        return self.field if self.element is not None else field

    def label(self) -> str:
        return f"Application {self.name}" + (f" (from {self.manifest.ref})" if self.element is not None else "")


_GO_VAR = re.compile(r"\{\{-?\s*\.([A-Za-z_][\w.]*)\s*-?\}\}")
_FAST_VAR = re.compile(r"\{\{\s*([A-Za-z_][\w.]*)\s*\}\}")
_ANY_TEMPLATE = re.compile(r"\{\{.*?\}\}")


def _lookup(element: dict[str, Any], dotted_key: str) -> Any:
    value: Any = element
    for part in dotted_key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise ExpandError(f"template key '{dotted_key}' is not in the generator element")
        value = value[part]
    return value


def _substitute(node: Any, element: dict[str, Any], go: bool) -> Any:
    if isinstance(node, dict):
        return {_substitute(k, element, go): _substitute(v, element, go) for k, v in node.items()}
    if isinstance(node, list):
        return [_substitute(v, element, go) for v in node]
    if not isinstance(node, str) or "{{" not in node:
        return node
    pattern = _GO_VAR if go else _FAST_VAR
    out = pattern.sub(lambda m: str(_lookup(element, m.group(1))), node)
    leftover = _ANY_TEMPLATE.search(out)
    if leftover:
        raise ExpandError(f"template expression {leftover.group(0)} is more than a plain key; only "
                          f"{'{{.key}}' if go else '{{key}}'} substitution is expanded here")
    return out


def expand(appset: Manifest) -> Iterator[App]:
    """The Applications an ApplicationSet's list generators make (raises ExpandError for what cannot be expanded
    statically: other generators, templatePatch, expressions beyond a plain key)."""
    spec = appset.obj.get("spec") or {}
    if spec.get("templatePatch"):
        raise ExpandError("spec.templatePatch is not expanded here")
    template = spec.get("template") or {}
    go = bool(spec.get("goTemplate"))
    for g, gen in enumerate(spec.get("generators") or []):
        if not isinstance(gen, dict) or set(gen) != {"list"}:
            kind = next(iter(gen), "?") if isinstance(gen, dict) else "?"
            raise ExpandError(f"spec.generators[{g}] is a {kind} generator; only list generators are expanded here")
        lst = gen["list"] or {}
        if lst.get("elementsYaml") or lst.get("template"):
            raise ExpandError(f"spec.generators[{g}].list uses elementsYaml/template, not expanded here")
        for e, element in enumerate(lst.get("elements") or []):
            if not isinstance(element, dict):
                raise ExpandError(f"spec.generators[{g}].list.elements[{e}] is not a mapping")
            where = f"spec.generators[{g}].list.elements[{e}]"
            try:
                body = _substitute(template, element, go)
            except ExpandError as exc:
                raise ExpandError(f"{where}: {exc}") from None
            obj = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", **body}
            obj.setdefault("metadata", {})
            if appset.namespace and isinstance(obj["metadata"], dict):
                obj["metadata"].setdefault("namespace", appset.namespace)
            yield App(obj, appset, where, "spec.template.spec", element)


def applications(manifests: list[Manifest]) -> tuple[list[App], list[tuple[Manifest, str]]]:
    """Every Application in the manifests, generated ones included; and (ApplicationSet, why) for each set that
    could not be expanded."""
    apps: list[App] = []
    failed: list[tuple[Manifest, str]] = []
    for m in manifests:
        if m.api_version.startswith(GROUP + "/") and m.kind == "Application":
            apps.append(App(m.obj, m, "spec", "spec"))
        elif m.api_version.startswith(GROUP + "/") and m.kind == "ApplicationSet":
            try:
                apps.extend(expand(m))
            except ExpandError as exc:
                failed.append((m, str(exc)))
    return apps, failed


def projects(manifests: list[Manifest]) -> dict[str, Manifest]:
    return {m.name: m for m in manifests if m.kind == "AppProject" and m.api_version.startswith(GROUP + "/")}


# ---------------------------------------------------------------- where an Application's path leads


def repo_url() -> str | None:
    return gitops.argocd_settings().get("repoURL")


def same_repo(url: str | None) -> bool:
    """Whether an Application source points at this repository (gitops.yaml argocd.repoURL; .git optional)."""
    ours = repo_url()
    if not ours or not url:
        return False
    norm: Callable[[str], str] = lambda u: u.rstrip("/").removesuffix(".git").lower()
    return norm(ours) == norm(url)


@dataclass
class Target:
    """What one Application source renders: the folder, and its objects or why there are none."""

    path: str
    folder: Path
    manifests: list[Manifest] = dc_field(default_factory=list)
    error: str | None = None
    # The Kueue integrations the folder's environment declares on (its policy.yaml's `kueueFrameworks`); None where
    # it declares none (then every queued kind counts as Kueue's: rewritten_fields).
    kueue_frameworks: list[str] | None = None


def _render(folder: Path) -> tuple[list[Manifest], str | None]:
    """Render a folder an Application names, through the one render (and its cache) make validate uses."""
    if not folder.is_dir():
        return [], "does not exist in the repository"
    if kustomization_file(folder) is None:
        return [], "has no kustomization.yaml (Argo CD would apply its YAML files as plain manifests)"
    r = render(folder)
    return r.manifests, r.error


def source_folder(source: dict[str, Any], start: str) -> tuple[str, Path, bool] | None:
    """(path, folder, inside) for an Application source that names a path in this repository (None otherwise):
    the folder it leads to from the repository `start` lies in, and whether that folder is inside it."""
    path = source.get("path")
    if not isinstance(path, str) or not same_repo(source.get("repoURL")):
        return None
    root = repo_root(start if start not in ("<stdin>", "") else ".")
    rel = path.strip().strip("/") or "."
    folder = (root / rel).resolve()
    return path, folder, root.resolve() in (folder, *folder.parents)


def target(app: App, source: dict[str, Any], start: str) -> Target | None:
    """Render the folder an Application source names, when it is in this repository (None otherwise)."""
    found = source_folder(source, start)
    if found is None:
        return None
    path, folder, inside = found
    if not inside:
        return Target(path, folder, error="leaves the repository")
    manifests, error = _render(folder)
    return Target(path, folder, list(manifests), error)


def targets(app: App, start: str) -> Iterator[tuple[str, dict[str, Any], Target]]:
    for field, source in app.sources:
        t = target(app, source, start)
        if t is not None:
            yield field, source, t


@dataclass
class Delivery:
    """Argo CD's view of one unit, resolved before the rules run: its Applications (generated ones included), the
    ApplicationSets that could not be expanded, and what each Application's sources render to."""

    apps: list[App] = dc_field(default_factory=list)
    failed: list[tuple[Manifest, str]] = dc_field(default_factory=list)
    resolved: dict[int, list[tuple[str, dict[str, Any], Target]]] = dc_field(default_factory=dict)

    def targets(self, app: App) -> list[tuple[str, dict[str, Any], Target]]:
        return self.resolved.get(id(app), [])


def resolve(manifests: list[Manifest], start: str,
            frameworks: Callable[[Path], list[str] | None] | None = None) -> Delivery:
    """`frameworks`: the Kueue integrations the environment of a rendered folder declares on (the engine passes
    environment.kueue_frameworks; this module cannot import it), read into each Target."""
    apps, failed = applications(manifests)
    resolved = {id(a): list(targets(a, start)) for a in apps}
    if frameworks is not None:
        for found in resolved.values():
            for _, _, t in found:
                if not t.error:
                    t.kueue_frameworks = frameworks(t.folder)
    return Delivery(apps, failed, resolved)


# ---------------------------------------------------------------- an overlay validated without argocd/

@dataclass
class Synced:
    """The Applications of an overlay's repository's Argo CD folder whose source names the overlay's folder (with that
    path; SEC010 reads their destinations), and the folder's AppProjects (ARGO008, unless it checks that folder too)."""
    apps: list[tuple[App, str]] = dc_field(default_factory=list)
    projects: dict[str, Manifest] = dc_field(default_factory=dict)
    projects_checked_elsewhere: bool = False  # the folder is validated in the same run: ARGO008 checks it there


def synced_by(overlay: str | Path, delivery: list[Manifest]) -> Synced:
    """The Applications among `delivery` (the rendered Argo CD folder, ApplicationSets expanded as ARGO004 and
    ARGO008 expand them) whose source path is the overlay's folder, and the folder's AppProjects."""
    here = Path(overlay).resolve()
    apps, _ = applications(delivery)
    found = [(app, named[0]) for app in apps for _, source in app.sources
             if (named := source_folder(source, str(overlay))) is not None and named[2] and named[1] == here]
    return Synced(found, projects(delivery) if found else {})


def _entries(value: Any) -> list[dict[str, Any]] | None:
    """A resource list as Go reads it: None where absent or null (a nil slice), else its mapping entries."""
    if value is None:
        return None
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def _text(entry: dict[str, Any], key: str) -> str:
    value = entry.get(key)
    return "" if value is None else str(value)


def resource_in_list(entries: list[dict[str, Any]] | None, group: str, kind: str) -> bool:
    """isResourceInList (argo-cd v3.5.1 pkg/apis/application/v1alpha1/types.go:3843-3854): an entry whose kind, then
    group, match as Go's filepath.Match globs (a malformed glob matches nothing)."""
    return any(gomatch.match(_text(e, "kind"), kind) and gomatch.match(_text(e, "group"), group)
               for e in entries or [])


def named_resource_in_list(entries: list[dict[str, Any]] | None, group: str, kind: str, name: str) -> bool:
    """isNamedResourceInList (types.go:3856-3876): as resource_in_list, and the entry's `name` glob matches the
    object's name; an entry without a name (or with "") matches every name of its kind."""
    for e in entries or []:
        if not gomatch.match(_text(e, "kind"), kind) or not gomatch.match(_text(e, "group"), group):
            continue
        if _text(e, "name") == "" or gomatch.match(_text(e, "name"), name):
            return True
    return False


def group_kind_name_permitted(spec: dict[str, Any], group: str, kind: str, name: str,
                              namespaced: bool) -> tuple[bool, str]:
    """AppProject.IsGroupKindNamePermitted (argo-cd v3.5.1 pkg/apis/application/v1alpha1/app_project_types.go:398-418),
    what the sync asks of every object (controller/sync.go:647-671, validateSyncPermissions): (permitted, the list
    that decided). Namespaced kinds: any kind where namespaceResourceWhitelist is absent or null, none where it is
    empty; names are not read. Cluster-scoped kinds: only what clusterResourceWhitelist lists, by group, kind and
    name. A blacklist entry denies in both."""
    if namespaced:
        white = _entries(spec.get("namespaceResourceWhitelist"))
        black = _entries(spec.get("namespaceResourceBlacklist"))
        if not (white is None or (len(white) != 0 and resource_in_list(white, group, kind))):
            return False, "namespaceResourceWhitelist"
        if black and resource_in_list(black, group, kind):
            return False, "namespaceResourceBlacklist"
        return True, ""
    white = _entries(spec.get("clusterResourceWhitelist"))
    black = _entries(spec.get("clusterResourceBlacklist"))
    if not (white and named_resource_in_list(white, group, kind, name)):
        return False, "clusterResourceWhitelist"
    if black and named_resource_in_list(black, group, kind, name):
        return False, "clusterResourceBlacklist"
    return True, ""


def glob_match(pattern: Any, value: str) -> bool:
    pattern = str(pattern if pattern is not None else "")
    negate = pattern.startswith("!")
    hit = fnmatch.fnmatchcase(value, pattern.lstrip("!"))
    return not hit if negate else hit


def run_id_of(m: Manifest) -> tuple[list[str], str]:
    """The RUN_ID values a workload's training containers set, and the field of the first one."""
    values: list[str] = []
    first = ""
    for field, env in _envs(m):
        for i, e in enumerate(env):
            if isinstance(e, dict) and e.get("name") == RUN_ID_ENV and isinstance(e.get("value"), str):
                values.append(e["value"])
                first = first or f"{field}[{i}].value"
    return values, first


def _envs(m: Manifest) -> Iterator[tuple[str, list[Any]]]:
    launcher = launchers.of(m)
    if launcher is not None:
        yield from launcher.training_env(m)
        return
    for site in pod_sites([m]):
        for cfield, c in site.containers():
            if isinstance(c.get("env"), list) and ".initContainers[" not in cfield:
                yield f"{cfield}.env", c["env"]


# ---------------------------------------------------------------- fields a controller rewrites: no false drift

# Without it a sync (started by any other change) applies the manifest's value of an ignored field: Argo CD v3.5.1
# copies the live values of ignored fields into what it applies only under this option (controller/sync.go:236-246,
# normalizeTargetResources at 421-491).
RESPECT_IGNORE_DIFFERENCES = "RespectIgnoreDifferences=true"


@dataclass(frozen=True)
class IgnoreEntry:
    """One `ignoreDifferences` entry an Application needs: the group, kind and JSON pointer of a field a controller
    rewrites after Argo CD applied it."""

    group: str
    kind: str
    pointer: str

    def yaml(self) -> str:
        return f'{{group: {self.group or chr(34) * 2}, kind: {self.kind}, jsonPointers: [{self.pointer}]}}'


def json_pointer(path: tuple[str, ...]) -> str:
    """RFC 6901: `/` before each key, `~` written `~0` and `/` written `~1`."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def rewritten_fields(manifests: list[Manifest], set_only: bool = False,
                     frameworks: Collection[str] | None = None) -> list[tuple[Manifest, IgnoreEntry]]:
    """The fields of these rendered objects that a controller rewrites after Argo CD applied them, each with the
    `ignoreDifferences` entry that keeps Argo CD from showing and undoing it: the suspend field (the launcher's
    `suspend_field`) of every object Kueue queues. Kueue's webhook suspends a queued job at creation
    (jobframework/defaults.go:36-46, ApplyDefaultForSuspend, whatever the manifest says), and its reconciler resumes
    it on admission and suspends it again on eviction (reconciler.go:1480-1518 startJob, 1522-1565 stopJob).
    `frameworks`: the Kueue integrations the environment declares on (`kueueFrameworks`); where given, only a kind
    whose integration (the launcher's `kueue_framework`) is among them counts: Kueue sets up the webhook and reconciler
    of an enabled integration only (v0.19.2 pkg/controller/jobframework/setup.go:76; a no-op webhook and no reconciler
    for any other, 108-111). None (nothing declared): every queued kind with a suspend field.
    With `set_only`, only the objects whose manifest sets that field: Argo CD compares only the fields the desired
    state sets (gitops-engine's three-way diff, pkg/diff/diff.go:731-764; the structured-merge diff of
    ServerSideApply=true applies the manifest to the live object as the API server would, 421-503), so a field the
    manifest leaves out never shows as drift."""
    out: list[tuple[Manifest, IgnoreEntry]] = []
    for m in manifests:
        launcher = launchers.of(m) if isinstance(m.obj, dict) else None
        field = launcher.suspend_field if launcher is not None else None
        if not field or kueue_queue(m.metadata) is None:
            continue
        if frameworks is not None and (launcher is None or launcher.kueue_framework not in frameworks):
            continue
        if set_only and dig(m.obj, *field) is None:
            continue
        out.append((m, IgnoreEntry(group_of(m.api_version), m.kind, json_pointer(field))))
    return out


def _covers(ignored: Any, pointer: str) -> bool:
    """A JSON pointer an entry removes covers `pointer` when it is the same or one of its parents."""
    return isinstance(ignored, str) and ignored != "" and (pointer == ignored or pointer.startswith(ignored + "/"))


def _jq_covers(expression: Any, pointer: str) -> bool:
    """A jq path of plain keys (`.spec.suspend`) covers the pointer it names and the fields under it."""
    if not isinstance(expression, str) or "~" in pointer:
        return False
    path = "." + ".".join(pointer.strip("/").split("/"))
    expression = expression.strip()
    return expression not in ("", ".") and (path == expression or path.startswith(expression + "."))


def ignores(app: App, entry: IgnoreEntry, name: str, namespace: str) -> bool:
    """Whether the Application's `spec.ignoreDifferences` removes the entry's field of that object from its diff, as
    Argo CD v3.5.1 matches them (util/argo/normalizers/diff_normalizer.go:185-197: group and kind as globs, name and
    namespace equal where given; every jsonPointer and jqPathExpression of a matching entry is removed)."""
    for e in _entries(app.spec.get("ignoreDifferences")) or []:
        if not (fnmatch.fnmatchcase(entry.group, _text(e, "group"))
                and fnmatch.fnmatchcase(entry.kind, _text(e, "kind"))):
            continue
        if _text(e, "name") not in ("", name) or _text(e, "namespace") not in ("", namespace):
            continue
        pointers = listing(e.get("jsonPointers"))
        expressions = listing(e.get("jqPathExpressions"))
        if any(_covers(p, entry.pointer) for p in pointers) or any(_jq_covers(x, entry.pointer) for x in expressions):
            return True
    return False


def unguarded(app: App, manifests: list[Manifest], set_only: bool = False,
              frameworks: Collection[str] | None = None) -> list[tuple[Manifest, IgnoreEntry]]:
    """The rewritten fields (rewritten_fields, for the environment's Kueue `frameworks`) of an Application's rendered
    objects that it would show as drift and undo: not ignored, or ignored without RespectIgnoreDifferences=true (then
    every sync still applies them)."""
    respect = RESPECT_IGNORE_DIFFERENCES in app.options
    ns = str(app.destination.get("namespace") or "")
    return [(m, e) for m, e in rewritten_fields(manifests, set_only, frameworks)
            if not (respect and ignores(app, e, m.name, m.namespace or ns))]
