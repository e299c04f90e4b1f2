"""The protocol every launcher module implements (Launcher) and the types it speaks in: the Workload that stands for
an object's pods, the Bundle of objects they are looked up in, a Check (what a controller's admission or semantics
finds), a Child (an object a controller makes from another) and a ScaleSpec (where `make scale` writes). Consumers
(rules, plan, simulate, scale, diff, Argo CD) ask these methods instead of branching on kinds; the pods themselves are
modelled in pods.py, what happens after one ends in lifecycle.py."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Generic, Iterator, TypeVar, overload

from ..kube.values import dig, group_of, listing, mapping, version_of
from .kueue import KUEUE_GATE
from ..kube.objects import Manifest
from .lifecycle import WAIT, Decision, PodExit, RestartCount
from .pods import Pod, PodGroup, make_pod
from .scale_spec import ScaleSpec as ScaleSpec  # (kept importable from here: every launcher module names it so)


# The most pods of one group the model works out (bounded time and memory on any input); no controller admits more.
MAX_GROUP_PODS = 1_000_000


class Unreadable(Exception):
    """An object the model cannot work its pods out of (a negative replica count, which the controller's webhook
    refuses): the engine says it skipped it, in one info line, instead of an internal error."""


@dataclass
class Need:
    """An object a controller needs to act on a workload: kind, namespace ('' when cluster-scoped), name, the field
    that names it, and what happens without it."""

    kind: str
    namespace: str
    name: str
    field: str
    without: str


@dataclass
class Workload:
    """An object that starts pods through a modelled controller, and the pods it stands for. What a controller's
    module knows beyond the pods lives in typed fields: those below, which rules read, and those of the module's own
    subclass (a Job's completions, a TrainJob's runtime template), which only the module reads."""

    manifest: Manifest
    launcher: "Launcher[Any]"
    groups: list[PodGroup]
    namespace: str
    notes: list[str] = field(default_factory=list)
    configmaps: dict[str, dict[str, str]] = field(default_factory=dict)
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    # How many alike copies of it run at once (Katib's parallel trials); GPU totals count each.
    copies: int = 1
    # Set when the controller creates no pods until the workload is resumed (spec.suspend, Kueue's admission).
    suspended: bool = False
    # The LocalQueue whose admission the workload waits for: set where the environment declares Kueue with this
    # kind's integration on and the object carries the queue label (launchers.workloads).
    queued: str | None = None
    # The controller its managedBy names where that is not this one (MultiKueue, an external controller): the
    # controller here skips the object and creates none of its pods (Launcher.manager).
    managed_by: str | None = None
    # Why the controller's pods cannot be worked out from these manifests (a TrainJob whose runtime is not in them).
    unresolved: Check | None = None
    # Objects the controller needs before it acts, beyond the pods' own references (a TrainJob's runtime): REF001
    # lists those not in the manifests, an error where the environment is self-contained.
    needs: list[Need] = field(default_factory=list)
    # The object the pods' templates are written in, where it is not this one (a TrainJob's runtime): a field
    # written `(runtime) <path>` is that object's.
    runtime: Manifest | None = None
    # The node range the controller's own elastic policy declares, (min, max), a None bound meaning the replica
    # count (a PyTorchJob's elasticPolicy); None without an elastic policy.
    elastic_range: tuple[int | None, int | None] | None = None
    _pod_cache: dict[int, Pod] = field(default_factory=dict, repr=False)

    @property
    def launcher_id(self) -> str:
        """The id of its launcher (`pytorchjob`, `indexed-job` ...), as `make plan` shows it."""
        return self.launcher.id

    @property
    def managed_dns(self) -> bool:
        return self.launcher.managed_dns

    @property
    def pods(self) -> int:
        """The pods of the training world (auxiliary pods such as initializers not counted)."""
        return sum(g.count for g in self.groups if not g.aux)

    @property
    def world_groups(self) -> list[PodGroup]:
        return [g for g in self.groups if not g.aux]

    @property
    def odd_group(self) -> PodGroup | None:
        """The first group whose pod count no controller admits (negative, not a number, or more than the model
        works out), None where every count is one: only a workload without one has pods to read."""
        for g in self.groups:
            if not isinstance(g.count, int) or not 0 <= g.count <= MAX_GROUP_PODS:
                return g
        return None

    @property
    def all_pods(self) -> int:
        return sum(g.count for g in self.groups)

    def group_at(self, index: int) -> tuple[PodGroup, int]:
        """The group of the pod with world index `index`, and the pod's index within it."""
        for g in self.groups:
            if not g.aux and g.offset <= index < g.offset + g.count:
                return g, index - g.offset
        raise IndexError(index)

    def pod(self, index: int) -> Pod:
        """The pod with world index `index` (0 = the first pod: Master, completion index 0, ordinal 0)."""
        cached = self._pod_cache.get(index)
        if cached is None:
            group, local = self.group_at(index)
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

    def first_pods(self) -> Iterator[Pod]:
        """The first pod of every group that has pods, auxiliary ones included: one per template, as created."""
        for g in self.groups:
            if isinstance(g.count, int) and g.count > 0:
                yield self.pod(g.offset) if not g.aux else self._make_pod(g, 0, -1)

    def _make_pod(self, group: PodGroup, local: int, index: int) -> Pod:
        return make_pod(group, local, index, self.namespace, self.configmaps, self.secrets,
                        f"{self.manifest.kind} controller")


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


T = TypeVar("T")


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
    # What a launcher reads of the whole bundle for each of its workloads, made once (`derived`).
    _derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

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

    def derived(self, key: str, make: Callable[["Bundle"], T]) -> T:
        """`make(self)`, made on the first call for `key` and kept: an index over every manifest that each
        workload of a launcher reads (a walk per workload would be quadratic in the bundle)."""
        if key not in self._derived:
            self._derived[key] = make(self)
        value: T = self._derived[key]
        return value


class Names(Sequence[str]):
    """Pod or host names in order, segment by segment (how many, and the name of the i-th), never all made at once:
    a count is whatever the manifest says (2**31 workers), so only the names read are made. `member` answers `in`
    without walking them (else `in` walks them)."""

    def __init__(self, segments: list[tuple[int, Callable[[int], str]]],
                 member: Callable[[str], bool] | None = None) -> None:
        self.segments = [(max(count, 0), name) for count, name in segments]
        self.member = member

    def __len__(self) -> int:
        return sum(count for count, _ in self.segments)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            return [self[j] for j in range(start, stop, step)]
        j = i + len(self) if i < 0 else i
        for count, name in self.segments:
            if 0 <= j < count:
                return name(j)
            j -= count
        raise IndexError(i)

    def __contains__(self, value: object) -> bool:
        if self.member is not None:
            return isinstance(value, str) and self.member(value)
        return super().__contains__(value)

    def shown(self, most: int = 4) -> str:
        """The names joined by commas, the middle left out past `most`."""
        n = len(self)
        if n <= most:
            return ", ".join(self)
        return ", ".join(self[:most - 1]) + f", ... {self[-1]} ({n} in all)"


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
    # The controller's feature gate (launcher id, gate) the finding depends on: where the environment declares that
    # controller's gates (`featureGates`), the gate on drops it and off makes it an error (rules/topo011 decides).
    gate: tuple[str, str] | None = None


@dataclass
class MpiWorld:
    """The world mpirun forms over a workload's pods as its controller lays it out: the hostfile's hosts (one per
    pod that runs ranks), the slots of each, the GPUs of one host's container, the pods created in all (the hosts
    and a launcher that runs no ranks), and the hosts a node count written at the ScaleSpec's pods path gives."""

    hosts: Names
    slots: int
    gpus: int
    pods: int
    hosts_for: Callable[[int], int] = lambda nodes: nodes
    pods_for: Callable[[int], int] = lambda nodes: nodes


# The Workload subclass a launcher builds and its methods are asked about (a Launcher[JobWorkload] reads a Job's own
# fields); consumers that hold any launcher see Launcher[Any].
W = TypeVar("W", bound=Workload)


class Launcher(Generic[W]):
    """One controller: the kinds it owns, the pods it creates and where a user sets what it reads. Subclasses live
    one per module in this package; consumers (rules, plan, simulate, scale, diff, Argo CD) ask these methods."""

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    # Where docs and messages list it among the launchers (lower first; a new module may leave the default: last).
    order: ClassVar[int] = 1000
    # The upstream repository and tag the module follows (its docstrings cite files and lines there).
    upstream: ClassVar[str] = ""
    conformance: ClassVar[str | None] = None  # its folder of cases from upstream's tests, under tests/conformance/
    kinds: ClassVar[tuple[tuple[str, str], ...]] = ()
    # Versions of those kinds the model does not read (an older API of another shape): objects in them get no launcher.
    unread_versions: ClassVar[tuple[str, ...]] = ()
    cluster_scoped: ClassVar[tuple[tuple[str, str], ...]] = ()  # the kinds among `kinds` that are cluster-scoped
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
    # The JSON-patch path of the limit on container restarts that a lost pod of a static world spends one per pod
    # (PyTorchJob's runPolicy.backoffLimit): `make scale` and `make new-env` set a patch that writes it to
    # losses x pods + 1 for the environment's podLosses (RESTART007 checks it).
    restart_budget_path: ClassVar[str | None] = None
    # Where the object names the controller that manages it (`managedBy`), the name this controller answers to (an
    # unset field means this one), and the upstream source that skips an object another manages; where the object
    # says it is suspended (no pods until resumed) and the source that holds them back.
    managed_by_field: ClassVar[tuple[str, ...] | None] = None
    controller_name: ClassVar[str] = ""
    managed_by_source: ClassVar[str] = ""
    suspend_field: ClassVar[tuple[str, ...] | None] = None
    suspend_source: ClassVar[str] = ""
    # The Kueue integration that queues this kind (its FrameworkName at Kueue v0.19.2, one of kube.KUEUE_FRAMEWORKS),
    # None where Kueue has none: where an environment declares that integration on (`kueueFrameworks`), an object
    # labelled with a LocalQueue waits for Kueue's admission (launchers/kueue.py says how).
    kueue_framework: ClassVar[str | None] = None
    # The controller's feature gates the model reads, each with its default (an environment's `featureGates` names
    # them under the launcher's id).
    feature_gates: ClassVar[dict[str, bool]] = {}

    def owns(self, m: Manifest) -> bool:
        return (group_of(m.api_version), m.kind) in self.kinds and version_of(m.api_version) not in self.unread_versions

    @property
    def kind(self) -> str:
        return self.kinds[0][1]

    @property
    def conformance_folder(self) -> str:
        """Its folder under tests/conformance/."""
        return self.conformance or self.id

    def build(self, m: Manifest, bundle: Bundle) -> W:
        raise NotImplementedError

    def manager(self, m: Manifest) -> str | None:
        """The controller the object's managedBy names where that is another than this one (every upstream reads it
        the same way: set and not its own name, the empty string included); None where this controller manages it."""
        if self.managed_by_field is None:
            return None
        value = dig(m.obj, *self.managed_by_field)
        return None if value is None or value == self.controller_name else str(value)

    def suspended(self, m: Manifest) -> bool:
        """The object says it is suspended: its controller creates no pods until it is resumed."""
        return self.suspend_field is not None and dig(m.obj, *self.suspend_field) is True

    def not_created(self, w: W) -> str | None:
        """Why the controller here creates none of the workload's pods now, with its upstream source; None where it
        does (`make plan` says it per workload, the topology checks of a workload another controller manages are
        skipped and said so)."""
        if w.managed_by is not None:
            return (f"managedBy '{w.managed_by}' names another controller: the {self.kind} controller "
                    f"skips it and creates no pods here ({self.managed_by_source})")
        if w.queued is not None and self.suspend_field is not None:
            return (f"queued: Kueue suspends it at creation ({'.'.join(self.suspend_field)} set true) and resumes it "
                    f"once LocalQueue '{w.queued}' admits the whole workload; its pods are checked here as they will "
                    "be (kubernetes-sigs/kueue v0.19.2 pkg/controller/jobframework/defaults.go:36-46, "
                    f"{self.kueue_framework} integration)")
        if w.suspended:
            return (f"suspended ({'.'.join(self.suspend_field or ())} is true): its pods are created once it is "
                    f"resumed, and are checked here as they will be ({self.suspend_source})")
        return None

    def gated(self, w: W) -> str | None:
        """Why the workload's pods, once created, wait for Kueue's admission before they are scheduled (a pod-group
        integration: the pods exist behind a scheduling gate); None where they do not."""
        if w.queued is None or self.suspend_field is not None:
            return None
        return (f"queued: each pod is created behind the scheduling gate {KUEUE_GATE} and scheduled once LocalQueue "
                f"'{w.queued}' admits the whole group (kubernetes-sigs/kueue v0.19.2 "
                f"pkg/controller/jobs/pod/pod_webhook.go:109, 176, {self.kueue_framework} integration)")

    # --- where a user sets what the controller reads
    def pods_field(self, w: W) -> str:
        return "spec"

    def setting_field(self, w: W, name: str) -> str | None:
        """The field that sets a setting the controller injects (`nproc`, `nnodes`, `rdzv_id`, `resources`)."""
        return None

    def dns_field(self, w: W, pod: Pod) -> str:
        """The field that names the Service the pods are published under."""
        return f"{pod.spec_field}.subdomain"

    def address(self, w: W, pod: Pod) -> str:
        """The name other pods reach `pod` at, short form (without the namespace)."""
        return f"{pod.hostname}.{pod.subdomain}" if pod.subdomain else pod.hostname

    def dns_names(self, m: Manifest) -> list[tuple[str, str, str, bool]]:
        """(field, name, what it is, is a Service name) for every DNS name the controller derives from this object's
        name, the longest of each kind (ARGO003): Service names must be DNS-1035 labels, hostnames DNS-1123 labels."""
        return []

    def finished_ttl(self, m: Manifest) -> tuple[str, Any, str] | None:
        """(field, value, what to remove so that it is not) of the TTL after which the finished object itself is
        deleted (ARGO002): `ttl_field`'s where it is set; None where nothing deletes the object. A launcher whose
        object is deleted only under some settings (KubeRay's RayJob) says so here."""
        value = dig(m.obj, *self.ttl_field) if self.ttl_field else None
        return None if value is None or self.ttl_field is None else (".".join(self.ttl_field), value, "the TTL")

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        """(field path of the template, template) for every pod template this object holds."""
        return iter(())

    def job_specs(self, m: Manifest, trainer_only: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
        """(field path, Job spec) of the batch Jobs this object stands for."""
        return iter(())

    def jobs(self, w: W) -> tuple[Manifest, list[tuple[str, dict[str, Any]]], str | None] | None:
        """The batch Jobs the workload's pods run in, the object they are written in, and the pod restartPolicy that
        object's controller defaults to (None: the API server's); None where no Job runs them."""
        return None

    def container_settings(self, m: Manifest, key: str) -> list[tuple[str, Any]]:
        """(field, value) of the container settings (`image`, `command`, `resources`) this object sets outside any pod
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

    def admission(self, w: W, bundle: Bundle, torchrun: bool) -> list[Check]:
        """What the controller's webhook refuses, or what it does that breaks a torchrun world (TOPO011); `torchrun`
        says whether the training container starts a launcher."""
        return []

    def gang_scheduler(self, w: W) -> str | None:
        """The gang scheduling the workload itself declares, in words (RES005)."""
        return None

    def startup(self, w: W) -> Check | None:
        """Why not every pod of the world starts at once, where the controller's settings say so (TOPO010)."""
        return None

    def publishes_not_ready(self, w: W) -> Check | None:
        """With managed DNS: why the controller's Service hides pods that are not Ready, if it does (RDZV001)."""
        return None

    def restarts(self, w: W, bundle: Bundle) -> list[str]:
        """What restarts the world after a failure, in words (empty: nothing does) (RESTART004)."""
        return []

    def restart_limit(self, w: W, losses: int) -> tuple[str, str]:
        """Where the limit that ends a world after its pods' failures is written, and how to let it survive `losses`
        lost pods (RESTART007's field and fix)."""
        return self.pods_field(w), f"let the controller restart the whole world at least {losses} times"

    def after_exit(self, w: W, bundle: Bundle, ended: PodExit, count: RestartCount) -> Decision:
        """What the kubelet and this controller do when a pod of the workload ends (`ended`), given what they counted
        so far (`count`, which the caller updates from the decision). Each module cites its upstream source."""
        return Decision(WAIT, self.title or self.id, "not modelled for this controller: nothing is restarted here",
                        "")

    def services(self, w: W) -> list[dict[str, Any]]:
        """The Services the controller creates for the workload's pods (name, clusterIP, selector, ...)."""
        return []

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        """Set the object (a deep copy) to `nodes` pods of one process each, for a CPU simulation; what changed."""
        return []

    # --- objects made from this one, read with the objects beside it (`bundle`: a Katib trial template's ConfigMap)
    def children(self, m: Manifest, bundle: Bundle) -> list[Child]:
        """The objects the controller makes from this one for other controllers to run (Katib's trial jobs)."""
        return []

    def refused(self, m: Manifest, bundle: Bundle) -> list[Check]:
        """What the controller's webhook refuses about this object, which starts no pods itself or makes objects for
        other controllers (a runtime, an Experiment); each Check's `obj` set to it."""
        return []

    def unchecked(self, m: Manifest) -> str | None:
        """For an object of a kind this launcher models without its pods (starts_pods False, though its controller
        starts pods: KubeRay's): what of it was not checked, in words (TOPO012's one info line per object); None
        where nothing is left out."""
        return None

    def unmodelled_world(self, w: W) -> str | None:
        """For a workload whose training container starts no launcher this model maps onto torchrun's settings: what
        starts its processes instead and what of its world is checked elsewhere, in words (said in TOPO012's one info
        line); None where nothing is known."""
        return None

    def mpi_world(self, w: W) -> MpiWorld | None:
        """Where the controller lays the workload's pods out as mpirun's world (a hostfile it writes): that world,
        which `make scale` edits in hosts and slots; None where it does not."""
        return None

    def unlinked(self, w: W) -> Check | None:
        """For a workload whose training container starts no launcher and gets no env:// variables: why its pods
        form no world together, where the controller's settings show it (a TrainJob of several nodes, whose PET_*
        env only torchrun reads); None where they do not."""
        return None

