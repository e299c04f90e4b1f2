"""What Kueue does to the workloads it queues, as far as the model needs it: the names of its integrations and the
scheduling gate of its pod groups. Which kind each integration queues is each launcher's `kueue_framework`; the label
that names the LocalQueue is kube.KUEUE_QUEUE_LABEL."""
from __future__ import annotations

# The integrations Kueue v0.19.2 knows (each pkg/controller/jobs/<kind>/*_controller.go `FrameworkName`): the names its
# Configuration's `integrations.frameworks` takes, and so the names an environment's `kueueFrameworks` lists.
KUEUE_FRAMEWORKS = (
    "batch/job", "deployment", "jobset.x-k8s.io/jobset", "kubeflow.org/jaxjob", "kubeflow.org/mpijob",
    "kubeflow.org/paddlejob", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/xgboostjob",
    "leaderworkerset.x-k8s.io/leaderworkerset", "pod", "ray.io/raycluster", "ray.io/rayjob", "ray.io/rayservice",
    "sparkoperator.k8s.io/sparkapplication", "statefulset", "trainer.kubeflow.org/trainjob",
    "workload.codeflare.dev/appwrapper")
# Where a queued object's integration is on: the webhook of a job integration suspends it at creation, whatever the
# manifest says (pkg/controller/jobframework/defaults.go:36-46 ApplyDefaultForSuspend, for a non-empty queue label
# utils.go:131-152 WorkloadShouldBeSuspended), and the reconciler resumes it once the whole workload is admitted; the
# webhook of a pod-group integration (statefulset, leaderworkerset) marks the pod template instead
# (statefulset_webhook.go:89-105, leaderworkerset_webhook.go:121: SuspendedByParentAnnotation) and the pod webhook
# adds the scheduling gate `kueue.x-k8s.io/admission` to each pod as it is created (pod/pod_webhook.go:109, 176;
# pod/constants/constants.go:24), removed on admission.
KUEUE_GATE = "kueue.x-k8s.io/admission"
# The label naming a queued object's WorkloadPriorityClass (pkg/controller/constants/constants.go 48). Kueue reads the
# class to build the object's Workload (jobframework/reconciler.go 1682-1719 PrepareWorkloadPriority, ExtractPriority;
# pkg/util/priority/priority.go 108-114 GetPriorityFromWorkloadPriorityClass returns the Get error): without it no
# Workload is made, and the object Kueue suspended stays suspended.
WORKLOAD_PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
WORKLOAD_PRIORITY_CLASS = "WorkloadPriorityClass"
WITHOUT_WORKLOAD_PRIORITY_CLASS = ('Kueue makes no Workload for it (workloadpriorityclasses.kueue.x-k8s.io "{}" not '
                                   "found), so it stays suspended and no pod starts")
# Without that label, the PriorityClass an integration's PriorityClass() names instead, which Kueue Gets the same way
# (reconciler.go 1720-1721, util/priority/priority.go 91-101): a Kubeflow job's runPolicy.schedulingPolicy.priorityClass
# (kubeflowjob_controller.go 171-182, mpijob_controller.go 193-202), before its templates' priorityClassName (the
# pods' own reference, which the Priority admission plugin needs anyway).
KUEUE_PRIORITY_CLASS_FIELD = {framework: ("spec", "runPolicy", "schedulingPolicy", "priorityClass")
                              for framework in ("kubeflow.org/pytorchjob", "kubeflow.org/mpijob")}
WITHOUT_PRIORITY_CLASS = ('Kueue makes no Workload for it (priorityclasses.scheduling.k8s.io "{}" not found), so it '
                          "stays suspended and no pod starts")
