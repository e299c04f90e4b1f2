"""After a pod of a workload ends: what the kubelet and the controller do (restart the container in place, recreate
the pod or the whole workload, fail it, or wait), the counts they keep, and the kubelet's own restart rule. Each
launcher module's `after_exit` decides with these; `make simulate FAULT=...` (policies/simulate/) carries them out."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

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
    # The pod's node was lost (shut down, unreachable): no kubelet restarts its container, and the pod object stays,
    # Terminating once the taint manager evicts it, until the Node object is deleted or the pod force-deleted
    # (kubernetes/kubernetes#54368): a controller that names its pods (StatefulSet, PyTorchJob) cannot create it
    # again before; one that generates names replaces it once it is terminating or failed.
    node_lost: bool = False


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

    def record(self, d: Decision, index: int) -> None:
        """Count a decision about pod `index` as the kubelet and the controller do: a container restarted in place
        adds to its pod's restartCount; a new pod for the index starts at restartCount 0 (the controllers sum the
        restartCounts of the pods that exist: kubernetes v1.36.0 pkg/controller/job/job_controller.go
        pastBackoffLimitOnFailure, training-operator v1.9.4 pkg/core/job.go lines 113-125) and, counted, adds a
        failed pod; every Job recreated (a JobSet restart) starts every count of its Jobs again."""
        if d.action == RESTART_CONTAINER:
            self.container_restarts[index] = self.container_restarts.get(index, 0) + 1
        elif d.action == RECREATE_POD:
            self.container_restarts.pop(index, None)
            if d.counted:
                self.failed_pods[index] = self.failed_pods.get(index, 0) + 1
        elif d.action == RECREATE_ALL:
            if d.counted:
                self.workload_restarts += 1
            self.container_restarts.clear()
            self.failed_pods.clear()


@dataclass
class Decision:
    """What happens after a pod ended: the action, who decides, the settings that decided, and where upstream."""

    action: str
    controller: str
    why: str
    source: str
    delay: float = 0.0   # seconds before the restart (back-off)
    counted: bool = True  # counted against the workload's limit
    # The pod comes back only once its lost node's Node object is deleted or the pod force-deleted (a `return`
    # fault in a simulation stands for that); until then the rest of the world waits.
    awaits_node: bool = False
    # Where the pod's success ends its workload (a PyTorchJob's Master, or any Worker of an elastic one): the words
    # and the upstream place; from then on its controller acts on none of its pods (None: it does not end it).
    ends_job: str | None = None


class Restarted(Decision):
    """The kubelet's restart in place (kubelet_restarts), its `why` written when first read: a pod-loss replay makes
    thousands and reads the why of the few that end or stall the world. `head`, where a controller set it, stands
    in for the message's first part (`restartPolicy <policy>`), with what the controller counts."""

    def __init__(self, who: str, policy: Any, n: int, delay: float, exit_code: int) -> None:
        # Decision's fields without its __init__, whose `why` this class words on demand.
        self.action, self.controller, self.source = RESTART_CONTAINER, who, KUBELET_SOURCE
        self.delay, self.counted, self.awaits_node, self.ends_job = delay, True, False, None
        self.head: str | Callable[[], str] | None = None
        self._policy, self._n, self._exit_code, self._delay = policy, n, exit_code, delay
        self._why: str | None = None

    @property
    def why(self) -> str:
        if self._why is not None:  # set in full
            return self._why
        after = " after it completed (exit 0)" if self._exit_code == 0 else ""
        text = (f"restartPolicy {self._policy}: container restarted in place{after} (restart {self._n + 1}, back-off "
                f"{self._delay:.0f} s)")
        head = self.head() if callable(self.head) else self.head
        return text if head is None else f"{head}: " + text.split(": ", 1)[1]

    @why.setter
    def why(self, text: str) -> None:
        self._why = text


def kubelet_restarts(pod_spec: dict[str, Any], ended: PodExit, count: RestartCount, who: str = "kubelet"
                     ) -> Restarted | None:
    """The kubelet restarts a container in place (restartPolicy Always, exit 0 included, or OnFailure and a non-zero
    exit) unless the pod was deleted or its node lost; the first restart at once, then 10 s doubling to 300 s."""
    policy = pod_spec.get("restartPolicy") or "Always"
    if ended.deleted or ended.node_lost or policy == "Never" or (policy == "OnFailure" and ended.exit_code == 0):
        return None
    n = count.container_restarts.get(ended.index, 0)
    delay = 0.0 if n == 0 else min(KUBELET_BACKOFF * 2 ** (n - 1), KUBELET_MAX_BACKOFF)
    return Restarted(who, policy, n, delay, ended.exit_code)


def completed(pod_spec: dict[str, Any], ended: PodExit, who: str = "kubelet") -> Decision | None:
    """A container that exited 0 in a pod that was neither deleted nor lost, and that the kubelet leaves stopped
    (restartPolicy OnFailure or Never): the pod succeeded. None where it does not (Always restarts it)."""
    policy = pod_spec.get("restartPolicy") or "Always"
    if ended.exit_code != 0 or ended.deleted or ended.node_lost or policy == "Always":
        return None
    return Decision(SUCCEEDED, who, f"restartPolicy {policy}: exit 0, the pod succeeded", KUBELET_SOURCE)

