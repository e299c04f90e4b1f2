"""Each training workload's effective topology, worked out from the launcher model exactly as torchrun would see it:
nnodes, processes per node, world size, GPUs, rank source, rendezvous backend and endpoint, and the Service behind it."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..kube.values import as_int, dig, env_entry
from ..launchers import COMPLETION_INDEX, POD_INDEX, Bundle, Check, Pod, Unreadable, Workload, workloads
from ..launchers.base import MAX_GROUP_PODS
from ..launchers.pods import container_resources
from ..kube.objects import Manifest
from ..command.shell import ShellError
from ..command.shellwords import RUN_TIME
from ..command.torchrun import (DIST_URL, DISTRIBUTED_CODE, WORLD_ENV, Invocation, Setting, find_invocation,
                                inline_python, split_endpoint, split_nnodes, with_accelerate_config)

# A setting torchrun takes from PET_<NAME>, which an envFrom the manifests do not hold may set (Setting.unknown_kind).
ENV_ELSEWHERE = "env-from-elsewhere"
_PET_SETTINGS = ("nnodes", "nproc_per_node", "node_rank", "rdzv_endpoint", "master_addr", "master_port")
MPI_LAUNCHERS = ("mpirun", "mpiexec", "orterun", "srun")
# What a script that starts distributed training shows in its text (an unreadable one is said unread only then).
_TRAINING_WORDS = ("torchrun", "torch.distributed", "accelerate", "MASTER_ADDR", "WORLD_SIZE", "deepspeed")
_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\{?([A-Za-z_][A-Za-z0-9_]*)")


class PodView:
    """What torchrun sees in one pod: the pod, its torchrun invocation (if any) and the resolved settings.
    Settings are worked out when first read: the rules read all of them on pod 0, the node rank on the others."""

    __slots__ = ("pod", "inv", "_cache", "script_error")

    def __init__(self, pod: Pod, inv: Invocation | None, script_error: str | None = None) -> None:
        self.pod = pod
        self.inv = inv
        self._cache: dict[str, Setting] = {}
        # Why the container's shell script could not be read (then `inv` is None: not known, not absent).
        self.script_error = script_error

    def _s(self, name: str) -> Setting:
        assert self.inv is not None, "settings are read of a torchrun invocation"
        s = _at_source(self.inv.setting(name, self.pod.env, self.pod.env_fields), self.pod)
        if s.origin == "default" and name in _PET_SETTINGS and self.inv.reads_pet_env and self.inv.open_args is None \
                and not (name == "rdzv_endpoint" and "master_addr" in self.inv.flags) \
                and (away := self.pod.env_from_away()):
            # torchrun reads PET_<NAME> where no flag gives it: an envFrom the manifests do not hold may set it.
            var = f"PET_{name.upper()}"
            return Setting(f"${var}", "default", None, unknown=f"torchrun reads {var}, which {away} (not in these "
                           "manifests) may set", unknown_kind=ENV_ELSEWHERE)
        return s

    def _get(self, key: str) -> Setting:
        if key not in self._cache:
            self._resolve(key)
        return self._cache[key]

    def _resolve(self, key: str) -> None:
        c, pod = self._cache, self.pod
        if self.inv is None:
            # A script started directly reads env:// (WORLD_SIZE, RANK, MASTER_ADDR/PORT): one process per pod.
            if key == "endpoint":
                master = _env_setting(pod, "MASTER_ADDR", "")
                port = _env_setting(pod, "MASTER_PORT", "")
                c[key] = Setting(f"{master.value}:{port.value}" if master.value else "", master.origin, master.field,
                                 unknown=master.unknown or port.unknown,
                                 unknown_kind=master.unknown_kind or port.unknown_kind)
            else:
                c[key] = {"nnodes": lambda: _env_setting(pod, "WORLD_SIZE", "1"),
                          "nproc": lambda: Setting("1", "default"),
                          "backend": lambda: Setting("env://", "default"),
                          "node_rank": lambda: _env_setting(pod, "RANK", "0"),
                          "rdzv_id": lambda: Setting("", "default")}[key]()
            return
        if key in ("nproc", "node_rank", "rdzv_id"):
            c[key] = self._s({"nproc": "nproc_per_node"}.get(key, key))
            return
        backend = self._s("rdzv_backend")
        standalone = self._s("standalone")
        if standalone.value and standalone.value.lower() not in ("0", "false"):
            c["backend"] = Setting("c10d (standalone)", standalone.origin, standalone.field)
            c["endpoint"] = Setting("localhost:0", standalone.origin, standalone.field)
            c["nnodes"] = Setting("1:1", standalone.origin, standalone.field)
            return
        c["backend"] = backend
        c["nnodes"] = self._s("nnodes")
        endpoint = self._s("rdzv_endpoint")
        if backend.value == "static" and not endpoint.value:
            addr, port = self._s("master_addr"), self._s("master_port")
            origin = addr if addr.origin != "default" else port
            endpoint = Setting(f"{addr.value}:{port.value}", origin.origin, addr.field or port.field,
                               unknown=addr.unknown or port.unknown, unknown_kind=addr.unknown_kind or port.unknown_kind)
        c["endpoint"] = endpoint

    nnodes = property(lambda self: self._get("nnodes"))
    nproc = property(lambda self: self._get("nproc"))
    backend = property(lambda self: self._get("backend"))
    endpoint = property(lambda self: self._get("endpoint"))
    node_rank = property(lambda self: self._get("node_rank"))
    rdzv_id = property(lambda self: self._get("rdzv_id"))


@dataclass
class Topology:
    workload: Workload
    first_view: PodView
    torchrun: bool
    pods: int
    nnodes_min: int | None
    nnodes_max: int | None
    nproc: int | None
    world_size: int | None
    gpus: int
    gpu_request: int | None
    cpu_limit: float | None
    cpu_request: float | None
    endpoint_host: str | None
    endpoint_port: str | None
    rank_source: str
    pg_backend: tuple[str, str] | None
    service: Manifest | None
    notes: list[str] = field(default_factory=list)
    # The script initialises the `mpi` process group without mpirun: each process is an MPI world of one (torch
    # takes rank and size from MPI, not from WORLD_SIZE/RANK).
    mpi_world_of_one: bool = False

    @property
    def manifest(self) -> Manifest:
        return self.workload.manifest

    _views: list[PodView] | None = None

    @property
    def first(self) -> PodView:
        return self.first_view

    @property
    def views(self) -> list[PodView]:
        """Pod 0, pod 1 and the last pod (enough to see a rank that does not vary, or a last pod that differs);
        the others are worked out only when a rule asks."""
        if self._views is None:
            self._views = [self.first_view] + [view(self.workload.pod(i)) for i in _sample(self.pods)[1:]]
        return self._views

    def distinct_pods(self) -> list[Pod]:
        """One pod per pod template: PyTorchJob's Master and first Worker, one pod of every other launcher."""
        groups = self.workload.world_groups
        if len(groups) <= 1:
            return [self.first_view.pod]
        out, seen = [self.first_view.pod], {groups[0].template_field}
        for g in groups[1:]:
            if g.count and g.template_field not in seen:
                seen.add(g.template_field)
                out.append(self.workload.pod(g.offset))
        return out

    @property
    def agent(self) -> bool:
        """Whether torch's elastic agent starts the workers (torchrun, `accelerate launch`): it sets their WORLD_SIZE
        and RANK, reads --rdzv-conf and PET_*, exits 1 on SIGTERM. A script that forms its world from its own flags
        (`--dist-url`) is a launcher too (`torchrun` is true) but none of that holds."""
        return self.first_view.inv is not None and self.first_view.inv.elastic_agent

    @property
    def launcher_id(self) -> str:
        return self.workload.launcher_id

    @property
    def backend(self) -> str:
        backend: Setting = self.first.backend
        return backend.value

    @property
    def elastic(self) -> bool:
        return self.nnodes_min is not None and self.nnodes_min != self.nnodes_max


def _sample(n: int) -> list[int]:
    return sorted({i for i in (0, 1, n - 1) if 0 <= i < n})


def _env_setting(pod: Pod, name: str, default: str) -> Setting:
    if pod.env.get(name) is not None:
        return Setting(str(pod.env[name]), "env", pod.env_fields.get(name))
    return Setting(default, "default", None)


def view(pod: Pod) -> PodView:
    argv, fields = pod.argv()
    # A shell in the container also sees HOSTNAME, which the container runtime sets to the pod's hostname.
    try:
        inv = find_invocation(argv, fields, pod.env, pod.hostname)
    except ShellError as exc:
        return PodView(pod, None, str(exc))
    if inv is not None and inv.accelerate_config is not None:
        _read_accelerate_config(pod, inv)
    return PodView(pod, inv)


def _read_accelerate_config(pod: Pod, inv: Invocation) -> None:
    """`accelerate launch --config_file PATH`: the settings the command line leaves out come from that file, read
    where a ConfigMap or Secret in the manifests is mounted at PATH; else they cannot be known here."""
    path, where = inv.accelerate_config  # type: ignore[misc]
    text = pod.file(path) if path.startswith("/") else None
    config = _parsed_config(text) if text is not None else None
    if config is None:
        inv.unread_config = path
    else:
        with_accelerate_config(inv, config, where)


@functools.lru_cache(maxsize=64)
def _parsed_config(text: str) -> Any:
    """A config file's text as YAML, parsed once for every pod that reads it (None where it is not YAML); read-only."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _at_source(setting: Setting, pod: Pod) -> Setting:
    """A flag written as `--x=$(VAR)` points at the env entry that defines VAR: that is where a user edits it."""
    if setting.origin == "flag" and setting.field:
        names = referenced_vars(_raw_at(pod, setting.field))
        if len(names) == 1:
            setting.var = names[0]
            if names[0] in pod.env_fields and names[0] not in pod.injected:
                setting.field = pod.env_fields[names[0]]
    return setting


def referenced_vars(text: str) -> list[str]:
    return [a or b for a, b in _VAR_REF.findall(text)]


def describe_rank_source(v: PodView, workload: Workload) -> str:
    """Where the node rank comes from, in words: `completion index (annotation)`, `pod index label`, ..."""
    if v.inv is not None and v.backend.value not in ("static",) and v.node_rank.origin == "default":
        return f"rendezvous ({v.backend.value})"
    setting = v.node_rank
    if setting.unknown_kind == RUN_TIME:
        return f"known at run time ({setting.value})"
    if setting.origin == "default":
        return "none (torchrun default 0)" if v.inv is not None else "none"
    if setting.origin == "flag":
        names = [setting.var] if setting.var else referenced_vars(_raw_at(v.pod, setting.field or ""))
    else:
        names = [v.inv.env_names.get("node_rank", "PET_NODE_RANK")] if v.inv is not None else ["RANK"]
    for name in names:
        if name in v.pod.injected:
            if name == "JOB_COMPLETION_INDEX":
                return "completion index (JOB_COMPLETION_INDEX)"
            return f"{workload.manifest.kind} controller ({name})"
        path = _fieldref(v.pod, name)
        if path:
            if COMPLETION_INDEX in path:
                return "completion index (downward API)"
            if POD_INDEX in path:
                return "pod index label (downward API)"
            return f"downward API {path}"
        if name == "HOSTNAME":
            return "hostname ordinal"
    if setting.origin == "env" and setting.field and setting.field.endswith("controller"):
        return f"{workload.manifest.kind} controller"
    return f"constant {setting.value}" if setting.value.isdigit() else f"unresolved ({setting.value})"


_ARG_FIELD = re.compile(r"\.(command|args)\[(\d+)\]$")


def _raw_at(pod: Pod, field_path: str) -> str:
    m = _ARG_FIELD.search(field_path)
    if not m:
        return ""
    items = pod.container.get(m.group(1)) or []
    i = int(m.group(2))
    return str(items[i]) if i < len(items) else ""


def _fieldref(pod: Pod, name: str) -> str | None:
    ref = dig(env_entry(pod.container, name), "valueFrom", "fieldRef", "fieldPath")
    return str(ref) if ref else None


def _pg_backend(pod: Pod, inv: Invocation | None) -> tuple[str, str] | None:
    """The process-group backend the training script will use, where the manifest states it."""
    # Without a launcher, every token: with no `command` the program comes from the image and args start at once.
    args = inv.script_args if inv is not None else pod.argv()[0]
    # The ImageNet example's script takes it as --dist-backend (imagenet/main.py lines 68-69).
    names = ("--backend", "--dist-backend", "--dist_backend") if inv is not None and inv.launcher == DIST_URL \
        else ("--backend",)
    if args:
        for i, tok in enumerate(args):
            if tok.split("=", 1)[0] in names and "=" in tok:
                return tok.split("=", 1)[1], inv.field if inv else pod.container_field
            if tok in names and i + 1 < len(args):
                return args[i + 1], inv.field if inv else pod.container_field
    for name in ("DIST_BACKEND", "TORCH_DISTRIBUTED_BACKEND", "PG_BACKEND"):
        if pod.env.get(name):
            return str(pod.env[name]), pod.env_fields.get(name, "")
    return None


def is_training(w: Workload, first: PodView) -> bool:
    """A workload is a distributed training world when its container starts a launcher (torchrun,
    `accelerate launch`), or gets what `env://` initialisation reads (MASTER_ADDR, WORLD_SIZE, whoever sets them: the
    PyTorchJob operator does), or sets torchrun's PET_NNODES itself. A TrainJob's PET_* alone says nothing: only
    torchrun reads them."""
    if first.inv is not None:
        return True
    env = first.pod.env
    return any(k in env and (k != "PET_NNODES" or k not in first.pod.injected) for k in WORLD_ENV)


def find_service(bundle: Bundle, namespace: str, name: str | None) -> Manifest | None:
    if not name:
        return None
    return bundle.services.get((namespace, name))


@dataclass
class Undetermined:
    """A workload of a training launcher (PyTorchJob, TrainJob) whose container shows neither a launcher nor env://
    initialisation, and, where its controller's settings show it (Launcher.unlinked), why its pods form no world
    together."""

    workload: Workload
    unlinked: Check | None = None


@dataclass
class UnreadConfig:
    """A workload whose world's shape is in an `accelerate launch` config file not mounted from the manifests."""

    workload: Workload
    path: str
    field: str | None


@dataclass
class Unstated:
    """A workload whose launcher (a script's own --dist-url flags, deepspeed, mpirun ...) is not given, on its command
    line or in the env, a setting the world's shape depends on: the launcher's default for it is not known here."""

    workload: Workload
    launcher: str
    missing: list[str]
    field: str | None
    # Why the launcher's world is not worked out at all (instead of the settings missing), if so.
    why: str | None = None


@dataclass
class UnreadScript:
    """A workload whose container runs a shell script that could not be read (shell.ShellError): whether it starts
    a launcher, and the world it forms, are not known."""

    workload: Workload
    why: str
    field: str | None


@dataclass
class Resolution:
    """What the launcher model says of one unit's workloads, before any rule runs: the training topologies, the
    workloads whose pods cannot be worked out (none, or a controller input not in the manifests), those that may or
    may not train together, and those whose shape is in a file not in the manifests."""

    topologies: list[Topology] = field(default_factory=list)
    unresolved: list[Workload] = field(default_factory=list)
    undetermined: list[Undetermined] = field(default_factory=list)
    unread: list[UnreadConfig] = field(default_factory=list)
    scripts: list[UnreadScript] = field(default_factory=list)
    unstated: list[Unstated] = field(default_factory=list)
    # Workloads whose managedBy names another controller: no pods here, so no topology to check.
    elsewhere: list[Workload] = field(default_factory=list)


def compute(bundle: Bundle, ws: list[Workload] | None = None) -> tuple[list[Topology], list[Workload]]:
    """Topologies of the training workloads in `bundle` (or among `ws`, its workloads worked out already), and the
    workloads whose topology could not be worked out."""
    r = resolve(bundle, ws)
    return r.topologies, r.unresolved


def resolve(bundle: Bundle, ws: list[Workload] | None = None,
            failed: list[tuple[Manifest, Exception]] | None = None) -> Resolution:
    """The Resolution of `bundle`'s workloads (or of `ws`, worked out already). With `failed`, a workload whose pods
    cannot be read (a malformed field) is listed there instead of raising. The model is only read, never written."""
    out = Resolution()
    for w in workloads(bundle) if ws is None else ws:
        if w.managed_by is not None:
            out.elsewhere.append(w)
            continue
        odd = w.odd_group
        if odd is not None:  # (the controller's webhook or the API server refuses it: TOPO011 reports that)
            if failed is not None:
                failed.append((w.manifest, Unreadable(f"would have {odd.count} {odd.role} pods, which the "
                                                      f"model does not work out (0 to {MAX_GROUP_PODS:,})")))
            continue
        if w.pods == 0 and w.all_pods and w.unresolved is None:
            # No pod of the world, only auxiliary ones (an MPIJob without workers: its launcher's mpirun runs every
            # rank itself, which the launcher's admission checks say): no world of pods to work out.
            continue
        try:
            if not _compute_one(bundle, w, out) and w.launcher.for_training:
                found = _undetermined(w)
                if found is not None:
                    out.undetermined.append(found)
        except Exception as exc:  # noqa: BLE001 - reported by the engine as INTERNAL, never a crash
            if failed is None:
                raise
            failed.append((w.manifest, exc))
    return out


def _undetermined(w: Workload) -> Undetermined | None:
    """For a workload of a training launcher that is not a training world by its command and env: None where its
    code is in the manifest (`python -c`) and takes no part in torch.distributed, so it is known not to train
    together; else an Undetermined, which, where the command is written out (not the image's entrypoint), says
    whether the controller lets its pods form a world at all."""
    pod = w.pod(0)
    argv = pod.argv()[0]
    code = inline_python(argv)
    if code is not None and not DISTRIBUTED_CODE.search(code):
        return None
    return Undetermined(w, w.launcher.unlinked(w) if pod.container.get("command") else None)


def _compute_one(bundle: Bundle, w: Workload, found: Resolution) -> bool:
    """Work out one workload's topology into `found`; False when it is not a training world."""
    if w.pods == 0 or w.unresolved is not None:
        found.unresolved.append(w)
        return True
    first = view(w.pod(0))
    if first.script_error is not None and not is_training(w, first) and (
            w.launcher.for_training or any(k in " ".join(first.pod.argv()[0]) for k in _TRAINING_WORDS)):
        found.scripts.append(UnreadScript(w, first.script_error, first.pod.container_field))
        return True
    if not is_training(w, first):
        return False
    if first.inv is None and w.launcher.mpi_world(w) is not None:
        # The controller lays the pods out as mpirun's world (an MPIJob's, a TrainJob's MPI runtime): the ranks are
        # mpirun's slots over its hostfile and take their rank from mpirun, not from each pod's env, so they are not
        # one env:// process per pod; TOPO011 checks -np against the slots, TOPO012 says what was not checked.
        return False
    inv = first.inv
    if inv is not None and inv.unread_config and not all(
            k in inv.accelerate for k in ("num_machines", "num_processes", "main_process_ip")):
        # The world's shape is in a config file this cannot read: said (TOPO012), not guessed from defaults.
        found.unread.append(UnreadConfig(w, inv.unread_config, inv.accelerate_config[1]))  # type: ignore[index]
        return True
    if inv is not None and inv.not_modelled and w.pods > 1:
        found.unstated.append(Unstated(w, inv.launcher, [], inv.field, inv.not_modelled))
        return True
    if inv is not None and inv.required and w.pods > 1:
        missing = [inv.env_names.get(name) or inv.flag(name) for name in inv.required
                   if first._s(name).origin == "default"]
        if missing:
            # Not guessed from a default this cannot know (the script's own): said (TOPO012), not checked.
            label = {DIST_URL: f"`{inv.script}` (started with --dist-url)",
                     "accelerate launch": "accelerate launch (no --config_file: its default config file, where the "
                     "image has one, fills what the command leaves out)"}.get(inv.launcher, inv.launcher)
            found.unstated.append(Unstated(w, label, list(dict.fromkeys(missing)), inv.field))
            return True
    mn, mx = split_nnodes(first.nnodes.value) if first.inv is not None else (None, None)
    if first.inv is None:
        mn = mx = None
        nproc: int | None = 1
        world = as_int(first.nnodes.value)
    gpus, gpu_req, cpu_lim, cpu_req = container_resources(first.pod.container)
    if first.inv is not None:
        nproc = as_int(first.nproc.value)
        if nproc is None and first.nproc.value in ("auto", "gpu") and gpus:
            nproc = gpus  # torchrun counts the GPUs the device plugin exposes: the pod's GPU limit
        elif nproc is None and first.nproc.value == "auto" and first.inv.launcher == DIST_URL:
            nproc = 1  # imagenet/main.py lines 118-123: ngpus_per_node is 1 where no GPU is visible
        world = mx * nproc if (mx is not None and nproc is not None and mn == mx) else None
    host, port = (split_endpoint(first.endpoint.value) if first.endpoint.value else (None, None))
    if first.endpoint.unknown_kind == ENV_ELSEWHERE:
        host, port = first.endpoint.value, None  # (not torchrun's default port: PET_RDZV_ENDPOINT may give one)
    subdomain = first.pod.subdomain
    pg = _pg_backend(first.pod, first.inv)
    mpi_alone = False
    notes = list(w.notes)
    if first.inv is None and pg is not None and pg[0].lower() == "mpi":
        if any(tok.rsplit("/", 1)[-1] in MPI_LAUNCHERS for tok in first.pod.argv()[0]):
            notes.append("mpirun/mpiexec starts the processes: the MPI world it forms is not modelled here")
        else:
            mpi_alone = True
    found.topologies.append(Topology(
        workload=w, first_view=first, torchrun=first.inv is not None, pods=w.pods, nnodes_min=mn, nnodes_max=mx,
        nproc=nproc, world_size=world, gpus=gpus, gpu_request=gpu_req, cpu_limit=cpu_lim, cpu_request=cpu_req,
        endpoint_host=host, endpoint_port=port, rank_source=describe_rank_source(first, w),
        pg_backend=pg,
        service=None if w.managed_dns else find_service(bundle, w.namespace, subdomain),
        notes=notes, mpi_world_of_one=mpi_alone,
    ))
    return True


def launcher_field(topo: Topology, setting_field: str | None, name: str) -> str | None:
    """Point a setting the controller injected back at the field the user wrote."""
    if setting_field and not setting_field.endswith("controller"):
        return setting_field
    return topo.workload.launcher.setting_field(topo.workload, name) or setting_field
