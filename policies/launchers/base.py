"""What every launcher module shares: the pods a controller creates (Pod, PodGroup), the workload that stands for
them, the bundle of objects they are looked up in, and the protocol (Launcher) every consumer asks instead of
branching on kinds."""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterator

from ..model import Manifest

# Labels and annotations more than one controller reads or writes (the Job controller's index is used by JobSet and
# the Trainer too). Each controller's own constants live in its module.
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
POD_INDEX = "apps.kubernetes.io/pod-index"
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
# A DNS-1035 label (k8s.io/apimachinery validation.IsDNS1035Label, with its 63-character limit checked apart): what
# Service names and the names webhooks check must be.
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# A DNS-1123 label and subdomain (IsDNS1123Label, 63 characters; IsDNS1123Subdomain, 253), checked apart from length.
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# The path part of IsDomainPrefixedPath (httpPathFmt).
HTTP_PATH = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")
# An int-or-string percentage (IsValidPercent).
PERCENT = re.compile(r"^([0-9]+)%$")


def domain_prefixed_path_problems(value: str) -> list[str]:
    """Why k8s.io/apimachinery validation.IsDomainPrefixedPath refuses `value` (`<DNS-1123 subdomain>/<HTTP path>`,
    both parts non-empty); empty where it is one."""
    host, _, path = value.partition("/")
    if not host or not path:
        return ['is not a domain-prefixed path (such as "acme.io/foo")']
    why = []
    if len(host) > 253 or not DNS1123_SUBDOMAIN.match(host):
        why.append(f"has '{host}' before the '/', not a DNS-1123 subdomain")
    if not HTTP_PATH.match(path):
        why.append(f"has '{path}' after the '/', not an HTTP path")
    return why


def int_or_percent(value: Any) -> tuple[int, bool] | None:
    """An intstr value as (number, is a percentage); None where it is neither an integer nor `<digits>%`."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value, False
    match = PERCENT.match(value) if isinstance(value, str) else None
    return (int(match.group(1)), True) if match else None


def selects(selector: Any, labels: dict[str, Any]) -> bool:
    """Whether a label selector (matchLabels and matchExpressions: In, NotIn, Exists, DoesNotExist) selects these
    labels (metav1.LabelSelectorAsSelector); label values compared as strings."""
    if not isinstance(selector, dict):
        return False
    for k, v in mapping(selector.get("matchLabels")).items():
        if labels.get(str(k)) != str(v):
            return False
    for e in listing(selector.get("matchExpressions")):
        e = mapping(e)
        key, op = str(e.get("key")), e.get("operator")
        values = [str(x) for x in listing(e.get("values"))]
        has = key in labels
        if (op == "In" and (not has or labels[key] not in values)) or (op == "NotIn" and has and labels[key] in values) \
                or (op == "Exists" and not has) or (op == "DoesNotExist" and has):
            return False
    return True

# How an injected variable meets one the user wrote in the same container.
OVERRIDE = "override"    # appended after the user's env: the kubelet takes the last definition (the controller wins)
IF_ABSENT = "if-absent"  # added only when the container does not define it (the user wins)
FIRST = "first"          # put first, a user's variable of the same name dropped (the user's `$(VAR)` can use it)


def as_int(value: Any, default: int | None = None) -> int | None:
    if value is None or isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except ValueError:
        return default


def dig(obj: Any, *path: Any) -> Any:
    """obj[path[0]][path[1]]...; None where a step is missing or of the wrong type."""
    for key in path:
        if type(obj) is dict and type(key) is str:  # the common step, tested first
            obj = obj.get(key)
        elif isinstance(key, int):
            if not isinstance(obj, list) or not -len(obj) <= key < len(obj):
                return None
            obj = obj[key]
        elif not isinstance(obj, dict):
            return None
        else:
            obj = obj.get(key)
    return obj


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def listing(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass
class Injected:
    """One env variable a controller adds to a container: a value, or a downward-API fieldRef resolved per pod."""

    name: str
    value: str | None = None
    field_ref: str | None = None
    mode: str = OVERRIDE


@dataclass
class ContainerEnv:
    """One container (or init container) of a pod, with the env the kubelet would give it."""

    name: str
    field: str
    container: dict[str, Any]
    init: bool
    # Added by the controller (PyTorchJob's init container), not written by the user.
    added: bool = False
    _env: dict[str, str | None] = field(default_factory=dict, repr=False)
    _fields: dict[str, str] = field(default_factory=dict, repr=False)
    _injected: set[str] = field(default_factory=set, repr=False)
    # Works the env out when first read: the rules read the training container's, `make plan` every container's.
    _pending: Callable[[], None] | None = field(default=None, repr=False)
    # command + args after `$(VAR)` expansion with each token's field path (Pod.argv), worked out once.
    _argv: tuple[list[str], list[str]] | None = field(default=None, repr=False)

    def _ready(self) -> None:
        if self._pending is not None:
            fill, self._pending = self._pending, None
            fill()

    @property
    def env(self) -> dict[str, str | None]:
        self._ready()
        return self._env

    @property
    def env_fields(self) -> dict[str, str]:
        self._ready()
        return self._fields

    @property
    def injected(self) -> set[str]:
        self._ready()
        return self._injected


@dataclass
class Pod:
    """One pod as the controller would create it. `container`, `env`, `env_fields` and `injected` are those of its
    training container; `containers` and `init_containers` hold every container with its env."""

    index: int
    name: str
    hostname: str
    subdomain: str | None
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: dict[str, Any]
    spec_field: str
    containers: list[ContainerEnv]
    init_containers: list[ContainerEnv]
    training: int  # index into containers
    # The training container and what the rules read of it, set once its env is worked out (see `ready`).
    main: ContainerEnv | None = None
    container: dict[str, Any] = field(default_factory=dict)
    container_field: str = ""
    env: dict[str, str | None] = field(default_factory=dict)
    env_fields: dict[str, str] = field(default_factory=dict)
    injected: set[str] = field(default_factory=set)
    # The ConfigMaps' and Secrets' data of the manifests (name -> key -> text), for the files their volumes mount.
    stores: tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]] = field(default=({}, {}), repr=False)

    def file(self, path: str) -> str | None:
        """The text the training container reads at `path` where a mounted ConfigMap or Secret gives it."""
        return mounted_file(self, path, *self.stores)

    def ready(self) -> "Pod":
        """Work out the training container's env (every rule reads it) and expose it as plain attributes."""
        main = self.containers[self.training] if self.containers else \
            ContainerEnv("", f"{self.spec_field}.containers", {}, False)
        self.main, self.container, self.container_field = main, main.container, main.field
        self.env, self.env_fields, self.injected = main.env, main.env_fields, main.injected
        return self

    def expand(self, text: str) -> str:
        """Kubernetes `$(VAR)` expansion in command and args, against this container's env; `$$` escapes."""
        return expand_k8s(text, self.env)

    def argv(self, c: ContainerEnv | None = None) -> tuple[list[str], list[str]]:
        """A container's command + args after `$(VAR)` expansion, with the field path of each token (worked out
        once per container: the env it expands against is fixed; callers do not change the lists)."""
        c = c or self.main
        if c._argv is None:
            out: list[str] = []
            fields: list[str] = []
            env = c.env
            for key in ("command", "args"):
                for i, tok in enumerate(listing(c.container.get(key))):
                    tok = str(tok)
                    out.append(expand_k8s(tok, env) if "$" in tok else tok)
                    fields.append(f"{c.field}.{key}[{i}]")
            c._argv = (out, fields)
        return c._argv


_K8S_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")


def expand_k8s(text: str, env: dict[str, str | None]) -> str:
    if "$" not in text:
        return text

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        value = env.get(m.group(1))
        return m.group(0) if value is None else value

    return _K8S_VAR.sub(sub, text)


def _none(i: int) -> dict[str, str]:
    return {}


@dataclass
class PodGroup:
    """Pods made from one template: a PyTorchJob replica type, a Job's pods, a JobSet child Job.
    Everything a controller adds or forces is a function of the pod's index within the group."""

    role: str
    count: int
    offset: int
    template: dict[str, Any]
    template_field: str
    name: Callable[[int], str]
    # The hostname the pod gets: forced (Indexed Job, StatefulSet) or only where the template sets none.
    hostname: Callable[[int], str]
    hostname_forced: bool = False
    subdomain: str | None = None
    subdomain_forced: bool = False
    labels: Callable[[int], dict[str, str]] = _none
    annotations: Callable[[int], dict[str, str]] = _none
    # Env added per (pod index, container name, is init container).
    inject: Callable[[int, str, bool], list[Injected]] = lambda i, c, init: []
    # Init containers the controller appends to the template's own.
    init_containers: Callable[[int], list[dict[str, Any]]] = lambda i: []
    # Ports the controller adds to a container: (container name) -> ports.
    ports: Callable[[str], list[dict[str, Any]]] = lambda c: []
    container_name: str | None = None
    # The template's containers after the controller merged the workload's settings into them (TrainJob).
    containers: list[dict[str, Any]] | None = None
    container_fields: dict[int, str] = field(default_factory=dict)
    # Pods the workload creates outside the training world (a TrainJob's initializers): listed, not ranked.
    aux: bool = False
    # What every pod of the group shares, read from the template once (Workload._make_pod).
    _shared: tuple[Any, ...] | None = field(default=None, init=False, repr=False, compare=False)

    def shared(self) -> tuple[Any, ...]:
        """(template labels, template annotations, pod spec, containers, training container index, spec field):
        the same for every pod of the group."""
        if self._shared is None:
            template = mapping(self.template)
            meta = mapping(template.get("metadata"))
            spec = mapping(template.get("spec"))
            raw = self.containers if self.containers is not None else listing(spec.get("containers"))
            self._shared = ({str(k): str(v) for k, v in mapping(meta.get("labels")).items()},
                            {str(k): str(v) for k, v in mapping(meta.get("annotations")).items()},
                            spec, raw, pick_container(raw, self.container_name), f"{self.template_field}.spec")
        return self._shared


@dataclass
class Workload:
    """An object that starts pods through a modelled controller, and the pods it stands for."""

    manifest: Manifest
    controller: "Launcher"
    groups: list[PodGroup]
    namespace: str
    notes: list[str] = field(default_factory=list)
    # Facts the controller's module and its rules share (completions vs parallelism, the elastic policy ...).
    facts: dict[str, Any] = field(default_factory=dict)
    configmaps: dict[str, dict[str, str]] = field(default_factory=dict)
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    _pod_cache: dict[int, Pod] = field(default_factory=dict, repr=False)

    # How many alike copies of it run at once (Katib's parallel trials); GPU totals count each.
    copies: int = 1

    @property
    def launcher(self) -> str:
        return self.controller.id

    @property
    def managed_dns(self) -> bool:
        return self.controller.managed_dns

    # Set when the controller creates no pods until the workload is resumed (spec.suspend, Kueue's admission).
    suspended: bool = False

    @property
    def pods(self) -> int:
        """The pods of the training world (auxiliary pods such as initializers not counted)."""
        return sum(g.count for g in self.groups if not g.aux)

    @property
    def world_groups(self) -> list[PodGroup]:
        return [g for g in self.groups if not g.aux]

    @property
    def all_pods(self) -> int:
        return sum(g.count for g in self.groups)

    def group_of(self, index: int) -> tuple[PodGroup, int]:
        for g in self.groups:
            if not g.aux and g.offset <= index < g.offset + g.count:
                return g, index - g.offset
        raise IndexError(index)

    def pod(self, index: int) -> Pod:
        """The pod with world index `index` (0 = the first pod: Master, completion index 0, ordinal 0)."""
        cached = self._pod_cache.get(index)
        if cached is None:
            group, local = self.group_of(index)
            cached = self._pod_cache[index] = self._make_pod(group, local, index)
        return cached

    def every_pod(self, limit: int | None = None) -> Iterator[Pod]:
        """Every pod the workload creates, auxiliary ones included, in the controller's order."""
        n = 0
        for g in self.groups:
            for local in range(g.count):
                if limit is not None and n >= limit:
                    return
                n += 1
                yield self.pod(g.offset + local) if not g.aux else self._make_pod(g, local, -1)

    def _make_pod(self, group: PodGroup, local: int, index: int) -> Pod:
        base_labels, base_annotations, spec, raw, training, spec_field = group.shared()
        labels = dict(base_labels)
        labels.update(group.labels(local))
        annotations = dict(base_annotations)
        annotations.update(group.annotations(local))
        hostname = group.hostname(local) if group.hostname_forced else (spec.get("hostname") or group.hostname(local))
        subdomain = group.subdomain if group.subdomain_forced else (spec.get("subdomain") or group.subdomain)
        pod = Pod(index=index, name=group.name(local), hostname=str(hostname), subdomain=subdomain or None,
                  namespace=self.namespace, labels=labels, annotations=annotations, spec=spec,
                  spec_field=spec_field, containers=[], init_containers=[], training=training,
                  stores=(self.configmaps, self.secrets))
        for i, c in enumerate(listing(spec.get("initContainers"))):
            if isinstance(c, dict):
                pod.init_containers.append(ContainerEnv(str(c.get("name")), f"{pod.spec_field}.initContainers[{i}]",
                                                        c, True))
        for i, c in enumerate(group.init_containers(local)):  # appended after the user's
            pod.init_containers.append(ContainerEnv(str(c.get("name")), f"(controller) initContainers[{i}]", c, True,
                                                    added=True))
        for i, c in enumerate(raw):
            c = mapping(c)
            extra = group.ports(str(c.get("name")))
            if extra:
                have = {p.get("containerPort") for p in listing(c.get("ports")) if isinstance(p, dict)}
                c = {**c, "ports": listing(c.get("ports")) + [p for p in extra if p.get("containerPort") not in have]}
            pod.containers.append(ContainerEnv(str(c.get("name")),
                                               group.container_fields.get(i, f"{pod.spec_field}.containers[{i}]"),
                                               c, False))
        for ce in pod.init_containers + pod.containers:
            ce._pending = (lambda ce=ce: self._fill_env(pod, ce, group.inject(local, ce.name, ce.init)))
        return pod.ready()

    def _fill_env(self, pod: Pod, ce: ContainerEnv, injected: list[Injected]) -> None:
        env, fields, c, cf = ce._env, ce._fields, ce.container, ce.field  # being filled: not through the properties
        for i, src in enumerate(listing(c.get("envFrom"))):
            src = mapping(src)
            prefix = str(src.get("prefix") or "")
            ref = mapping(src.get("configMapRef") or src.get("secretRef"))
            store = self.configmaps if "configMapRef" in src else self.secrets
            where = f"{cf}.envFrom[{i}]"
            for k, v in (store.get(str(ref.get("name"))) or {}).items():
                env[prefix + k] = v
                fields[prefix + k] = where
        first = [j for j in injected if j.mode == FIRST]
        by = f"{self.manifest.kind} controller"
        for j in first:
            self._inject(pod, ce, j, by)
        dropped = {j.name for j in first}
        defined: set[str] = set()
        for i, var in enumerate(listing(c.get("env"))):
            var = mapping(var)
            name = str(var.get("name"))
            defined.add(name)
            if name in dropped:
                continue
            fields[name] = f"{cf}.env[{i}]"
            if "value" in var:
                value = "" if var["value"] is None else str(var["value"])
                env[name] = expand_k8s(value, env) if "$" in value else value
            elif "valueFrom" in var:
                env[name] = self._value_from(mapping(var["valueFrom"]), pod)
            else:
                env[name] = ""
        # Controllers append their variables after the user's (so a user's `$(VAR)` in an env value cannot see
        # them; command and args can): the kubelet keeps the last definition of a name.
        for j in injected:
            if j.mode == OVERRIDE or (j.mode == IF_ABSENT and j.name not in defined):
                self._inject(pod, ce, j, by)

    def _inject(self, pod: Pod, ce: ContainerEnv, j: Injected, by: str) -> None:
        # The controller's variables are part of the pod's env list: the kubelet expands a `$(VAR)` in their values
        # against the variables before them (a PyTorchJob's `elasticPolicy.rdzvId: $(RUN_ID)` becomes the run id).
        value = j.value if j.value is None or "$" not in j.value else expand_k8s(j.value, ce._env)
        ce._env[j.name] = downward(j.field_ref, pod) if j.field_ref else value
        ce._fields[j.name] = by
        ce._injected.add(j.name)

    def _value_from(self, source: dict[str, Any], pod: Pod) -> str | None:
        """Resolve a downward-API, ConfigMap or Secret reference the way the kubelet would, where it can be known."""
        if "fieldRef" in source:
            return downward(str(mapping(source.get("fieldRef")).get("fieldPath") or ""), pod)
        if "configMapKeyRef" in source:
            ref = mapping(source["configMapKeyRef"])
            return (self.configmaps.get(str(ref.get("name"))) or {}).get(str(ref.get("key")))
        if "secretKeyRef" in source:
            ref = mapping(source["secretKeyRef"])
            return (self.secrets.get(str(ref.get("name"))) or {}).get(str(ref.get("key")))
        return None


_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\[['\"]([^'\"]+)['\"]\]$")


def downward(path: str, pod: Pod) -> str | None:
    """The value a downward-API `fieldRef.fieldPath` takes in `pod`; None where only the running cluster knows it."""
    if path == "metadata.name":
        return pod.name
    if path == "metadata.namespace":
        return pod.namespace or "default"
    m = _SUBSCRIPT.match(path)
    if m:
        table = pod.labels if m.group(1) == "labels" else pod.annotations
        return table.get(m.group(2))
    return None  # status.podIP, spec.nodeName, metadata.uid ...


def mounted_file(pod: "Pod", path: str, configmaps: dict[str, dict[str, str]],
                 secrets: dict[str, dict[str, str]]) -> str | None:
    """The text a pod's training container reads at `path`, where a configMap or secret volume (or a projected
    one's configMap and secret sources) mounted in it gives that file, as the kubelet projects it: each key a file
    named after it, or only the listed `items` at their paths; a `subPath` mount is that file or folder of the
    volume. None where the file comes from elsewhere (the image, another volume, a `subPathExpr`) or the ConfigMap
    or Secret is not in the manifests (a Secret's `data` is base64 and is not read: only its `stringData`)."""
    path = posixpath.normpath(path)
    volumes = {str(v.get("name")): v for v in (mapping(x) for x in listing(pod.spec.get("volumes")))}
    mounts = sorted((mapping(m) for m in listing(pod.container.get("volumeMounts"))),
                    key=lambda m: -len(str(m.get("mountPath") or "")))
    for mount in mounts:
        if mount.get("subPathExpr") or not mount.get("mountPath"):
            continue
        root = posixpath.normpath(str(mount["mountPath"]))
        sub = str(mount.get("subPath") or "")
        if path == root and sub:
            rel = sub
        elif path.startswith(root.rstrip("/") + "/"):
            rel = posixpath.join(sub, path[len(root.rstrip("/")) + 1:]) if sub else path[len(root.rstrip("/")) + 1:]
        else:
            continue
        rel = posixpath.normpath(rel)
        volume = volumes.get(str(mount.get("name")))
        if volume is None:
            return None
        sources = [mapping(x) for x in listing(mapping(volume.get("projected")).get("sources"))] or [volume]
        for source in sources:
            for kind, store in (("configMap", configmaps), ("secret", secrets)):
                ref = source.get(kind)
                if not isinstance(ref, dict):
                    continue
                # A secret volume names its Secret `secretName`; a projected volume's secret source, `name`.
                data = store.get(str(ref.get("secretName") or ref.get("name")))
                if data is None:
                    continue
                items = listing(ref.get("items"))
                files = ({posixpath.normpath(str(mapping(i).get("path"))): data.get(str(mapping(i).get("key")))
                          for i in items} if items else data)
                if files.get(rel) is not None:
                    return files[rel]
        return None
    return None


_LAUNCH_WORDS = ("torchrun", "torch.distributed.run", "torch.distributed.launch", "accelerate")


def pick_container(containers: list[Any], preferred: str | None) -> int:
    """The training container: the one named `preferred`, else the first that starts a launcher, else the first."""
    for i, c in enumerate(containers):
        if preferred and mapping(c).get("name") == preferred:
            return i
    for i, c in enumerate(containers):
        c = mapping(c)
        text = " ".join(str(t) for t in listing(c.get("command")) + listing(c.get("args")))
        if any(w in text for w in _LAUNCH_WORDS):
            return i
    return 0


@dataclass
class Child:
    """An object another controller makes from one written in the file (a Katib trial's job), checked by its own
    launcher as if it were written there: problems about it are reported against `parent`, each field under
    `prefix` (the path its spec is written at)."""

    manifest: Manifest
    parent: Manifest
    prefix: str
    # How many of it run at once.
    copies: int = 1
    notes: list[str] = field(default_factory=list)
    # How a problem about it begins ("in each trial's PyTorchJob"): which of the parent's objects it is.
    said_as: str = ""

    def at(self, path: str | None) -> str | None:
        """A field of the child as the field of the parent that holds it. The child's name and namespace are the
        controller's, made from the parent's own; a field that is not a path ("(runtime) ...", "Job controller")
        is left as it is."""
        if not path:
            return self.prefix
        if path in ("metadata.name", "metadata.namespace"):
            return path
        if " " in path.strip():
            return path
        return f"{self.prefix}.{path}"


@dataclass
class Bundle:
    """The rendered objects of one overlay (or one file), indexed the way the launchers look things up."""

    manifests: list[Manifest]
    services: dict[tuple[str, str], Manifest] = field(default_factory=dict)
    by_kind: dict[tuple[str, str], Manifest] = field(default_factory=dict)
    configmaps: dict[str, dict[str, str]] = field(default_factory=dict)
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    # The objects among `manifests` that a controller makes from another (launchers.expand), by their ref.
    children: dict[str, Child] = field(default_factory=dict)

    @classmethod
    def of(cls, manifests: list[Manifest], children: list[Child] | None = None) -> "Bundle":
        b = cls(manifests, children={c.manifest.ref: c for c in children or []})
        for m in manifests:
            kind = m.kind
            b.by_kind.setdefault((kind, m.name), m)
            if kind == "Service":
                b.services[(m.namespace, m.name)] = m
            elif kind == "ConfigMap":
                b.configmaps[m.name] = {str(k): str(v) for k, v in mapping(m.obj.get("data")).items()}
            elif kind == "Secret":
                b.secrets[m.name] = {str(k): str(v) for k, v in mapping(m.obj.get("stringData")).items()}
        return b

    def find(self, kind: str, name: str) -> Manifest | None:
        return self.by_kind.get((kind, name))


@dataclass
class Check:
    """A finding a controller's own admission (webhook, defaulter) or semantics yields about a workload: the rule
    that reports it decides its id and severity."""

    field: str | None
    message: str
    hint: str
    obj: Manifest | None = None
    # None: the reporting rule's default severity.
    severity: str | None = None


@dataclass
class ScaleSpec:
    """Where a patch of this launcher holds the topology `make scale` changes: paths into the patched object, with
    `*` for any key. The pod count is written `nodes + offset` at each `pods` path."""

    pods: list[tuple[tuple[Any, ...], int]]
    nproc: list[tuple[Any, ...]] = field(default_factory=list)
    # The container whose NNODES / NPROC_PER_NODE env the repository's bases read, where torchrun gets flags.
    env_container: tuple[Any, ...] | None = None
    resources: list[tuple[Any, ...]] = field(default_factory=list)
    nproc_quoted: bool = False


# --- after a pod ends: what the kubelet and the controller do (the simulator's faults, policies/faults.py) --------

RESTART_CONTAINER = "restart-container"  # the kubelet starts the container again in the same pod (same name, IP, volumes)
RECREATE_POD = "recreate-pod"            # the controller creates a new pod for the same index (a fresh emptyDir)
RECREATE_ALL = "recreate-all"            # every pod of the workload is deleted and created again
FAIL = "fail"                            # the workload is failed: its other pods are deleted
WAIT = "wait"                            # nothing restarts the pod: the rest of the world waits for it
SUCCEEDED = "succeeded"                  # the pod completed

# The kubelet's container restart back-off (kubernetes v1.36.0 pkg/kubelet/kubelet.go: backOffPeriod 10 s,
# MaxContainerBackOff 300 s; the ReduceDefaultCrashLoopBackOffDecay gate, 1 s to 60 s, is alpha and off in 1.36).
KUBELET_SOURCE = "kubernetes v1.36.0 pkg/kubelet/kubelet.go backOffPeriod/MaxContainerBackOff"
KUBELET_BACKOFF, KUBELET_MAX_BACKOFF = 10.0, 300.0


@dataclass
class PodExit:
    """A pod of a workload that ended, as the controllers see it."""

    index: int            # the pod's world index (Workload.pod)
    exit_code: int        # the training container's exit code (128 + the signal when killed)
    deleted: bool = False  # the pod was deleted or evicted (carries DisruptionTarget): the kubelet restarts nothing


@dataclass
class RestartCount:
    """What the kubelet and the controller counted so far for one workload."""

    container_restarts: dict[int, int] = field(default_factory=dict)  # restartCount, per pod index
    failed_pods: dict[int, int] = field(default_factory=dict)         # failed pods counted, per index
    workload_restarts: int = 0                                        # whole-workload restarts (JobSet)

    def total_restarts(self) -> int:
        return sum(self.container_restarts.values())

    def total_failed(self) -> int:
        return sum(self.failed_pods.values())


@dataclass
class Decision:
    """What happens after a pod ended: the action, who decides, the settings that decided, and where upstream."""

    action: str
    controller: str
    why: str
    source: str
    delay: float = 0.0   # seconds before the restart (back-off)
    counted: bool = True  # counted against the workload's limit


def kubelet_restarts(pod_spec: dict[str, Any], ended: PodExit, count: RestartCount, who: str = "kubelet"
                     ) -> Decision | None:
    """The kubelet restarts a container in place (restartPolicy Always, or OnFailure and a non-zero exit) unless the
    pod was deleted; the first restart at once, then 10 s doubling to 300 s."""
    policy = pod_spec.get("restartPolicy") or "Always"
    if ended.deleted or policy == "Never" or (policy == "OnFailure" and ended.exit_code == 0):
        return None
    n = count.container_restarts.get(ended.index, 0)
    delay = 0.0 if n == 0 else min(KUBELET_BACKOFF * 2 ** (n - 1), KUBELET_MAX_BACKOFF)
    return Decision(RESTART_CONTAINER, who, f"restartPolicy {policy}: container restarted in place (restart "
                    f"{n + 1}, back-off {delay:.0f} s)", KUBELET_SOURCE, delay)


class Launcher:
    """One controller: the kinds it owns, the pods it creates and where a user sets what it reads. Subclasses live
    one per module in this package; consumers (rules, plan, simulate, scale, diff, Argo CD) ask these methods."""

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    kinds: ClassVar[tuple[tuple[str, str], ...]] = ()
    # The kinds among `kinds` that are cluster-scoped.
    cluster_scoped: ClassVar[tuple[tuple[str, str], ...]] = ()
    # Creates pods itself (a TrainingRuntime only holds templates another kind uses).
    starts_pods: ClassVar[bool] = True
    # Made for training: always counted as a training workload (others count when they start a launcher).
    for_training: ClassVar[bool] = False
    # The controller creates the DNS records its pods are reached at (its own Services).
    managed_dns: ClassVar[bool] = False
    # Fields the API server or the controller refuses to change in place (make diff, ARGO006).
    immutable: ClassVar[tuple[str, ...]] = ()
    # Where a finished workload's TTL lives (ARGO002).
    ttl_field: ClassVar[tuple[str, ...] | None] = None
    scale: ClassVar[ScaleSpec | None] = None

    def owns(self, m: Manifest) -> bool:
        group = m.api_version.split("/")[0] if "/" in m.api_version else ""
        return (group, m.kind) in self.kinds

    @property
    def kind(self) -> str:
        return self.kinds[0][1]

    def build(self, m: Manifest, bundle: Bundle) -> Workload:
        raise NotImplementedError

    # --- where a user sets what the controller reads
    def pods_field(self, w: Workload) -> str:
        return "spec"

    def setting_field(self, w: Workload, name: str) -> str | None:
        """The field that sets a torchrun setting the controller injects (`nproc`, `nnodes`, `rdzv_id`)."""
        return None

    def dns_field(self, w: Workload, pod: Pod) -> str:
        """The field that names the Service the pods are published under."""
        return f"{pod.spec_field}.subdomain"

    def address(self, w: Workload, pod: Pod) -> str:
        """The name other pods reach `pod` at, short form (without the namespace)."""
        return f"{pod.hostname}.{pod.subdomain}" if pod.subdomain else pod.hostname

    def dns_names(self, m: Manifest) -> list[tuple[str, str, str, bool]]:
        """(field, name, what it is, is a Service name) for every DNS name the controller derives from this object's
        name, the longest of each kind (ARGO003): Service names must be DNS-1035 labels, hostnames DNS-1123 labels."""
        return []

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        """(field path of the template, template) for every pod template this object holds."""
        return iter(())

    def job_specs(self, m: Manifest, trainer_only: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
        """(field path, Job spec) of the batch Jobs this object stands for."""
        return iter(())

    def jobs(self, w: Workload) -> tuple[Manifest, list[tuple[str, dict[str, Any]]], str | None] | None:
        """The batch Jobs the workload's pods run in, the object they are written in, and the pod restartPolicy that
        object's controller defaults to (None: the API server's); None where no Job runs them."""
        return None

    def container_settings(self, m: Manifest, key: str) -> list[tuple[str, Any]]:
        """(field, value) of the container settings (`image`, `resources`) this object sets outside any pod
        template, which the controller writes into the pods (a TrainJob's spec.trainer)."""
        return []

    def training_env(self, m: Manifest) -> Iterator[tuple[str, list[Any]]]:
        """(field, env list) of the training containers' env as written in this object."""
        for field_path, tmpl in self.pod_templates(m):
            for i, c in enumerate(listing(dig(tmpl, "spec", "containers"))):
                if isinstance(mapping(c).get("env"), list):
                    yield f"{field_path}.spec.containers[{i}].env", c["env"]

    # --- admission and semantics
    def defaulted(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The object as the API server checks it against its schema: after this controller's mutating webhook,
        which runs first (k8s.io/apiserver pkg/endpoints/handlers/create.go createHandler: mutating admission, then
        the registry's create, which validates against the schema), so a field the CRD requires and the webhook
        fills in is not missing. Never changes `obj` (a copy where it differs)."""
        return obj

    def admission(self, w: Workload, bundle: Bundle, torchrun: bool) -> list[Check]:
        """What the controller's webhook refuses, or what it does that breaks a torchrun world (TOPO011); `torchrun`
        says whether the training container starts a launcher."""
        return []

    def gang_scheduler(self, w: Workload) -> str | None:
        """The gang scheduling the workload itself declares, in words (RES005)."""
        return None

    def startup(self, w: Workload) -> Check | None:
        """Why not every pod of the world starts at once, where the controller's settings say so (TOPO010)."""
        return None

    def publishes_not_ready(self, w: Workload) -> Check | None:
        """With managed DNS: why the controller's Service hides pods that are not Ready, if it does (RDZV001)."""
        return None

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        """What restarts the world after a failure, in words (empty: nothing does) (RESTART004)."""
        return []

    def after_exit(self, w: Workload, bundle: Bundle, ended: PodExit, count: RestartCount) -> Decision:
        """What the kubelet and this controller do when a pod of the workload ends (`ended`), given what they counted
        so far (`count`, which the caller updates from the decision). Each module cites its upstream source."""
        return Decision(WAIT, self.title or self.id, "not modelled for this controller: nothing is restarted here",
                        "")

    def services(self, w: Workload) -> list[dict[str, Any]]:
        """The Services the controller creates for the workload's pods (name, clusterIP, selector, ...)."""
        return []

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        """Set the object (a deep copy) to `nodes` pods of one process each, for a CPU simulation; what changed."""
        return []

    # --- objects made from this one
    def children(self, m: Manifest) -> tuple[list[Child], list[Check]]:
        """The objects the controller makes from this one for other controllers to run (Katib's trial jobs), and
        what its webhook refuses about this object (each Check's `obj` set to it)."""
        return [], []

    def unlinked(self, w: Workload) -> Check | None:
        """For a workload whose training container starts no launcher and gets no env:// variables: why its pods
        form no world together, where the controller's settings show it (a TrainJob of several nodes, whose PET_*
        env only torchrun reads); None where they do not."""
        return None
