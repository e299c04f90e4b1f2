"""A TrainJob on a runtime whose mlPolicy source is not torch (kubeflow/trainer tag v2.3.0): the MPI plugin
(pkg/runtime/framework/plugins/mpi/mpi.go: the `launcher` and `node` Jobs, the Open MPI env, the hostfile ConfigMap and
the SSH Secret, its Validate), the JAX plugin (plugins/jax/jax.go) and the XGBoost plugin (plugins/xgboost/xgboost.go):
their env, their counts and what their webhooks refuse. trainjob.py builds the pods and calls these."""
from __future__ import annotations

from typing import Any, Callable

from ..kube.values import as_int, dig, listing, mapping
from ..kube.objects import INFO, WARNING
from .base import Check, MpiWorld, Names, Workload
from .mpirun import (OPEN_MPI, MpiRun, find_mpirun, mpirun_words, np_within_hosts, rank_zero_address,
                     ranks_over_hosts, starts_torchrun, torchrun_agents, torchrun_under)
from .pods import Injected, container_resources, trainer_gpus_per_node

NODE = "node"  # constants.Node: the trainer's (and the MPI node Job's) container and Job name
# The MPI plugin (constants.go 88-92 and 132-187): the launcher's replicated Job, the hostfile ConfigMap and SSH Secret
# suffixes, and the Open MPI env it gives the launcher's `node` container (mpi.go 208-224); constants.go 306
# MPIReservedEnvNames are refused in spec.trainer.env (mpi.go 95-107).
MPI_LAUNCHER = "launcher"
MPI_HOSTFILE_DIR, MPI_HOSTFILE_NAME = "/etc/mpi", "hostfile"
MPI_HOSTFILE_SUFFIX, MPI_SSH_SUFFIX = "-mpi-hostfile", "-mpi-ssh-auth"
MPI_RSH_ARGS = "-o ConnectionAttempts=10"  # OpenMPIEnvDefaultValueRSHArgs
MPI_RESERVED_ENV = ("OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_args", "OMPI_MCA_orte_keep_fqdn_hostnames",
                    "OMPI_MCA_orte_set_default_slots")
# constants.go 265-303: the XGBoost plugin's DMLC_* env (xgboost.go 120-139), refused in spec.trainer.env (53-71).
XGBOOST_RESERVED_ENV = ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER")
# What each mlPolicy source's plugin injects into the trainer, for the admission line of a runtime without torch.
POLICY_ENV = {"mpi": "OMPI_* env and an /etc/mpi/hostfile for mpirun (mpi.go)", "jax": "JAX_* env (jax.go)",
              "xgboost": "DMLC_* env (xgboost.go)"}
# mlPolicy sources the Trainer has a plugin for (pkg/runtime/framework/plugins/registry.go 42-52); flux's
# (plugins/flux) is not modelled here.
MODELLED_POLICIES = ("torch", "mpi", "jax", "xgboost")


def policy_kind(ml: dict[str, Any] | None) -> str:
    """The runtime's mlPolicy source: torch, mpi, jax, xgboost, another source's key (flux), or "" (plain ML)."""
    for key in (*MODELLED_POLICIES, *sorted(k for k in mapping(ml) if k != "numNodes")):
        if isinstance(mapping(ml).get(key), dict):
            return str(key)
    return ""


def injected_by(policy: str) -> str:
    return POLICY_ENV.get(policy, f"what its {policy} plugin sets (not modelled here)" if policy
                          else "nothing but spec.trainer's own env (plainml.go)")


def no_torch_notice(runtime: str, policy: str, torchrun: bool) -> Check:
    """Admitted upstream (a plain-ML, MPI, JAX or XGBoost runtime is valid): not an error by itself. A torchrun that
    reads no PET_* then runs with its own flags and defaults, which the topology rules check."""
    return Check("spec.runtimeRef", f"runtime '{runtime}' has "
                 + (f"mlPolicy.{policy}" if policy else "no mlPolicy source") + ", not mlPolicy.torch: the Trainer "
                 f"injects {injected_by(policy)}, no PET_* env" + (", so torchrun reads only its own flags" if torchrun
                                                                   else ""),
                 "use a torch runtime" if torchrun else "nothing to do if the command reads that env",
                 severity=WARNING if torchrun else INFO)


def mpi_node_count(trainer: dict[str, Any], launcher_as_node: bool) -> int:
    """mpi.go EnforceMLPolicy 116-126: with spec.trainer.numNodes the `node` Job runs that many pods, one fewer (at
    least 1) with runLauncherAsNode, where the launcher counts as a node; the launcher keeps its count (no plugin
    gives it spec.trainer.numNodes: plainml.go 47-53 skips MPI runtimes)."""
    n = as_int(trainer.get("numNodes"), 1) or 0
    return max(n - 1, 1) if launcher_as_node else n


def mpi_node_job_trainer(rjob: dict[str, Any], trainer: dict[str, Any],
                         upsert_env: Callable[[list[Any], list[Any]], list[Any]],
                         merge_resources: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]) -> None:
    """builder.go Trainer 142-155 and trainingruntime.go 199-203: with runLauncherAsNode the `node` Job's `node`
    container gets spec.trainer.env and resourcesPerNode too (not the image, command or args: the launcher's)."""
    containers = listing(dig(rjob, "template", "spec", "template", "spec", "containers"))
    for k, c in enumerate(containers):
        if mapping(c).get("name") != NODE:
            continue
        c = dict(mapping(c))
        if trainer.get("env"):
            c["env"] = upsert_env(listing(c.get("env")), listing(trainer.get("env")))
        if isinstance(trainer.get("resourcesPerNode"), dict):
            c["resources"] = merge_resources(mapping(c.get("resources")), trainer["resourcesPerNode"])
        containers[k] = c


def mpi_slots(mpi: dict[str, Any], trainer: dict[str, Any], runtime_resources: dict[str, Any]) -> int:
    """mpi.go EnforceMLPolicy 128-139: the TrainJob's numProcPerNode; else the runtime's (CRD default 1), which,
    where it is 1, becomes the node's GPU count when that is more than 1 (the TrainJob's resourcesPerNode, else the
    runtime's node container)."""
    if trainer.get("numProcPerNode") is not None:
        return as_int(trainer["numProcPerNode"], 1) or 0
    slots = as_int(mpi.get("numProcPerNode"), 1) or 0
    if slots == 1:
        res = mapping(trainer.get("resourcesPerNode")) if trainer.get("resourcesPerNode") is not None \
            else runtime_resources
        gpus = trainer_gpus_per_node(res)
        if gpus > 1:
            slots = gpus
    return slots


def mpi_env(slots: int) -> list[Injected]:
    """mpi.go 208-224 (Open MPI): what the launcher's `node` container gets, spec.trainer set or not."""
    return [Injected("OMPI_MCA_orte_default_hostfile", f"{MPI_HOSTFILE_DIR}/{MPI_HOSTFILE_NAME}"),
            Injected("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
            Injected("OMPI_MCA_orte_set_default_slots", str(slots)),
            Injected("OMPI_MCA_plm_rsh_args", MPI_RSH_ARGS)]


def plugin_env(policy: str, coordinator: str, port: int, rank_field: str, trainer_count: int,
               trainer: dict[str, Any], runtime_resources: dict[str, Any]) -> list[Injected]:
    """The env the JAX or XGBoost plugin gives the trainer step's `node` container when spec.trainer is set (with
    port `port` on it). jax.go EnforceMLPolicy 69-100: one JAX process per node, its id the Job completion index.
    xgboost.go EnforceMLPolicy 92-144: one worker per GPU of resourcesPerNode (the TrainJob's, else the runtime's node
    container), else one per node; rank 0's pod runs the tracker."""
    if policy == "jax":
        return [Injected("JAX_NUM_PROCESSES", str(trainer_count)), Injected("JAX_PROCESS_ID", field_ref=rank_field),
                Injected("JAX_COORDINATOR_ADDRESS", f"{coordinator}:{port}")]
    if policy == "xgboost":
        res = mapping(trainer.get("resourcesPerNode")) if trainer.get("resourcesPerNode") is not None \
            else runtime_resources
        return [Injected("DMLC_TRACKER_URI", coordinator), Injected("DMLC_TRACKER_PORT", str(port)),
                Injected("DMLC_TASK_ID", field_ref=rank_field),
                Injected("DMLC_NUM_WORKER", str(trainer_count * (trainer_gpus_per_node(res) or 1)))]
    return []


def _host_of(name: str, job: str, per: int, subdomain: str) -> Callable[[int], str]:
    return lambda i: f"{name}-{job}-{i // per}-{i % per}.{subdomain}"


def mpi_host_count(nodes: int, launcher_as_node: bool) -> int:
    """The hostfile's hosts for spec.trainer.numNodes `nodes` (mpi.go EnforceMLPolicy 116-126 and isNode 346-348):
    the `node` Job's pods, and the launcher with runLauncherAsNode (then max(nodes-1, 1) node pods: numNodes 1 still
    gives 2 hosts)."""
    return max(nodes - 1, 1) + 1 if launcher_as_node else nodes


def mpi_launcher_run(w: Workload) -> tuple[MpiRun, Any] | None:
    """The mpirun (mpiexec ...) the `launcher` Job's `node` container starts, where it starts one, and that pod."""
    launcher = next((g for g in w.groups if g.role == MPI_LAUNCHER), None)
    if launcher is None or launcher.count == 0:
        return None
    pod = w._make_pod(launcher, 0, -1)
    container = next((c for c in pod.containers if c.name == NODE), None)
    run = find_mpirun(*pod.argv(container), container.env, pod.hostname) if container is not None else None
    return (run, pod) if run is not None else None


def mpi_world(w: Workload, policy: str, runtime_obj: dict[str, Any] | None, hosts: Names, slots: int) -> MpiWorld | None:
    """The MPI plugin's world (None on another runtime): the hostfile's hosts x slots; the pods are the launcher's
    and the `node` Job's, so numNodes N makes N+1 pods without runLauncherAsNode (the launcher runs mpirun and no
    rank), and with it 1 + max(N-1, 1). The GPUs are the `node` Job's `node` container's."""
    if policy != "mpi" or runtime_obj is None:
        return None
    launcher_as_node = mapping(dig(runtime_obj, "spec", "mlPolicy", "mpi")).get("runLauncherAsNode") is True
    node = next((g for g in w.groups if g.role == NODE), None)
    containers = [mapping(c) for c in listing(dig(node.template, "spec", "containers"))] if node else []
    container = next((c for c in containers if c.get("name") == NODE), None)
    gpus = container_resources(container)[0] if container is not None else 0
    return MpiWorld(hosts, slots, gpus, w.all_pods,
                    hosts_for=lambda n: mpi_host_count(n, launcher_as_node),
                    pods_for=lambda n: 1 + (max(n - 1, 1) if launcher_as_node else n))


def mpi_unmodelled(w: Workload, policy: str, runtime_obj: dict[str, Any] | None) -> str | None:
    """TOPO012's words for the launcher's mpirun on an MPI runtime (the MPIJob's, policies/launchers/mpirun.py): the
    plugin writes only Open MPI's hostfile (mpi.go 324-330)."""
    found = mpi_launcher_run(w) if policy == "mpi" and runtime_obj is not None else None
    if found is None:
        return None
    return mpirun_words(found[0], OPEN_MPI, "the Trainer's",
                        "-np and -x MASTER_ADDR are checked against the hostfile, or the hosts and slots -H names (TOPO011)")


def mpi_hosts(template: dict[str, Any], name: str, launcher_as_node: bool) -> Names:
    """mpi.go buildHostFileConfigMap 316-346 and jobset.go IdentifyPodNetwork 273-299: one host
    `<trainjob>-<job>-<replica>-<pod>.<subdomain>` per pod of the `node` Job, and of the `launcher` Job with
    runLauncherAsNode, in the runtime's order (the template after the counts are set)."""
    subdomain = str(mapping(template.get("network")).get("subdomain") or name)
    segments: list[tuple[int, Callable[[int], str]]] = []
    for r in map(mapping, listing(template.get("replicatedJobs"))):
        if not (r.get("name") == NODE or (launcher_as_node and r.get("name") == MPI_LAUNCHER)):
            continue
        per = max(as_int(dig(r, "template", "spec", "parallelism"), 1) or 0, 0)
        replicas = max(as_int(r.get("replicas"), 1) or 0, 0)
        if per:  # pod p of replica ri of the Job, in that order
            segments.append((replicas * per, _host_of(name, str(r["name"]), per, subdomain)))
    return Names(segments)


def mpi_note(name: str, hosts: Names, slots: int, mpi: dict[str, Any], launcher_as_node: bool) -> str:
    """The hostfile (`<host> slots=<slots>` a line) and the SSH Secret both Jobs mount, as `make plan` says them."""
    shown = ", ".join(hosts[:2]) + (f", ... {hosts[-1]}" if len(hosts) > 3 else
                                     (f", {hosts[2]}" if len(hosts) == 3 else ""))
    return (f"MPI: hostfile {MPI_HOSTFILE_DIR}/{MPI_HOSTFILE_NAME} (ConfigMap {name}{MPI_HOSTFILE_SUFFIX}) lists "
            f"{len(hosts)} host{'s' if len(hosts) != 1 else ''} x slots={slots} = {len(hosts) * slots} ranks for "
            f"mpirun ({shown or 'none'}); SSH keys from Secret {name}{MPI_SSH_SUFFIX} at "
            f"{mpi.get('sshAuthMountPath') or '/root/.ssh'}" + ("; the launcher runs as a node" if launcher_as_node
                                                                else ""))


def framework_checks(w: Workload, policy: str, runtime_obj: dict[str, Any] | None, template: dict[str, Any],
                     hosts: Names, slots: int) -> list[Check]:
    """What the MPI and XGBoost plugins' Validate refuse (mpi.go 82-109, xgboost.go 53-71), and mpirun's -np on the
    MPI launcher against the hostfile's slots (Open MPI refuses more ranks than slots without --oversubscribe)."""
    out: list[Check] = []
    mpi = mapping(dig(runtime_obj or {}, "spec", "mlPolicy", "mpi"))
    if policy == "mpi" and mpi.get("mpiImplementation") == "" and any(
            mapping(r).get("name") == MPI_LAUNCHER and any(mapping(c).get("name") == NODE for c in listing(
                dig(r, "template", "spec", "template", "spec", "containers"))) for r in listing(template.get("replicatedJobs"))):
        # The CRD admits "" (its enum) and defaults only an unset field; mpi.go 208-226 knows only OpenMPI.
        out.append(Check("spec.runtimeRef", "the runtime's mlPolicy.mpi.mpiImplementation is \"\": the Trainer's MPI "
                         "plugin knows only OpenMPI and fails every reconcile (\"MPI implementation for ... doesn't "
                         "supported\"), so no JobSet is built", "set mpiImplementation: OpenMPI, or leave it unset"))
    trainer = dig(w.manifest.obj, "spec", "trainer")
    if not isinstance(trainer, dict):
        return out
    env = listing(trainer.get("env"))
    if policy == "xgboost":
        for i, var in enumerate(env):
            if str(mapping(var).get("name", "")) in XGBOOST_RESERVED_ENV:
                out.append(Check(f"spec.trainer.env[{i}]", f"{mapping(var).get('name')} is reserved for the XGBoost "
                                 "runtime: the Trainer's webhook refuses the TrainJob",
                                 "drop it: the Trainer sets the DMLC_* env itself"))
    if policy != "mpi":
        return out
    jobs = {str(mapping(r).get("name")) for r in listing(mapping(template).get("replicatedJobs"))}
    if (as_int(trainer.get("numNodes"), 1) or 0) >= 2 and mpi.get("runLauncherAsNode") is True and \
            not {NODE, MPI_LAUNCHER} <= jobs:
        runtime = mapping(dig(runtime_obj or {}, "metadata")).get("name")
        out.append(Check("spec.trainer.numNodes", f"numNodes is {trainer.get('numNodes')} but MPI runtime '{runtime}' "
                         "runs the launcher as a node and lacks a '" + "' and '".join(sorted({NODE, MPI_LAUNCHER} - jobs))
                         + "' Job: the Trainer's webhook refuses it (must have 1)",
                         "set numNodes: 1, or use a runtime with both a 'launcher' and a 'node' Job"))
    reserved = sorted({str(mapping(v).get("name")) for v in env} & set(MPI_RESERVED_ENV))
    if reserved:
        out.append(Check("spec.trainer.env", f"{', '.join(reserved)} set by hand: the Trainer's webhook refuses "
                         "reserved MPI env (the MPI plugin sets it on the launcher)", "drop it from spec.trainer.env"))
    found = mpi_launcher_run(w) if hosts else None
    if found is None:
        return out
    run, pod = found
    if run.hostfile is not None and run.hostfile != f"{MPI_HOSTFILE_DIR}/{MPI_HOSTFILE_NAME}":
        return out  # (another hostfile: TOPO012 says its slots were not checked)
    total = len(hosts) * slots
    # -H's hosts and slots where the command names them (with a default hostfile set, Open MPI's -H filters its hosts:
    # orte_hosts(7); -np past -H's slots is refused either way), else the Trainer's hostfile; rank 0 runs on the first
    # slot of the first host
    first_host = run.hosts[0][0] if run.hosts else hosts[0]
    if (inv := torchrun_under(run)) is not None:  # each rank one torchrun agent (mpirun.py)
        out += torchrun_agents(run, inv, pod, *ranks_over_hosts(run, total, len(hosts)))
    elif not starts_torchrun(run):
        first, _, subdomain = first_host.partition(".")
        out += rank_zero_address(w, run, pod, first, subdomain or hosts[0].partition(".")[2])
    if run.hosts is not None:
        return out + np_within_hosts(run, OPEN_MPI)
    if run.np is None:
        return out
    if run.np > total and not run.oversubscribe:
        out.append(Check(run.field, f"mpirun -np {run.np} but the Trainer's hostfile has {total} slots ({len(hosts)} "
                         f"hosts x slots={slots}): Open MPI refuses to start (not enough slots available)",
                         f"set -np {total}, or raise numNodes or numProcPerNode"))
    elif run.np < total:
        out.append(Check(run.field, f"mpirun -np {run.np} starts {run.np} ranks of the {total} slots the hostfile "
                         f"gives ({len(hosts)} hosts x slots={slots})",
                         f"set -np {total}, or drop -np (mpirun fills the hostfile's slots)", severity=WARNING))
    return out
