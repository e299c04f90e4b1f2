"""Kubeflow MPI Operator v2 MPIJob (kubeflow.org/v2beta1, kubeflow/mpi-operator tag v0.8.0): a launcher Job
`<job>-launcher` (its pod at hostname `<job>-launcher`) that runs mpirun, worker pods `<job>-worker-<i>` (sshd unless
the template says otherwise), one headless Service `<job>` over all of them, the hostfile ConfigMap `<job>-config`
(`<worker>.<job>.<ns>.svc slots=<slotsPerWorker>`) and the env the controller adds to container 0
(pkg/controller/mpi_job_controller.go newLauncherPodTemplate lines 1556-1650, newWorker 1473-1526, newConfigMap
1309-1355, newJobService 1384-1414; defaults pkg/apis/kubeflow/v2beta1/default.go; what it refuses
pkg/apis/kubeflow/validation/validation.go lines 49-160, checked in syncHandler before anything is created).

The processes are mpirun's: `-np N` ranks over the hostfile's slots (workers x slotsPerWorker, the launcher's too with
runLauncherAsWorker). Open MPI refuses more ranks than slots without --oversubscribe ("There are not enough slots
available"), and runs every rank on the launcher's own node where the hostfile names no host (no workers); torchrun
under mpirun starts one torchrun agent per rank."""
from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, Iterator

from ..kube.values import DNS1035, as_int, dig, listing, mapping
from ..kube.objects import WARNING, Manifest
from .base import Bundle, Check, Launcher, MpiWorld, Names, ScaleSpec, Workload
from .job_validation import JOB_NAME_LABELS
from .mpirun import (HOSTFILE, INTEL, MPICH, OPEN_MPI, MpiRun, find_mpirun, mpirun_words, np_within_hosts,
                     rank_zero_address, ranks_over_hosts, starts_torchrun, torchrun_agents, torchrun_under)
from .pods import Injected, PodGroup, container_resources

# (find_mpirun, MpiRun and the implementations are read from here too.)
__all__ = ["HOSTFILE", "INTEL", "MPICH", "OPEN_MPI", "MpiRun", "find_mpirun"]

KIND = "MPIJob"
LAUNCHER, WORKER = "Launcher", "Worker"
# v2beta1/constants.go lines 21-45 at v0.8.0.
OPERATOR_NAME = "mpi-operator"
LABEL_PREFIX = "training.kubeflow.org/"
OPERATOR_NAME_LABEL = LABEL_PREFIX + "operator-name"
JOB_NAME_LABEL = LABEL_PREFIX + "job-name"
JOB_ROLE_LABEL = LABEL_PREFIX + "job-role"
REPLICA_INDEX_LABEL = LABEL_PREFIX + "replica-index"
# mpi_job_controller.go lines 74-118: names, the hostfile's place and the slots variables.
CONFIG_MOUNT = "/etc/mpi"
MPI_IMPLEMENTATIONS = (OPEN_MPI, INTEL, MPICH)
RESTART_POLICIES = ("Never", "OnFailure")  # validation.go validRestartPolicies
CLEAN_POD_POLICIES = ("None", "Running", "All")
MANAGED_BY = ("kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue")  # validation.go validManagedBy
DEFAULT_RESTART = {LAUNCHER: "OnFailure", WORKER: "Never"}  # constants.go DefaultLauncherRestartPolicy, Default...


def _older_service(job: str) -> tuple[str, str]:
    """v2beta1 is also served by mpi-operator v0.4.0, whose pods' subdomain is the workers' Service `<job>-worker`
    (mpi_job_controller.go:1244 newWorkersService, 1195 the hostfile at v0.4.0); v0.5.0 on name the one Service
    `<job>` (newJobService, :1384 at v0.8.0). The manifests do not show which release runs."""
    return f"{job}-worker", (f"rank 0's name under mpi-operator v0.4.0, whose workers' Service is '{job}-worker' "
                             "(mpi_job_controller.go:1244 at v0.4.0): where the cluster runs v0.5.0 or later, whose one "
                             f"Service is '{job}' (newJobService, :1384 at v0.8.0), that name does not resolve")



def replica_specs(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(k): mapping(v) for k, v in mapping(spec.get("mpiReplicaSpecs")).items()}


def slots_per_worker(spec: dict[str, Any]) -> int | None:
    return as_int(spec.get("slotsPerWorker"), 1) if spec.get("slotsPerWorker") is not None else 1


def launcher_as_worker(spec: dict[str, Any]) -> bool:
    return spec.get("runLauncherAsWorker") is True


def worker_count(spec: dict[str, Any]) -> int:
    """Worker replicas after the defaulter (default.go setDefaultsTypeWorker: 0 where unset; no Worker spec: none)."""
    return max(as_int(replica_specs(spec).get(WORKER, {}).get("replicas"), 0) or 0, 0)


class MPIJobLauncher(Launcher[Workload]):
    id = "mpijob"
    order = 75
    upstream = "kubeflow/mpi-operator v0.8.0"
    title = "Kubeflow MPI Operator v2 MPIJob (launcher, workers, hostfile)"
    kinds = (("kubeflow.org", KIND),)
    # The first MPIJob API (kubeflow/mpi-operator v0.3.0 pkg/apis/kubeflow/v1alpha1/types.go 40-98) has no
    # mpiReplicaSpecs: spec.gpus (or processingUnits, or replicas) and one spec.template the operator split itself.
    # Its objects are not read as v2beta1 ones (SCHEMA-MISSING says the pinned CRD does not serve the version).
    unread_versions = ("v1alpha1",)
    # Kueue's integration for it (FrameworkName, kubernetes-sigs/kueue v0.19.2
    # pkg/controller/jobs/mpijob/mpijob_controller.go:42)
    kueue_framework = "kubeflow.org/mpijob"
    for_training = True
    managed_dns = True
    ttl_field = ("spec", "runPolicy", "ttlSecondsAfterFinished")
    managed_by_field = ("spec", "runPolicy", "managedBy")
    controller_name = "kubeflow.org/mpi-operator"  # pkg/apis/kubeflow/v2beta1/types.go:98 KubeflowJobController
    managed_by_source = ("kubeflow/mpi-operator v0.8.0 pkg/controller/mpi_job_controller.go:598 "
                         "managedByExternalController (1810), TestDoNothingWithMPIJobManagedExternally")
    suspend_field = ("spec", "runPolicy", "suspend")
    suspend_source = ("kubeflow/mpi-operator v0.8.0 pkg/controller/mpi_job_controller.go:711-724 (the launcher Job "
                      "created suspended, the workers' pods deleted)")
    scale = ScaleSpec(pods=[(("spec", "mpiReplicaSpecs", WORKER, "replicas"), 0)],
                      resources=[("spec", "mpiReplicaSpecs", WORKER, "template", "spec", "containers", 0,
                                  "resources")])

    def build(self, m: Manifest, bundle: Bundle) -> Workload:
        spec = mapping(m.obj.get("spec"))
        name = m.name
        ns = m.namespace or "default"
        specs = replica_specs(spec)
        slots = slots_per_worker(spec)
        impl = str(spec.get("mpiImplementation") or OPEN_MPI)
        as_worker = launcher_as_worker(spec)
        workers = worker_count(spec)

        def first_container(rspec: dict[str, Any]) -> str | None:
            cs = listing(dig(rspec, "template", "spec", "containers"))
            return str(mapping(cs[0]).get("name")) if cs else None

        def launcher_env(container: str, init: bool, target: str | None) -> list[Injected]:
            """newLauncherPodTemplate: appended to container 0 only, in this order."""
            if init or container != target:
                return []
            out = [Injected("K_MPI_JOB_ROLE", "launcher")]
            if impl == OPEN_MPI:
                out += [Injected("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
                        Injected("OMPI_MCA_orte_default_hostfile", HOSTFILE),
                        Injected("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
                        Injected("OMPI_MCA_orte_set_default_slots", str(slots))]
            elif impl == INTEL:
                out += [Injected("I_MPI_HYDRA_HOST_FILE", HOSTFILE),
                        Injected("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "-o ConnectionAttempts=10"),
                        Injected("I_MPI_PERHOST", str(slots))]
            elif impl == MPICH:
                out += [Injected("HYDRA_HOST_FILE", HOSTFILE), Injected("HYDRA_LAUNCH_EXTRA_ARGS",
                                                                        "-o ConnectionAttempts=10")]
            if not as_worker:  # nvidiaDisableEnvVars: the launcher uses no GPU
                out += [Injected("NVIDIA_VISIBLE_DEVICES", ""), Injected("NVIDIA_DRIVER_CAPABILITIES", "")]
            return out

        def labels(role: str, index: str | None) -> dict[str, str]:
            out = {OPERATOR_NAME_LABEL: OPERATOR_NAME, JOB_NAME_LABEL: name, JOB_ROLE_LABEL: role}
            if index is not None:
                out[REPLICA_INDEX_LABEL] = index
            if role == "launcher":
                # The launcher pod is a batch Job's (newLauncherJob, mpi_job_controller.go:1528-1546 at v0.8.0: named
                # <name>-launcher, launcherSuffix at line 84; not Indexed): the API server labels its template with
                # the Job's name (kubernetes v1.36.0 pkg/registry/batch/job/strategy.go generateSelector; the
                # controller-uid labels too, whose value only the cluster knows).
                out.update({label: f"{name}-launcher" for label in JOB_NAME_LABELS})
            return out

        groups: list[PodGroup] = []
        if LAUNCHER in specs:
            launcher_target = first_container(specs[LAUNCHER])
            groups.append(PodGroup(
                role=LAUNCHER, count=1, offset=0, aux=not as_worker,
                template=_with_restart(specs[LAUNCHER], LAUNCHER),
                template_field=f"spec.mpiReplicaSpecs.{LAUNCHER}.template",
                name=lambda i: f"{name}-launcher-<random>",
                hostname=lambda i: f"{name}-launcher", hostname_forced=True,
                subdomain=name, subdomain_forced=True,
                labels=lambda i: labels("launcher", "0" if as_worker else None),
                inject=lambda i, c, init: launcher_env(c, init, launcher_target),
                container_name=launcher_target))
        if WORKER in specs:
            worker_target = first_container(specs[WORKER])
            template = _with_restart(specs[WORKER], WORKER)
            groups.append(PodGroup(
                role=WORKER, count=workers, offset=1 if as_worker and LAUNCHER in specs else 0,
                template=template, template_field=f"spec.mpiReplicaSpecs.{WORKER}.template",
                name=lambda i: f"{name}-worker-{i}",
                hostname=lambda i: f"{name}-worker-{i}", hostname_forced=True,
                subdomain=name, subdomain_forced=True,
                labels=lambda i: labels("worker", str(i + 1 if as_worker else i)),
                inject=lambda i, c, init: [Injected("K_MPI_JOB_ROLE", "worker")]
                if (c == worker_target and not init) else [],
                container_name=worker_target,
                containers=_worker_containers(template)))
        w = Workload(m, self, groups, m.namespace)
        w.notes.append(f"hostfile {HOSTFILE} (ConfigMap {name}-config): "
                       + (f"{name}-launcher.{name}.{ns}.svc slots={slots}, " if as_worker else "")
                       + (f"{name}-worker-0..{workers - 1}.{name}.{ns}.svc slots={slots} each" if workers
                          else "no workers"))
        return w

    def services(self, w: Workload) -> list[dict[str, Any]]:
        """newJobService: one headless Service named like the job over the launcher and the workers, publishing
        pods that are not ready only with runLauncherAsWorker."""
        spec = mapping(w.manifest.obj.get("spec"))
        return [{"name": w.manifest.name, "clusterIP": "None",
                 "selector": {OPERATOR_NAME_LABEL: OPERATOR_NAME, JOB_NAME_LABEL: w.manifest.name},
                 "publishNotReadyAddresses": launcher_as_worker(spec)}]

    def pods_field(self, w: Workload) -> str:
        return f"spec.mpiReplicaSpecs.{WORKER}.replicas"

    def address(self, w: Workload, pod: Any) -> str:
        return f"{pod.hostname}.{pod.subdomain}"

    def dns_names(self, m: Manifest) -> list[tuple[str, str, str, bool]]:
        workers = max(worker_count(mapping(m.obj.get("spec"))), 1)
        return [("metadata.name", m.name, "the operator's headless Service", True),
                (f"spec.mpiReplicaSpecs.{WORKER}.replicas", f"{m.name}-worker-{workers - 1}",
                 "the last worker's hostname", False),
                ("metadata.name", f"{m.name}-launcher", "the launcher's hostname", False)]

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        for rtype, rspec in replica_specs(mapping(m.obj.get("spec"))).items():
            if isinstance(rspec.get("template"), dict):
                yield f"spec.mpiReplicaSpecs.{rtype}.template", rspec["template"]

    def gang_scheduler(self, w: Workload) -> str | None:
        return "schedulingPolicy" if mapping(dig(w.manifest.obj, "spec", "runPolicy")).get("schedulingPolicy") else None

    def unmodelled_world(self, w: Workload) -> str | None:
        run = self._mpirun(w)
        if run is None:
            return None
        impl = str(mapping(w.manifest.obj.get("spec")).get("mpiImplementation") or OPEN_MPI)
        return mpirun_words(run, impl, "the operator's", "-np and -H are checked against the workers' slots (TOPO011)")

    def mpi_world(self, w: Workload) -> MpiWorld | None:
        spec = mapping(w.manifest.obj.get("spec"))
        worker = next((g for g in w.groups if g.role == WORKER), None)
        as_worker = launcher_as_worker(spec)
        slots = slots_per_worker(spec) or 0
        containers = listing(dig(worker.template, "spec", "containers")) if worker else []
        gpus = container_resources(mapping(containers[0]))[0] if containers else 0
        hosts = _hostnames(w.manifest.name, worker.count if worker else 0, as_worker)
        # Worker replicas is the ScaleSpec's pods path; the launcher is a host too with runLauncherAsWorker.
        return MpiWorld(hosts, slots, gpus, w.all_pods, hosts_for=lambda n: n + (1 if as_worker else 0),
                        pods_for=lambda n: n + 1)

    def _mpirun(self, w: Workload) -> MpiRun | None:
        launcher = next((g for g in w.groups if g.role == LAUNCHER), None)
        if launcher is None:
            return None
        pod = w._make_pod(launcher, 0, -1)
        return find_mpirun(*pod.argv(pod.containers[0]), pod.containers[0].env, pod.hostname) if pod.containers \
            else None

    def admission(self, w: Workload, bundle: Bundle, torchrun: bool) -> list[Check]:
        spec = mapping(w.manifest.obj.get("spec"))
        return refused(w.manifest.name, spec) + self._ranks(w, spec)

    def _ranks(self, w: Workload, spec: dict[str, Any]) -> list[Check]:
        """mpirun -np against the hostfile's slots and the workers' GPUs; torchrun under mpirun."""
        out: list[Check] = []
        launcher = next((g for g in w.groups if g.role == LAUNCHER), None)
        worker = next((g for g in w.groups if g.role == WORKER), None)
        if launcher is None:
            return out
        pod = w._make_pod(launcher, 0, -1)
        if not pod.containers:
            return out
        argv, fields = pod.argv(pod.containers[0])
        run = find_mpirun(argv, fields, pod.containers[0].env, pod.hostname)
        slots = slots_per_worker(spec) or 0
        impl = str(spec.get("mpiImplementation") or OPEN_MPI)
        hosts = (worker.count if worker else 0) + (1 if launcher_as_worker(spec) else 0)
        total = hosts * slots
        gpus = container_resources(mapping(listing(dig(worker.template, "spec", "containers"))[0]))[0] \
            if worker and listing(dig(worker.template, "spec", "containers")) else 0
        if run is None:
            return out
        if run.hostfile is not None and run.hostfile != HOSTFILE:
            return out  # (another hostfile: TOPO012 says its slots were not checked)
        pods = _hostnames(w.manifest.name, worker.count if worker else 0, launcher_as_worker(spec))
        names: Sequence[str] = pods
        if run.hosts is not None:
            out += self._hosts(w, run, pods, impl)
            names = [h.split(".")[0] for h, _ in run.hosts]
        elif hosts == 0 and impl == OPEN_MPI:
            # A default hostfile that names no host leaves Open MPI the local node (orte/mca/ras/base/
            # ras_base_allocate.c "nothing found in hostfiles - inserting current node", Open MPI 4.1; prrte's alike in
            # 5.0): every rank runs in the launcher pod, as many as its node's cores unless --oversubscribe.
            ranks = f"all {run.np} ranks" if run.np is not None else "every rank"
            out.append(Check(run.field, f"the hostfile names no host (no Worker pods, runLauncherAsWorker off): Open "
                             f"MPI runs {ranks} in the launcher pod, on its node's cores, so nothing is distributed",
                             "add Worker replicas (one per node), or set runLauncherAsWorker: true",
                             severity=WARNING))
        elif run.np is not None and run.np > total and impl == OPEN_MPI and not run.oversubscribe:
            out.append(Check(run.field, f"mpirun -np {run.np} but the hostfile has {total} slots ({hosts} hosts x "
                             f"slotsPerWorker {slots}): Open MPI refuses to start (not enough slots available)",
                             f"set -np {total}, raise Worker replicas or slotsPerWorker, or add --oversubscribe"))
        if gpus and slots != gpus:
            out.append(Check("spec.slotsPerWorker", f"slotsPerWorker {slots} but each worker has {gpus} GPUs: mpirun "
                             f"places {slots} rank{'s' if slots != 1 else ''} per worker, so "
                             + ("GPUs stay idle" if slots < gpus else "ranks share a GPU"),
                             f"set slotsPerWorker: {gpus} (one rank per GPU)", severity=WARNING))
        if gpus and run.np is not None and run.np < total and not starts_torchrun(run):
            out.append(Check(run.field, f"mpirun -np {run.np} uses {run.np} of the {total} slots the {hosts} workers' "
                             f"{gpus} GPUs each give", f"set -np {total}", severity=WARNING))
        if (inv := torchrun_under(run)) is not None:  # (-H's hosts and slots where it names them, else the hostfile's)
            out += torchrun_agents(run, inv, pod, *ranks_over_hosts(run, total, hosts))
        elif names and not starts_torchrun(run):
            out += rank_zero_address(w, run, pod, names[0], older=_older_service(w.manifest.name))
        return out

    def _hosts(self, w: Workload, run: MpiRun, names: Names, impl: str) -> list[Check]:
        """`mpirun -H host:slots,...`: every host one of the job's pods, and -np within the slots listed."""
        out: list[Check] = []
        hosts = run.hosts or []
        for host, _ in hosts:
            first = host.split(".")[0]
            if re.fullmatch(re.escape(w.manifest.name) + r"-(worker-\d+|launcher)", first) and first not in names:
                out.append(Check(run.field, f"mpirun -H names {host}, which is not a pod of this MPIJob (its hosts: "
                                 f"{names.shown() or 'none'}): ssh cannot reach it and mpirun fails",
                                 f"list only {names[0]}..{names[-1]}" if names else "add Worker replicas"))
        return out + np_within_hosts(run, impl)


def _with_restart(rspec: dict[str, Any], role: str) -> dict[str, Any]:
    """The template with the replica's restartPolicy as the pod's (setRestartPolicy: ExitCode -> Never; the
    defaulter's OnFailure for the launcher, Never for workers)."""
    template = mapping(rspec.get("template"))
    policy = str(rspec.get("restartPolicy") or DEFAULT_RESTART[role])
    spec = {**mapping(template.get("spec")), "restartPolicy": "Never" if policy == "ExitCode" else policy}
    return {**template, "spec": spec}


def _worker_containers(template: dict[str, Any]) -> list[dict[str, Any]]:
    """newWorker: container 0 runs `/usr/sbin/sshd -De` where it has no command and no args."""
    cs = [mapping(c) for c in listing(dig(template, "spec", "containers"))]
    if cs and not cs[0].get("command") and not cs[0].get("args"):
        cs[0] = {**cs[0], "command": ["/usr/sbin/sshd", "-De"]}
    return cs


def refused(name: str, spec: dict[str, Any]) -> list[Check]:
    """validation.go ValidateMPIJob at v0.8.0 (lines 49-160), after the defaulter (default.go): the controller
    checks it in syncHandler and creates nothing for a job it refuses."""
    out: list[Check] = []
    specs = replica_specs(spec)
    workers = as_int(specs.get(WORKER, {}).get("replicas"))  # validateMPIJobName: unset or below 1 counts as 1
    last = f"{name}-worker-{(workers if workers and workers > 0 else 1) - 1}"
    if len(last) > 63 or not DNS1035.match(last):
        out.append(Check("metadata.name", f"worker hostname '{last}' is not a DNS-1035 label of at most 63 "
                         "characters: the MPI Operator will not create the job's pods and Service",
                         "use a shorter lowercase name that starts with a letter"))
    slots = spec.get("slotsPerWorker")
    slot_count = as_int(slots)
    if slots is not None and (slot_count is None or slot_count < 0):
        out.append(Check("spec.slotsPerWorker", f"slotsPerWorker {slots} is negative: the MPI Operator refuses the "
                         "job", "set slotsPerWorker to the GPUs (or cores) per worker"))
    impl = spec.get("mpiImplementation")
    if impl is not None and impl not in MPI_IMPLEMENTATIONS:
        out.append(Check("spec.mpiImplementation", f"mpiImplementation '{impl}' is not one of "
                         f"{', '.join(MPI_IMPLEMENTATIONS)}: the MPI Operator refuses the job",
                         "use OpenMPI, Intel or MPICH"))
    policy = mapping(spec.get("runPolicy"))
    if policy.get("cleanPodPolicy") is not None and policy["cleanPodPolicy"] not in CLEAN_POD_POLICIES:
        out.append(Check("spec.runPolicy.cleanPodPolicy", f"cleanPodPolicy '{policy['cleanPodPolicy']}' is not one "
                         f"of {', '.join(CLEAN_POD_POLICIES)}: the MPI Operator refuses the job", "use None, Running or All"))
    for key in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"):
        value = as_int(policy.get(key))
        if value is not None and value < 0:
            out.append(Check(f"spec.runPolicy.{key}", f"{key} {value} is negative: the MPI Operator refuses the job",
                             f"set {key} to 0 or more"))
    if policy.get("managedBy") is not None and policy["managedBy"] not in MANAGED_BY:
        out.append(Check("spec.runPolicy.managedBy", f"managedBy '{policy['managedBy']}' is not one of "
                         f"{', '.join(MANAGED_BY)}: the MPI Operator refuses the job",
                         "leave managedBy out, or use kueue.x-k8s.io/multikueue"))
    if not specs:
        out.append(Check("spec.mpiReplicaSpecs", "no replica specs: the MPI Operator refuses the job",
                         "add a Launcher and Worker replica spec"))
        return out
    for role in (LAUNCHER, WORKER):
        rspec = specs.get(role)
        where = f"spec.mpiReplicaSpecs.{role}"
        if rspec is None:
            if role == LAUNCHER:
                out.append(Check(where, "no Launcher replica spec: the MPI Operator refuses the job",
                                 "add spec.mpiReplicaSpecs.Launcher with the mpirun command"))
            continue
        # default.go: Launcher replicas 1, Worker replicas 0 where unset (then refused below, as upstream does).
        replicas = as_int(rspec.get("replicas")) if rspec.get("replicas") is not None else (1 if role == LAUNCHER else 0)
        restart = rspec.get("restartPolicy") or DEFAULT_RESTART[role]
        if restart not in RESTART_POLICIES:
            out.append(Check(f"{where}.restartPolicy", f"restartPolicy '{restart}' is not Never or OnFailure: the MPI "
                             "Operator refuses the job", "use Never or OnFailure"))
        if not listing(dig(rspec, "template", "spec", "containers")):
            out.append(Check(f"{where}.template.spec.containers", f"the {role} defines no container: the MPI Operator "
                             "refuses the job", "add the container"))
        if role == LAUNCHER and replicas is not None and replicas != 1:
            out.append(Check(f"{where}.replicas", f"Launcher replicas is {replicas}: the MPI Operator refuses the job "
                             "(must be 1)", "set replicas: 1"))
        if role == WORKER and replicas is not None and replicas <= 0:
            out.append(Check(f"{where}.replicas", f"Worker replicas is {replicas}: the MPI Operator refuses the job "
                             "(must be greater than or equal to 1)", "set replicas to the number of worker pods"))
    return out


LAUNCHER_MODEL = MPIJobLauncher()


def _hostnames(job: str, workers: int, launcher: bool) -> Names:
    """The hostfile's hosts by pod name (the launcher first where it runs as a worker, then worker-0..N-1), however
    many workers the manifest asks for; `in` reads a name instead of listing them."""
    def member(host: str) -> bool:
        if launcher and host == f"{job}-launcher":
            return True
        m = re.fullmatch(re.escape(job) + r"-worker-(0|[1-9]\d*)", host)
        return m is not None and int(m.group(1)) < workers
    return Names([(1 if launcher else 0, lambda i: f"{job}-launcher"), (workers, lambda i: f"{job}-worker-{i}")], member)
