"""The pods a controller creates, as the kubelet would run them: a PodGroup (pods made from one template, everything
the controller adds a function of the pod's index), the Pod made from it with each container's env worked out
(envFrom, `$(VAR)`, the downward API, ConfigMaps and Secrets, what the controller injects), and the files a mounted
ConfigMap or Secret gives a container."""
from __future__ import annotations

import dataclasses
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ..kube.values import as_int, expand_k8s, listing, mapping, quantity_cpu


# Labels and annotations more than one controller reads or writes (the Job controller's index is used by JobSet and
# the Trainer too). Each controller's own constants live in its module.
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
POD_INDEX = "apps.kubernetes.io/pod-index"
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
# Accelerators other than GPUs, as their device plugins name them: a process runs on one of their cores, not on the
# pod's CPUs, and how many cores a device has depends on the machine (AWS Neuron: aws-neuron/aws-neuron-sdk
# containers/tutorials/k8s-setup.rst, the devices and their NeuronCores; GKE's TPU chips; Intel Gaudi's device plugin).
TPU = "google.com/tpu"
ACCELERATOR_RESOURCES = ("aws.amazon.com/neuron", "aws.amazon.com/neurondevice", "aws.amazon.com/neuroncore", TPU,
                         "habana.ai/gaudi")

# How an injected variable meets one the user wrote in the same container.
OVERRIDE = "override"    # appended after the user's env: the kubelet takes the last definition (the controller wins)
IF_ABSENT = "if-absent"  # added only when the container does not define it (the user wins)
FIRST = "first"          # put first, a user's variable of the same name dropped (the user's `$(VAR)` can use it)


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
    # Where `command` or `args` is written when not under `field`: a TrainJob's `node` container is `spec.trainer`,
    # but a command the TrainJob leaves out is the runtime's.
    key_fields: dict[str, str] = dataclasses.field(default_factory=dict)
    _env: dict[str, str | None] = dataclasses.field(default_factory=dict, repr=False)
    _fields: dict[str, str] = dataclasses.field(default_factory=dict, repr=False)
    _injected: set[str] = dataclasses.field(default_factory=set, repr=False)
    # Works the env out when first read: the rules read the training container's, `make plan` every container's.
    _pending: Callable[[], None] | None = dataclasses.field(default=None, repr=False)
    # command + args after `$(VAR)` expansion with each token's field path (Pod.argv), worked out once.
    _argv: tuple[list[str], list[str]] | None = dataclasses.field(default=None, repr=False)

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

    def env_from_away(self) -> str:
        """The training container's envFrom sources the manifests do not hold ("ConfigMap a, Secret b"): any
        variable may come from them, as the kubelet reads them."""
        away = []
        for src in listing(self.container.get("envFrom")):
            kind, ref = ("ConfigMap", "configMapRef") if "configMapRef" in mapping(src) else ("Secret", "secretRef")
            name = str(mapping(mapping(src).get(ref)).get("name"))
            if name not in self.stores[0 if kind == "ConfigMap" else 1]:
                away.append(f"{kind} {name}")
        return ", ".join(away)

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
        assert c is not None, "make_pod readies every Pod (Pod.ready sets main)"
        if c._argv is None:
            out: list[str] = []
            fields: list[str] = []
            env = c.env
            for key in ("command", "args"):
                for i, tok in enumerate(listing(c.container.get(key))):
                    tok = str(tok)
                    out.append(expand_k8s(tok, env) if "$" in tok else tok)
                    fields.append(f"{c.key_fields.get(key, c.field)}.{key}[{i}]")
            c._argv = (out, fields)
        return c._argv



def _none(i: int) -> dict[str, str]:
    return {}


# A PodGroup's naming functions for a launcher that builds groups in a loop: each binds its values when called (as a
# lambda's default arguments would, which mypy cannot type).
def indexed(prefix: str, offset: int = 0) -> Callable[[int], str]:
    """Pod i is named `<prefix>-<i + offset>`."""
    return lambda i: f"{prefix}-{i + offset}"


def fixed(value: str) -> Callable[[int], str]:
    """Every pod of the group is named `value` (a group of one)."""
    return lambda i: value


def copies(values: dict[str, str]) -> Callable[[int], dict[str, str]]:
    """Every pod gets its own copy of `values` (labels, annotations)."""
    return lambda i: dict(values)


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
    # Per container index, where its command or args is written when not under its container field (ContainerEnv).
    container_key_fields: dict[int, dict[str, str]] = field(default_factory=dict)
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

    @property
    def spec(self) -> dict[str, Any]:
        """The pod spec of every pod of the group (the template's; Pod.spec)."""
        spec: dict[str, Any] = self.shared()[2]
        return spec



def make_pod(group: PodGroup, local: int, index: int, namespace: str, configmaps: dict[str, dict[str, str]],
             secrets: dict[str, dict[str, str]], by: str) -> Pod:
    """Pod `local` of `group` (world index `index`, -1 for an auxiliary pod) in `namespace`, its containers' env
    worked out when first read against these ConfigMaps and Secrets; `by` names who injects (`<Kind> controller`)."""
    base_labels, base_annotations, spec, raw, training, spec_field = group.shared()
    labels = dict(base_labels)
    labels.update(group.labels(local))
    annotations = dict(base_annotations)
    annotations.update(group.annotations(local))
    hostname = group.hostname(local) if group.hostname_forced else (spec.get("hostname") or group.hostname(local))
    subdomain = group.subdomain if group.subdomain_forced else (spec.get("subdomain") or group.subdomain)
    pod = Pod(index=index, name=group.name(local), hostname=str(hostname), subdomain=subdomain or None,
              namespace=namespace, labels=labels, annotations=annotations, spec=spec,
              spec_field=spec_field, containers=[], init_containers=[], training=training,
              stores=(configmaps, secrets))
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
                                           c, False, key_fields=dict(group.container_key_fields.get(i, {}))))
    for ce in pod.init_containers + pod.containers:
        ce._pending = (lambda ce=ce: _fill_env(pod, ce, group.inject(local, ce.name, ce.init), configmaps, secrets,
                                               by))
    return pod.ready()


_ENV_FROM = re.compile(r"\.envFrom\[(\d+)\]$")


def env_from_configmap(container: dict[str, Any], field: str) -> str | None:
    """The ConfigMap a variable of `container` comes from, where its field (ContainerEnv.env_fields) is one of the
    container's envFrom entries and that entry names a configMapRef; None otherwise."""
    m = _ENV_FROM.search(field)
    if m is None:
        return None
    sources = listing(container.get("envFrom"))
    i = int(m.group(1))
    name = mapping(mapping(sources[i]).get("configMapRef")).get("name") if i < len(sources) else None
    return str(name) if name else None


def _fill_env(pod: Pod, ce: ContainerEnv, injected: list[Injected], configmaps: dict[str, dict[str, str]],
              secrets: dict[str, dict[str, str]], by: str) -> None:
    env, fields, c, cf = ce._env, ce._fields, ce.container, ce.field  # being filled: not through the properties
    for i, src in enumerate(listing(c.get("envFrom"))):
        src = mapping(src)
        prefix = str(src.get("prefix") or "")
        ref = mapping(src.get("configMapRef") or src.get("secretRef"))
        store = configmaps if "configMapRef" in src else secrets
        where = f"{cf}.envFrom[{i}]"
        for k, v in (store.get(str(ref.get("name"))) or {}).items():
            env[prefix + k] = v
            fields[prefix + k] = where
    first = [j for j in injected if j.mode == FIRST]
    for j in first:
        _inject(pod, ce, j, by)
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
            env[name] = _value_from(mapping(var["valueFrom"]), pod, configmaps, secrets)
        else:
            env[name] = ""
    # Controllers append their variables after the user's (so a user's `$(VAR)` in an env value cannot see
    # them; command and args can): the kubelet keeps the last definition of a name.
    for j in injected:
        if j.mode == OVERRIDE or (j.mode == IF_ABSENT and j.name not in defined):
            _inject(pod, ce, j, by)


def _inject(pod: Pod, ce: ContainerEnv, j: Injected, by: str) -> None:
    # The controller's variables are part of the pod's env list: the kubelet expands a `$(VAR)` in their values
    # against the variables before them (a PyTorchJob's `elasticPolicy.rdzvId: $(RUN_ID)` becomes the run id).
    value = j.value if j.value is None or "$" not in j.value else expand_k8s(j.value, ce._env)
    ce._env[j.name] = downward(j.field_ref, pod) if j.field_ref else value
    ce._fields[j.name] = by
    ce._injected.add(j.name)


def _value_from(source: dict[str, Any], pod: Pod, configmaps: dict[str, dict[str, str]],
                secrets: dict[str, dict[str, str]]) -> str | None:
    """Resolve a downward-API, ConfigMap or Secret reference the way the kubelet would, where it can be known."""
    if "fieldRef" in source:
        return downward(str(mapping(source.get("fieldRef")).get("fieldPath") or ""), pod)
    if "configMapKeyRef" in source:
        ref = mapping(source["configMapKeyRef"])
        return (configmaps.get(str(ref.get("name"))) or {}).get(str(ref.get("key")))
    if "secretKeyRef" in source:
        ref = mapping(source["secretKeyRef"])
        return (secrets.get(str(ref.get("name"))) or {}).get(str(ref.get("key")))
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


def gpu_resources(section: Any) -> list[str]:
    """The GPU resource names (GPU_RESOURCES) a `requests` or `limits` mapping holds, in the table's order: the one
    place that knows which extended resources are GPUs (every reader, make scale's writer and the simulator's
    scale-down ask here)."""
    held = mapping(section)
    return [key for key in GPU_RESOURCES if key in held] if held else []


def drop_gpus(resources: Any) -> list[str]:
    """Remove every GPU resource from a container's `resources` (requests and limits), in place: `section.name` of
    each one removed that had a value."""
    removed = []
    for section in ("limits", "requests"):
        block = mapping(mapping(resources).get(section))
        for key in gpu_resources(block):
            if block.pop(key) is not None:
                removed.append(f"{section}.{key}")
    return removed


def trainer_gpus_per_node(resources: dict[str, Any]) -> int:
    """The Trainer's own reading (kubeflow/trainer pkg/runtime runtime.GetNumGPUPerNode): the requests of the first
    resource whose name contains "gpu", else its limits. It decides what `numProcPerNode: auto` becomes, so it is
    modelled as the Trainer reads it, not as the table above."""
    def count(section: Any) -> int:
        for name, q in mapping(section).items():
            if "gpu" in str(name).lower():
                return as_int(q, 0) or 0
        return 0
    return count(resources.get("requests")) or count(resources.get("limits"))


def accelerators(container: dict[str, Any]) -> list[str]:
    """`N name` for each accelerator other than a GPU (ACCELERATOR_RESOURCES) the container asks for, its limit else
    its request."""
    res = mapping(container.get("resources"))
    limits, requests = mapping(res.get("limits")), mapping(res.get("requests"))
    out = []
    for key in ACCELERATOR_RESOURCES:
        value = limits.get(key, requests.get(key))
        if value is not None and str(value) not in ("0", ""):
            out.append(f"{value} {key}")
    return out


def uncounted_devices(container: dict[str, Any]) -> list[str]:
    """What may give the container a GPU that GPU_RESOURCES does not count: another extended resource naming a GPU
    (a MIG slice `nvidia.com/mig-3g.40gb`, a time-sliced `nvidia.com/gpu.shared`) or a DRA claim (`resources.claims`,
    whose devices the cluster's DeviceClass decides). Where one is asked for, "no GPU" holds only on a condition."""
    res = mapping(container.get("resources"))
    names = {str(k) for part in ("limits", "requests") for k in mapping(res.get(part))}
    out = sorted(k for k in names if k not in GPU_RESOURCES and ("gpu" in k.lower() or k.startswith("nvidia.com/")))
    return out + [f"resource claim '{mapping(c).get('name')}'" for c in listing(res.get("claims"))]


def container_resources(container: dict[str, Any]) -> tuple[int, int | None, float | None, float | None]:
    """(GPUs, GPU request, CPU limit, CPU request) of a container: its GPU limit (a request alone still claims the
    devices: extended resources cannot overcommit), and its CPU in cores."""
    res = container.get("resources") or {}
    limits = res.get("limits") or {}
    requests = res.get("requests") or {}
    gpus = 0
    gpu_req = None
    for key in gpu_resources(limits):
        gpus = as_int(limits.get(key), 0) or 0
    for key in gpu_resources(requests):
        gpu_req = as_int(requests.get(key))
    if not gpus and gpu_req:
        gpus = gpu_req
    return gpus, gpu_req, quantity_cpu(limits.get("cpu")), quantity_cpu(requests.get("cpu"))
