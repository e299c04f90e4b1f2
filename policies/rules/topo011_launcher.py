"""The controller admits the workload: what its webhook (or the API server) refuses, and what it needs first.

MPIJob (mpi-operator v0.8.0): mpirun's `-np` within the slots of the operator's hostfile (workers x slotsPerWorker)
or of `-H host:slots,...` (Open MPI refuses more without --oversubscribe; a hostfile that names no host, an MPIJob
without workers, leaves Open MPI the launcher's own node: a warning that nothing is distributed), every `-H` host one
of the job's pods, and
the rank-0 address a script under mpirun joins (`-x MASTER_ADDR=...`, a `tcp://` `--dist-url`) naming the host of the
first slot, where rank 0 runs (a name under `<job>-worker`, the workers' Service of mpi-operator v0.4.0, which also
serves v2beta1, is a warning phrased as the cluster running v0.5.0 or later: the manifests do not show the release).
Where mpirun (an MPIJob's, a TrainJob MPI runtime's launcher, a leader's below with
its hosts stated) starts torchrun, each rank is one torchrun agent, one node of torchrun's world, which takes its
--nnodes, --node-rank and rendezvous from its own flags (or `-x` PET_* env), never from OMPI_COMM_WORLD_RANK:
--nnodes above the ranks never completes the rendezvous, --nnodes 1 (torchrun's default) or --standalone makes each
agent a world of one, and static rendezvous gives every agent the same --node-rank (errors); more ranks than --nnodes
admits, or than hosts, are warnings. Where mpirun's program names torchrun in a way not read here (`python3
.../torchrun`, after `cd ...;`, `python -m torch.distributed.run` or `.launch`), its rank-0 address is not checked:
torchrun sets its workers' MASTER_ADDR from its own --master-addr, whatever `-x MASTER_ADDR` says. The same checks (the MPIJob's code) apply to mpirun started by the first pod of
a world no MPI controller lays out (a plain Indexed Job, a StatefulSet, a JobSet's leader) where its command states
the hosts (`-H host:slots,...`, or `--hostfile` mounted from a ConfigMap or Secret in the manifests): a host named
under the world's headless Service (`<hostname>.<subdomain>`) that is no pod of it does not resolve, `-np` above the
slots listed is refused by Open MPI (its `-H`/`--hostfile` spellings), and `-x MASTER_ADDR` names the first host.

Each launcher module says what its admission refuses, from the upstream source at the pinned tag, for every
workload whether it trains or not. PyTorchJob (training-operator v1.9.4 webhook): a DNS-1035 name, replica types
Master and Worker only, exactly one Master (`replicas` written: the webhook runs before the defaulter), a container
named `pytorch` with an image in every replica type, an `elasticPolicy` only with Workers, never both
`nprocPerNode` fields, a known `managedBy`; and torchrun whenever `nprocPerNode` is above 1 (the operator counts
WORLD_SIZE in processes but starts one process per pod: an error where the pods start the repository's trainer,
which starts one, a warning phrased as the condition for a script of its own, which may spawn them). TrainJob (Trainer v2.3.0): the runtime it names is in the
manifests (or is upstream's `torch-distributed`; a runtime without an `mlPolicy.torch` is admitted and injects no
PET_* env, and the line says what its policy's plugin injects instead (MPI's OMPI_* env and hostfile, JAX_*,
DMLC_*, nothing for plain ML): a warning where the trainer starts torchrun, else an info line); on a torch runtime
the five reserved PET_* variables are not set by hand, on an MPI runtime the four reserved OMPI_MCA_* ones, on an
XGBoost runtime the four DMLC_* ones; an MPI runtime that runs the launcher as a node has both a `launcher` and a
`node` Job where numNodes is 2 or more; the MPI launcher's `mpirun -np` fits the hostfile's slots (nodes x
numProcPerNode: more is an error without --oversubscribe, fewer a warning) and its rank-0 address (`-x MASTER_ADDR`,
a `tcp://` `--dist-url`) names the hostfile's first host, as an MPIJob's (where the command names `-H host:slots,...`,
which filters the Trainer's default hostfile, its hosts and slots instead), and its `mpiImplementation` is not
`""` (the plugin knows only OpenMPI and never builds the JobSet); `envInjection` names existing
containers, runtime patches reach only
the runtime's Jobs and containers, set no env on `node` or the initializers and name a domain-prefixed
`manager` (acme.io/foo), and an initializer the TrainJob
configures has the runtime's Job of its name with a container of that name mounting the volume `initializer`;
a torchtune `tune run` TrainJob names a supported model's runtime, spans nodes only for Llama 3.3 70B, uses no
QLoRA on Qwen or across devices on Llama 3.2, no LoRA across nodes, and sets none of the runtime's own config items
in its args; and the (Cluster)TrainingRuntime webhook's: a replicated Job labelled with a known
trainjob-ancestor-step has replicas 1 and the container its step needs (`node` for the trainer); a warning where
the TrainJob names a ClusterTrainingRuntime labelled `trainer.kubeflow.org/support: deprecated`.
JobSet (v0.12.0 webhook): child Job
and pod names, the subdomain and group names are DNS-1035 labels within 63 characters, the coordinator names a pod,
`dependsOn` only on a replicated Job listed earlier (none on the first) and never with `startupPolicy: InOrder`, the
success and failure policies name existing replicated Jobs, and each `volumeClaimPolicies` template has a unique
short name, is mounted by a container and shares its name with no pod volume, replicas x parallelism stays within
2147483647 per replicated Job, `managedBy` is a domain-prefixed path
of at most 63 characters, failure-policy rule names are unique, at most 128 characters, start with a letter and
end with a letter, digit or '_', and `onJobFailureReasons` are Job failure reasons; a warning where a `RestartJob`
action or `restartStrategy: InPlaceRestart` needs an alpha feature gate (off by default, the webhook refuses them
without), an error where the environment declares the JobSet controller's gates (`featureGates: {jobset: ...}`)
without that one on, nothing where it turns it on. Job (API server validation at v1.36.0): an Indexed Job states `completions` where it sets `parallelism`
(both unset default to 1), a parallelism within 100000, `maxFailedIndexes` within completions, the per-index
backoff fields and a `successPolicy` only in Indexed mode, success rules that count something within completions,
`podFailurePolicy` rules with one requirement, ordered unique exit codes (no 0 under In) and known container names,
with `restartPolicy: Never` and `podReplacementPolicy` Failed, `managedBy` as for JobSet; a pod `restartPolicy` of
Never or OnFailure (unset means Always, which a Job refuses; a JobSet's webhook makes an unset one OnFailure first),
no negative counts or deadlines, `maxFailedIndexes` only with `backoffLimitPerIndex`, and a `selector` only with
`manualSelector: true` (then selecting the template's labels). Pod templates of Jobs (a JobSet's included) and the
pods a StatefulSet creates (core validation at v1.36.0): valid template labels, containers with an image and names
unique across containers and init containers, port names of at most 15 characters used once, ports within 1-65535
(a hostPort with hostNetwork equal to the containerPort), env with value or one valueFrom source, volume mounts of
declared volumes (or the controller's claims) at distinct paths, no probes on init containers that are no sidecar,
liveness and startup probes with one handler and successThreshold 1, known restart and DNS policies (dnsPolicy None
with nameservers), DNS-1123 label hostname and subdomain, well-formed tolerations; and the kubelet's limit: with
`setHostnameAsFQDN` the pod's fully qualified name stays within 64 characters with the environment's `clusterDomain`
(where it declares none: an error where no cluster domain makes it short enough, a warning where cluster.local makes
it too long). Services (core validation): ports named where there are several, names and port/protocol pairs
unique, port numbers within range, no headless NodePort or LoadBalancer, ports on any Service that is not headless.
ConfigMaps and Secrets (core validation): keys of alphanumerics, '-', '_' and '.', no key in both `data` and
`binaryData`, at most 1 MiB of data in all (a Secret's decoded, with `stringData` merged).
StatefulSet (API server validation at v1.36.0): a DNS-1123 label name, `restartPolicy` Always, a selector that
selects the template's labels, known update strategy and pod management policy (no `rollingUpdate` with OnDelete,
`maxUnavailable` from 1 to 100%), no negative partition, replicas or `ordinals.start`, no `activeDeadlineSeconds`.
Volcano Job (v1.15.1 webhook): at least one task, unique task names, task and job `minAvailable` within the
replicas, known plugins, job and pod names within 63 characters, the `mpi` plugin's master task among the tasks;
lifecycle `policies` (the job's and each task's) with an event or an exitCode but not both, only the events and
actions the webhook allows (an event policy names its action), no event in two policies of a list, `*` alone, no
exitCode 0 and none twice; `volumes` with a mountPath used once and a volumeClaim or a volumeClaimName (a DNS-1123
subdomain), not both; `dependsOn` forming a DAG of the job's own tasks; each task's pod template (core validation,
as for Jobs), whole CPUs in every container with a `topologyPolicy`, a `partitionPolicy` with replicas =
totalPartitions x partitionSize (and minAvailable = minPartitions x partitionSize); `networkTopology` without both
highestTierAllowed and highestTierName (the queue checks need the cluster's Queue objects: not made); and a
`pytorch` plugin whose master task exists (else it injects nothing). LeaderWorkerSet (v0.10.0 webhook): a DNS-1035
name, replicas within 0..1000000, a size of at least 1, a `subGroupSize` that divides size or size - 1 (and no
subgroup-exclusive-topology annotation without one), rolling update `maxUnavailable`/`maxSurge` whole numbers or
percentages within 100% that are not both 0 for the groups there are, a `partition` not below 0. Katib
Experiment (v0.19.0 webhook): a name of at most 40 characters, trial counts above 0 with `parallelTrialCount` and
`maxFailedTrialCount` within `maxTrialCount`, a `trialTemplate` with `primaryContainerName`, `trialParameters`
each named once, referencing a parameter of `spec.parameters` (or the trial's metadata) once, and used in the
trialSpec, which uses no other, sets no name or namespace, and states `successCondition`/`failureCondition` unless
Katib defaults them for its kind; a trial template in a ConfigMap (`spec.trialTemplate.configMap`) that is in the
manifests, in its `configMapNamespace`, has the key `templatePath`, and that key reads as a Kubernetes object (YAML
or JSON with a kind) once the parameters are put in, checked as a trialSpec is (one info line where the ConfigMap is
not in the manifests: its template was not checked); the trial's job is then checked by its own launcher (reported
at `spec.trialTemplate.trialSpec`, or `spec.trialTemplate.configMap`). AppWrapper (v1.2.1 webhook): no nested
AppWrapper, no component in another namespace, every declared PodSet path leads to a pod template and agrees with the PodSets upstream infers for a
known kind (path and replicas), between 1 and 8 PodSets in all; each component's object is then checked by its own
launcher (reported at `spec.components[i].template`). KubeRay RayCluster and RayJob (v1.7.0 controller,
utils/validation.go: a refused RayCluster gets a Warning event and no pods, a refused RayJob ValidationFailed and no
cluster): a name of at most 53 characters (a RayJob's 47) that is a DNS-1035 label; a container in the head and in
every worker group; minReplicas and maxReplicas not negative, min within max (unset ones the CRD defaults); no
resources both in rayStartParams and `resources`, no rayStartParams `labels`, valid group labels; idleTimeoutSeconds
and a priority only with autoscaler v2 (a priority on rayVersion 2.56.0 or later); no suspended worker group with the
autoscaler; GCS fault tolerance set one way (not the ray.io/ft-enabled annotation beside gcsFaultToleranceOptions, no
RAY_REDIS_ADDRESS without either; with the options no redis-password, REDIS_PASSWORD, RAY_REDIS_ADDRESS or
external-storage-namespace annotation, no `storage` on the redis backend); no redis username outside the options;
RAY_enable_autoscaler_v2 only with autoscaling and not beside autoscalerOptions.version; restartPolicy Never (or
unset) on the head and workers under autoscaler v2; autoscalerOptions.idleTimeoutSeconds not negative and no
KUBERAY_GEN_AUTOSCALER_START_CMD in its env; token auth on rayVersion 2.52.0 or later (Kubernetes token auth 2.55.0,
in token mode, without secretName, never in a RayJob); an upgradeStrategy type of Recreate or None, never on a
RayCluster labelled as made by a RayJob or RayService. A RayJob: suspended only with shutdownAfterJobFinishes, a TTL
only with it and never negative, a rayClusterSpec or a clusterSelector naming a cluster (with a selector no suspend,
no SidecarMode, no backoffLimit), no backoffLimit in InteractiveMode, in SidecarMode no submitter template or config
and a head restartPolicy Never, a runtimeEnvYAML that is a YAML mapping, positive deadlines, a non-negative
backoffLimit and a deletionStrategy that is either both legacy policies (each set, no DeleteCluster/DeleteWorkers with
a selector, no DeleteWorkers with autoscaling, no DeleteNone with shutdownAfterJobFinishes) or deletionRules (not
beside shutdownAfterJobFinishes, one condition each, TTLs not negative, no duplicate, TTLs not decreasing from
DeleteWorkers to DeleteCluster to DeleteSelf). A RayService (refused: a Warning event, Ready False, no cluster): a
name of at most 47 characters that is a DNS-1035 label, a ray.io/initializing-timeout annotation that is a positive
Go duration or number of seconds, its rayClusterConfig as a RayCluster's spec (with the RayService's annotations)
and without Kubernetes token auth or a head Service name, an upgradeStrategy type of NewClusterWithIncrementalUpgrade,
NewCluster or None, no negative rayClusterDeletionDelaySeconds, and for an incremental upgrade the autoscaler and
clusterUpgradeOptions (percentages within 0-100, the step within maxSurgePercent, a positive interval, a
gatewayClassName). A RayCronJob (refused: a Warning event, no RayJob): a name of at most 36 characters that makes its
RayJobs' names DNS-1035 labels, a schedule robfig/cron parses (five fields or a descriptor, no TZ), a known timeZone
(not empty), and its jobTemplate as a RayJob's spec; a warning carrying the RayCronJob gate, off by default, without
which no controller reads it. A warning where networkPolicy, tlsOptions, historyServerOptions or the
rocksdb GCS backend needs an alpha gate, off by default (an error where the environment declares KubeRay's gates
without it, nothing where it turns it on; what those features check once on is not modelled), and for a worker group
name used twice, which only KubeRay's optional webhook refuses.

A TrainJob whose runtime is not in the manifests is applied with a runtime from elsewhere: one info line says its
pods could not be worked out (REF001 requires the runtime where the environment is self-contained).

Fails: a PyTorchJob with 2 Master replicas; `nprocPerNode: "4"` with `python /app/trainer/train.py`; an Indexed Job without
completions; a Job without `restartPolicy`; a RayCluster worker group with idleTimeoutSeconds but no autoscaler v2;
Katib v0.19.0's example Experiment `trial-configmap-source` beside the `trial-templates` ConfigMap of the same tag,
whose `defaultTrialTemplate.yaml` no longer uses the example's `numberLayers` and `optimizer`.
Passes: the repository's own PyTorchJob and TrainJob with their ClusterTrainingRuntime; that ConfigMap with an
Experiment that uses the parameters its template takes.
"""
from __future__ import annotations

from typing import Iterator

from ..launchers import BY_ID, Check, core_validation, leader_mpirun_checks
from ..kube.objects import ERROR, Problem
from .kit import Context

ID = "TOPO011"
NAME = "launcher-requirements"


def gated(ctx: Context, c: Check) -> tuple[str, str] | None:
    """The finding's message and severity under the environment's feature gates: None where the environment runs
    the controller with the gate the finding depends on (Check.gate) on; an error where it declares that controller's
    gates without it; as found where it declares none."""
    message, severity = c.message, c.severity or ""
    if c.gate is not None and ctx.env is not None and c.gate[0] in ctx.env.feature_gates:
        launcher_id, gate = c.gate
        if ctx.env.feature_gates[launcher_id].get(gate, BY_ID[launcher_id].feature_gates.get(gate, False)):
            return None
        message, severity = f"{message}; {ctx.env.name}'s featureGates leave {gate} off", ERROR
    return message, severity


def check(ctx: Context) -> Iterator[Problem]:
    c: Check | None
    for c in ctx.refused:
        assert c.obj is not None, "Launcher.refused sets each Check's obj (launchers/base.py)"
        m = c.obj
        said = gated(ctx, c)
        if said is not None:
            yield Problem(ID, said[0], m.source, m.ref, c.field, c.hint, severity=said[1])
    for w in ctx.unresolved:
        c = w.unresolved
        if c is not None:
            m = w.manifest
            yield Problem(ID, c.message, m.source, m.ref, c.field, c.hint, severity=c.severity or "")
    for m in ctx.of_kind("Service"):
        if m.api_version == "v1" and isinstance(m.obj, dict) and m.ref not in ctx.schema_refused:
            for c in core_validation.service(m.obj):
                yield Problem(ID, c.message, m.source, m.ref, c.field, c.hint, severity=c.severity or "")
    for kind in ("ConfigMap", "Secret"):
        for m in ctx.of_kind(kind):
            if m.api_version == "v1" and isinstance(m.obj, dict) and m.ref not in ctx.schema_refused:
                for c in core_validation.config_data(m.obj, kind):
                    yield Problem(ID, c.message, m.source, m.ref, c.field, c.hint, severity=c.severity or "")
    topologies = {id(t.workload): t for t in ctx.topologies}
    domain = ctx.env.cluster_domain if ctx.env else None
    for w in ctx.workloads:
        t = topologies.get(id(w))
        found = w.launcher.admission(w, ctx.bundle, t.torchrun if t else False) + leader_mpirun_checks(w)
        # The longest hostname of each group of pods is its last one's; the kubelet reads setHostnameAsFQDN in the
        # pod spec, the group's template's, so that pod is made only where the template sets it.
        for g in w.world_groups:
            if g.count > 0 and not w.suspended and g.spec.get("setHostnameAsFQDN") is True:
                pod = w.pod(g.offset + g.count - 1)
                c = core_validation.fqdn_hostname(pod, f"{pod.spec_field}.setHostnameAsFQDN", domain)
                found += [c] if c else []
        for c in found:
            m = c.obj or w.manifest
            said = gated(ctx, c)
            if said is not None:  # (None: the environment runs the controller with the gate on)
                yield Problem(ID, said[0], m.source, m.ref, c.field, c.hint, severity=said[1])
