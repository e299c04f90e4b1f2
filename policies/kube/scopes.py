"""Which kinds are cluster-scoped: the objects that have no namespace (an AppProject's clusterResourceWhitelist must
name them, SEC009 asks whether an environment allows them, ARGO003 and ADM001 read names and namespaces by them).
The launchers' own cluster-scoped kinds (ClusterTrainingRuntime) are theirs: policies/argocd/apps.py adds them."""
from __future__ import annotations

# Kubernetes v1.36's cluster-scoped kinds (its API discovery: namespaced false) that manifests may hold.
BUILT_IN: frozenset[tuple[str, str]] = frozenset({
    ("", "Namespace"), ("", "PersistentVolume"), ("", "Node"), ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"), ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("scheduling.k8s.io", "PriorityClass"), ("storage.k8s.io", "StorageClass"), ("node.k8s.io", "RuntimeClass"),
    ("resource.k8s.io", "DeviceClass"), ("resource.k8s.io", "ResourceSlice"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
    ("apiregistration.k8s.io", "APIService"), ("certificates.k8s.io", "CertificateSigningRequest"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"), ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("networking.k8s.io", "IngressClass"), ("networking.k8s.io", "IPAddress"), ("networking.k8s.io", "ServiceCIDR"),
    ("storage.k8s.io", "CSIDriver"), ("storage.k8s.io", "CSINode"), ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
})

# The CRDs in crds/ whose scope is Cluster (tests/test_appproject.py checks this against every CRD there).
CUSTOM: frozenset[tuple[str, str]] = frozenset({
    *(("kueue.x-k8s.io", kind) for kind in ("ClusterQueue", "ResourceFlavor", "Cohort", "Topology", "AdmissionCheck",
                                            "ProvisioningRequestConfig", "WorkloadPriorityClass", "MultiKueueCluster",
                                            "MultiKueueConfig")),
    ("scheduling.volcano.sh", "Queue"),
})

CLUSTER_SCOPED: frozenset[tuple[str, str]] = BUILT_IN | CUSTOM
