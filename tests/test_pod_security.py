"""policies.kube.pod_security: the unit tests of k8s.io/pod-security-admission v0.36.0 ported case by case (each
table's Go file and test name cited; the pods written as the YAML a manifest holds), then the registry and
api/helpers_test.go, then malformed input (never an exception) and policy_to_evaluate."""
from __future__ import annotations

from typing import Any

import pytest

from policies.kube import pod_security as ps
from policies.kube import pod_security_checks as c
from policies.kube.pod_security_checks import CheckFn

V = ps.Version


def sc(**fields: Any) -> dict[str, Any]:
    return dict(fields)


def ctr(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


def caps(add: list[str] | None = None, drop: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if add is not None:
        out["add"] = add
    if drop is not None:
        out["drop"] = drop
    return {"capabilities": out}


def run(check: CheckFn, spec: Any = None, metadata: Any = None) -> c.CheckResult | None:
    return check(metadata or {}, spec or {})


def case(ref: str, check: CheckFn, spec: Any, reason: str | None = None, detail: str | None = None,
         metadata: Any = None) -> Any:
    """One Go table case: `ref` is "check_x_test.go TestName/case name"; reason None means allowed."""
    return pytest.param(check, spec, metadata, reason, detail, id=ref)


def assert_case(check: CheckFn, spec: Any, metadata: Any, reason: str | None, detail: str | None) -> None:
    result = run(check, spec, metadata)
    if reason is None:
        assert result is None, result
    else:
        assert result is not None
        assert (result.reason, result.detail) == (reason, detail)


APE_125 = c._not_on_windows(c.allow_privilege_escalation_1_8)
CAPS_125 = c._not_on_windows(c.capabilities_restricted_1_22)
SECCOMP_R_125 = c._not_on_windows(c.seccomp_profile_restricted_1_19)
RUN_AS_NON_ROOT_135 = c._user_namespace_exempt(c.run_as_non_root_1_0)
RUN_AS_USER_135 = c._user_namespace_exempt(c.run_as_user_1_23)

APE_CONTAINERS = {"containers": [ctr("a"), ctr("b", securityContext=sc(allowPrivilegeEscalation=None)),
                                 ctr("c", securityContext=sc(allowPrivilegeEscalation=True)),
                                 ctr("d", securityContext=sc(allowPrivilegeEscalation=False))]}
CAPS_CONTAINERS = {"containers": [ctr("a", securityContext=caps(add=["FOO", "BAR"])),
                                  ctr("b", securityContext=caps(add=["BAR", "BAZ"])),
                                  ctr("c", securityContext=caps(add=["NET_BIND_SERVICE", "CHOWN"],
                                                                drop=["ALL", "FOO"]))]}
CAPS_DETAIL = ('containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b", "c" must '
               'not include "BAR", "BAZ", "CHOWN", "FOO" in securityContext.capabilities.add')
AA = "container.apparmor.security.beta.kubernetes.io/"


def aa_profile(kind: str) -> dict[str, Any]:
    return {"appArmorProfile": {"type": kind}}


CASES = [
    # check_allowPrivilegeEscalation_test.go
    case("allowPrivilegeEscalation_test.go TestAllowPrivilegeEscalation_1_25/multiple containers", APE_125,
         APE_CONTAINERS, "allowPrivilegeEscalation != false",
         'containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false'),
    case("allowPrivilegeEscalation_test.go TestAllowPrivilegeEscalation_1_25/windows pod", APE_125,
         {"os": {"name": "windows"}, "containers": [ctr("a")]}),
    case("allowPrivilegeEscalation_test.go TestAllowPrivilegeEscalation_1_25/linux pod", APE_125,
         {"os": {"name": "linux"}, "containers": [ctr("a")]}, "allowPrivilegeEscalation != false",
         'container "a" must set securityContext.allowPrivilegeEscalation=false'),
    case("allowPrivilegeEscalation_test.go TestAllowPrivilegeEscalation_1_8/multiple containers",
         c.allow_privilege_escalation_1_8, APE_CONTAINERS, "allowPrivilegeEscalation != false",
         'containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false'),
    # check_appArmorProfile_test.go TestCheckAppArmor_Allowed
    case("appArmorProfile_test.go TestCheckAppArmor_Allowed/default AppArmor + extra annotations",
         c.app_armor_profile_1_0, {}, metadata={"annotations": {AA + "test": "runtime/default", "env": "prod"}}),
    case("appArmorProfile_test.go TestCheckAppArmor_Allowed/local AppArmor + extra annotations",
         c.app_armor_profile_1_0, {}, metadata={"annotations": {AA + "test": "localhost/sec-profile01", "env": "dev"}}),
    case("appArmorProfile_test.go TestCheckAppArmor_Allowed/no AppArmor annotations", c.app_armor_profile_1_0, {},
         metadata={"annotations": {"env": "dev"}}),
    case("appArmorProfile_test.go TestCheckAppArmor_Allowed/no annotations", c.app_armor_profile_1_0, {}),
    case("appArmorProfile_test.go TestCheckAppArmor_Allowed/pod with runtime default", c.app_armor_profile_1_0,
         {"securityContext": aa_profile("RuntimeDefault")}),
    case("appArmorProfile_test.go TestCheckAppArmor_Allowed/container with localhost profile",
         c.app_armor_profile_1_0, {"containers": [ctr("foo", securityContext=aa_profile("RuntimeDefault"))]}),
    # check_appArmorProfile_test.go TestCheckAppArmor_Forbidden
    case("appArmorProfile_test.go TestCheckAppArmor_Forbidden/unconfined pod", c.app_armor_profile_1_0,
         {"securityContext": aa_profile("Unconfined")}, "forbidden AppArmor profile",
         'pod must not set AppArmor profile type to "Unconfined"'),
    case("appArmorProfile_test.go TestCheckAppArmor_Forbidden/unconfined container", c.app_armor_profile_1_0,
         {"securityContext": aa_profile("RuntimeDefault"),
          "containers": [ctr("foo", securityContext=aa_profile("Unconfined"))]},
         "forbidden AppArmor profile", 'container "foo" must not set AppArmor profile type to "Unconfined"'),
    case("appArmorProfile_test.go TestCheckAppArmor_Forbidden/unconfined init container", c.app_armor_profile_1_0,
         {"securityContext": aa_profile("RuntimeDefault"), "containers": [ctr("foo")],
          "initContainers": [ctr("bar", securityContext=aa_profile("Unconfined"))]},
         "forbidden AppArmor profile", 'container "bar" must not set AppArmor profile type to "Unconfined"'),
    case("appArmorProfile_test.go TestCheckAppArmor_Forbidden/multiple containers", c.app_armor_profile_1_0, {},
         "forbidden AppArmor profiles",
         "annotations must not set AppArmor profile type to "
         f'"{AA}="bogus"", "{AA}e="unconfined"", "{AA}f="unknown""',
         metadata={"annotations": {AA: "bogus", AA + "a": "", AA + "b": "runtime/default", AA + "c": "localhost/",
                                   AA + "d": "localhost/foo", AA + "e": "unconfined", AA + "f": "unknown"}}),
    # check_capabilities_baseline_test.go TestCapabilitiesBaseline
    case("capabilities_baseline_test.go TestCapabilitiesBaseline/multiple containers", c.capabilities_baseline_1_0,
         {"containers": CAPS_CONTAINERS["containers"][:2]}, "non-default capabilities",
         'containers "a", "b" must not include "BAR", "BAZ", "FOO" in securityContext.capabilities.add'),
    # check_capabilities_restricted_test.go
    case("capabilities_restricted_test.go TestCapabilitiesRestricted_1_25/multiple containers", CAPS_125,
         CAPS_CONTAINERS, "unrestricted capabilities", CAPS_DETAIL),
    case("capabilities_restricted_test.go TestCapabilitiesRestricted_1_25/windows pod", CAPS_125,
         {"os": {"name": "windows"}, "containers": [ctr("a")]}),
    case("capabilities_restricted_test.go TestCapabilitiesRestricted_1_25/linux pod", CAPS_125,
         {"os": {"name": "linux"}, "containers": [ctr("a")]}, "unrestricted capabilities",
         'container "a" must set securityContext.capabilities.drop=["ALL"]'),
    case("capabilities_restricted_test.go TestCapabilitiesRestricted_1_22/multiple containers",
         c.capabilities_restricted_1_22, CAPS_CONTAINERS, "unrestricted capabilities", CAPS_DETAIL),
    # check_hostNamespaces_test.go TestHostNamespaces
    case("hostNamespaces_test.go TestHostNamespaces/multiple host namespaces", c.host_namespaces_1_0,
         {"hostNetwork": True, "hostIPC": True, "hostPID": True}, "host namespaces",
         "hostNetwork=true, hostPID=true, hostIPC=true"),
    # check_hostPathVolumes_test.go TestHostPathVolumes
    case("hostPathVolumes_test.go TestHostPathVolumes/host path volumes", c.host_path_volumes_1_0,
         {"volumes": [{"name": "a", "hostPath": {}}, {"name": "b", "hostPath": {}}, {"name": "c", "emptyDir": {}}]},
         "hostPath volumes", 'volumes "a", "b"'),
    # check_hostPorts_test.go TestHostPort
    case("hostPorts_test.go TestHostPort/one container, one host port", c.host_ports_1_0,
         {"containers": [ctr("a", ports=[{"hostPort": 0}]), ctr("b", ports=[{"hostPort": 0}, {"hostPort": 20}])]},
         "hostPort", 'container "b" uses hostPort 20'),
    case("hostPorts_test.go TestHostPort/multiple containers, multiple host port", c.host_ports_1_0,
         {"containers": [ctr("a", ports=[{"hostPort": 0}]),
                         ctr("b", ports=[{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 20}]),
                         ctr("c", ports=[{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 30}])]},
         "hostPort", 'containers "b", "c" use hostPorts 10, 20, 30'),
]


def probe(kind: str, host: str | None = None) -> dict[str, Any]:
    return {kind: {} if host is None else {"host": host}}


HP = c.host_probes_and_host_lifecycle_1_34
HP_REASON = "probe or lifecycle host"
PROC_CONTAINERS = [ctr("a", securityContext=None), ctr("b", securityContext={}),
                   ctr("c", securityContext={"procMount": "Default"}),
                   ctr("d", securityContext={"procMount": "Unmasked"}), ctr("e", securityContext={"procMount": "other"})]
PROC_DETAIL = 'containers "d", "e" must not set securityContext.procMount to "Unmasked", "other"'
ALLOWED_VOLUMES = ["emptyDir", "secret", "persistentVolumeClaim", "downwardAPI", "configMap", "projected", "csi",
                   "ephemeral", "image"]
RESTRICTED_VOLUMES = ["hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi", "glusterfs",
                      "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile", "vsphereVolume", "quobyte",
                      "azureDisk", "photonPersistentDisk", "portworxVolume", "scaleIO", "storageos"]

CASES += [
    # check_hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycle
    case("hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycle/valid pod with unset hosts", HP,
         {"containers": [ctr("a", livenessProbe=probe("httpGet"), readinessProbe=probe("tcpSocket"),
                             lifecycle={"postStart": probe("httpGet")})]}),
    case("hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycle/local host IP as probe host", HP,
         {"containers": [ctr("a", livenessProbe=probe("httpGet", "127.0.0.1"),
                             readinessProbe=probe("tcpSocket", "::1"), startupProbe=probe("httpGet", "localhost"))]},
         HP_REASON, 'container "a" uses probe or lifecycle hosts "127.0.0.1", "::1", "localhost"'),
    case("hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycle/httpget host in liveness probe", HP,
         {"containers": [ctr("a", livenessProbe=probe("httpGet", "invalid.host"))]},
         HP_REASON, 'container "a" uses probe or lifecycle host "invalid.host"'),
    case("hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycle/tcpsocket host in readiness probe", HP,
         {"containers": [ctr("b", readinessProbe=probe("tcpSocket", "invalid.host"))]},
         HP_REASON, 'container "b" uses probe or lifecycle host "invalid.host"'),
    case("hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycle/httpget host in startup probe", HP,
         {"containers": [ctr("c", startupProbe=probe("httpGet", "invalid.host"))]},
         HP_REASON, 'container "c" uses probe or lifecycle host "invalid.host"'),
    case("hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycle/poststart tcpsocket host", HP,
         {"containers": [ctr("d", lifecycle={"postStart": probe("tcpSocket", "invalid.host")})]},
         HP_REASON, 'container "d" uses probe or lifecycle host "invalid.host"'),
    case("hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycle/prestop httpget host", HP,
         {"containers": [ctr("e", lifecycle={"preStop": probe("httpGet", "another.invalid.host")})]},
         HP_REASON, 'container "e" uses probe or lifecycle host "another.invalid.host"'),
    case("hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycle/multiple containers", HP,
         {"containers": [ctr("valid"), ctr("invalid1", livenessProbe=probe("httpGet", "a.com")),
                         ctr("invalid2", lifecycle={"preStop": probe("tcpSocket", "b.com")},
                             startupProbe=probe("httpGet", "a.com"))]},
         HP_REASON, 'containers "invalid1", "invalid2" use probe or lifecycle hosts "a.com", "b.com"'),
    case("hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycle/ipv4 host in probe", HP,
         {"containers": [ctr("a", livenessProbe=probe("httpGet", "8.8.8.8"))]},
         HP_REASON, 'container "a" uses probe or lifecycle host "8.8.8.8"'),
    case("hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycle/ipv6 host in probe", HP,
         {"containers": [ctr("a", livenessProbe=probe("tcpSocket", "2001:4860:4860::8888"))]},
         HP_REASON, 'container "a" uses probe or lifecycle host "2001:4860:4860::8888"'),
    case("hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycle/host in initcontainer", HP,
         {"initContainers": [ctr("init", livenessProbe=probe("httpGet", "invalid.init.host"))]},
         HP_REASON, 'container "init" uses probe or lifecycle host "invalid.init.host"'),
    # check_privileged_test.go TestPrivileged
    case("privileged_test.go TestPrivileged/privileged", c.privileged_1_0,
         {"containers": [ctr("a", securityContext=None), ctr("b", securityContext={}),
                         ctr("c", securityContext={"privileged": False}),
                         ctr("d", securityContext={"privileged": True}),
                         ctr("e", securityContext={"privileged": True})]},
         "privileged", 'containers "d", "e" must not set securityContext.privileged=true'),
    # check_procMount_baseline_test.go TestProcMountBaseline
    case("procMount_baseline_test.go TestProcMountBaseline/procMount", c.proc_mount_1_35_baseline,
         {"containers": PROC_CONTAINERS, "hostUsers": True}, "procMount", PROC_DETAIL),
    case("procMount_baseline_test.go TestProcMountBaseline/procMount with userns", c.proc_mount_1_35_baseline,
         {"containers": PROC_CONTAINERS, "hostUsers": False}),
    # check_procMount_restricted_test.go TestProcMountRestricted (run with hostUsers true and false)
    case("procMount_restricted_test.go TestProcMountRestricted/procMount userns=true", c.proc_mount_1_0,
         {"containers": PROC_CONTAINERS, "hostUsers": True}, "procMount", PROC_DETAIL),
    case("procMount_restricted_test.go TestProcMountRestricted/procMount userns=false", c.proc_mount_1_0,
         {"containers": PROC_CONTAINERS, "hostUsers": False}, "procMount", PROC_DETAIL),
    # check_restrictedVolumes_test.go TestRestrictedVolumes
    case("restrictedVolumes_test.go TestRestrictedVolumes/host path volumes", c.restricted_volumes_1_0,
         {"volumes": [{"name": f"a{i}", kind: {}} for i, kind in enumerate(ALLOWED_VOLUMES, 1)]
          + [{"name": f"b{i}", kind: {}} for i, kind in enumerate(RESTRICTED_VOLUMES, 1)] + [{"name": "c1"}]},
         "restricted volume types",
         "volumes " + ", ".join(f'"b{i}"' for i in range(1, 22)) + ', "c1" use restricted volume types '
         '"awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "fc", "flexVolume", "flocker", '
         '"gcePersistentDisk", "gitRepo", "glusterfs", "hostPath", "iscsi", "nfs", "photonPersistentDisk", '
         '"portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "unknown", "vsphereVolume"'),
]


def sel(**opts: str) -> dict[str, Any]:
    return {"seLinuxOptions": opts}


def seccomp(kind: str) -> dict[str, Any]:
    return {"seccompProfile": {"type": kind}}


SEL_GOOD = [ctr(n, securityContext=sel(type=t)) for n, t in
            (("a", "container_t"), ("b", "container_init_t"), ("c", "container_kvm_t"), ("d", "container_engine_t"))]
SEL_BAD = [ctr("e", securityContext=sel(type="bar")), ctr("f", securityContext=sel(user="bar")),
           ctr("g", securityContext=sel(role="baz"))]
SEL = c.se_linux_options_1_31
SECCOMP_CONTAINERS = [ctr("a", securityContext=None), ctr("b", securityContext={}),
                      ctr("c", securityContext=seccomp("Unconfined")), ctr("d", securityContext=seccomp("Unconfined")),
                      ctr("e", securityContext=seccomp("RuntimeDefault")),
                      ctr("f", securityContext=seccomp("RuntimeDefault"))]
SP = "seccomp.security.alpha.kubernetes.io/pod"
SC = "container.seccomp.security.alpha.kubernetes.io/"

CASES += [
    # check_runAsNonRoot_test.go TestRunAsNonRoot (runAsNonRoot1_35)
    case("runAsNonRoot_test.go TestRunAsNonRoot/no explicit runAsNonRoot", RUN_AS_NON_ROOT_135,
         {"containers": [ctr("a")]}, "runAsNonRoot != true",
         'pod or container "a" must set securityContext.runAsNonRoot=true'),
    case("runAsNonRoot_test.go TestRunAsNonRoot/pod runAsNonRoot=false", RUN_AS_NON_ROOT_135,
         {"securityContext": {"runAsNonRoot": False}, "containers": [ctr("a", securityContext=None)]},
         "runAsNonRoot != true", "pod must not set securityContext.runAsNonRoot=false"),
    case("runAsNonRoot_test.go TestRunAsNonRoot/containers runAsNonRoot=false", RUN_AS_NON_ROOT_135,
         {"securityContext": {"runAsNonRoot": True},
          "containers": [ctr("a", securityContext=None), ctr("b", securityContext={})]
          + [ctr(n, securityContext={"runAsNonRoot": v}) for n, v in
             (("c", False), ("d", False), ("e", True), ("f", True))]},
         "runAsNonRoot != true", 'containers "c", "d" must not set securityContext.runAsNonRoot=false'),
    case("runAsNonRoot_test.go TestRunAsNonRoot/pod nil, container fallthrough", RUN_AS_NON_ROOT_135,
         {"containers": [ctr("a", securityContext=None), ctr("b", securityContext={}),
                         ctr("d", securityContext={"runAsNonRoot": True}),
                         ctr("e", securityContext={"runAsNonRoot": True})]},
         "runAsNonRoot != true", 'pod or containers "a", "b" must set securityContext.runAsNonRoot=true'),
    case("runAsNonRoot_test.go TestRunAsNonRoot/host users false allowed", RUN_AS_NON_ROOT_135, {"hostUsers": False}),
    # check_runAsUser_test.go TestRunAsUser (runAsUser1_35)
    case("runAsUser_test.go TestRunAsUser/pod runAsUser=0", RUN_AS_USER_135,
         {"securityContext": {"runAsUser": 0}, "containers": [ctr("a", securityContext=None)]},
         "runAsUser=0", "pod must not set runAsUser=0"),
    case("runAsUser_test.go TestRunAsUser/pod runAsUser=non-zero", RUN_AS_USER_135,
         {"securityContext": {"runAsUser": 1000}, "containers": [ctr("a", securityContext=None)]}),
    case("runAsUser_test.go TestRunAsUser/pod runAsUser=nil", RUN_AS_USER_135,
         {"securityContext": {"runAsUser": None}, "containers": [ctr("a", securityContext=None)]}),
    case("runAsUser_test.go TestRunAsUser/containers runAsUser=0", RUN_AS_USER_135,
         {"securityContext": {"runAsUser": 1000},
          "containers": [ctr("a", securityContext=None), ctr("b", securityContext={})]
          + [ctr(n, securityContext={"runAsUser": v}) for n, v in (("c", 0), ("d", 0), ("e", 1), ("f", 1))]},
         "runAsUser=0", 'containers "c", "d" must not set runAsUser=0'),
    case("runAsUser_test.go TestRunAsUser/containers runAsUser=non-zero", RUN_AS_USER_135,
         {"containers": [ctr(n, securityContext={"runAsUser": v}) for n, v in
                         (("c", 1), ("d", 2), ("e", 3), ("f", 4))]}),
    case("runAsUser_test.go TestRunAsUser/host users false allowed", RUN_AS_USER_135, {"hostUsers": False}),
    # check_seLinuxOptions_test.go TestSELinuxOptions (seLinuxOptions1_31)
    case("seLinuxOptions_test.go TestSELinuxOptions/invalid pod and containers", SEL,
         {"securityContext": sel(type="foo", user="bar", role="baz"), "containers": SEL_GOOD + SEL_BAD},
         "seLinuxOptions", 'pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: '
                           'types "bar", "foo"; user may not be set; role may not be set'),
    case("seLinuxOptions_test.go TestSELinuxOptions/invalid pod", SEL,
         {"securityContext": sel(type="foo", user="bar", role="baz"), "containers": SEL_GOOD},
         "seLinuxOptions", 'pod set forbidden securityContext.seLinuxOptions: type "foo"; user may not be set; '
                           "role may not be set"),
    case("seLinuxOptions_test.go TestSELinuxOptions/invalid containers", SEL,
         {"securityContext": sel(), "containers": SEL_GOOD + SEL_BAD},
         "seLinuxOptions", 'containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: type "bar"; '
                           "user may not be set; role may not be set"),
    case("seLinuxOptions_test.go TestSELinuxOptions/bad type", SEL, {"securityContext": sel(type="bad")},
         "seLinuxOptions", 'pod set forbidden securityContext.seLinuxOptions: type "bad"'),
    case("seLinuxOptions_test.go TestSELinuxOptions/bad user", SEL, {"securityContext": sel(user="bad")},
         "seLinuxOptions", "pod set forbidden securityContext.seLinuxOptions: user may not be set"),
    case("seLinuxOptions_test.go TestSELinuxOptions/bad role", SEL, {"securityContext": sel(role="bad")},
         "seLinuxOptions", "pod set forbidden securityContext.seLinuxOptions: role may not be set"),
    # check_seccompProfile_baseline_test.go TestSeccompProfileBaseline_1_0
    case("seccompProfile_baseline_test.go TestSeccompProfileBaseline_1_0/pod seccomp invalid",
         c.seccomp_profile_baseline_1_0, {}, "seccompProfile",
         'forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined"',
         metadata={"annotations": {SP: "unconfined"}}),
    case("seccompProfile_baseline_test.go TestSeccompProfileBaseline_1_0/containers seccomp invalid",
         c.seccomp_profile_baseline_1_0, {"containers": [ctr("a"), ctr("b"), ctr("c")]}, "seccompProfile",
         f'forbidden annotations {SC}a="unconfined", {SC}b="unknown"',
         metadata={"annotations": {SC + "a": "unconfined", SC + "b": "unknown"}}),
    case("seccompProfile_baseline_test.go TestSeccompProfileBaseline_1_0/pod and containers seccomp invalid",
         c.seccomp_profile_baseline_1_0, {"containers": [ctr("a"), ctr("b"), ctr("c")]}, "seccompProfile",
         f'forbidden annotations {SC}a="unconfined", {SC}b="unknown", {SP}="unconfined"',
         metadata={"annotations": {SP: "unconfined", SC + "a": "unconfined", SC + "b": "unknown"}}),
    # check_seccompProfile_baseline_test.go TestSeccompProfileBaseline_1_19
    case("seccompProfile_baseline_test.go TestSeccompProfileBaseline_1_19/pod seccomp invalid",
         c.seccomp_profile_baseline_1_19,
         {"securityContext": seccomp("Unconfined"), "containers": [ctr("a", securityContext=None)]},
         "seccompProfile", 'pod must not set securityContext.seccompProfile.type to "Unconfined"'),
    case("seccompProfile_baseline_test.go TestSeccompProfileBaseline_1_19/containers seccomp invalid",
         c.seccomp_profile_baseline_1_19,
         {"securityContext": seccomp("RuntimeDefault"), "containers": SECCOMP_CONTAINERS},
         "seccompProfile", 'containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined"'),
    case("seccompProfile_baseline_test.go TestSeccompProfileBaseline_1_19/pod and containers seccomp invalid",
         c.seccomp_profile_baseline_1_19,
         {"securityContext": seccomp("Unconfined"), "containers": SECCOMP_CONTAINERS},
         "seccompProfile", 'pod and containers "c", "d" must not set securityContext.seccompProfile.type to '
                           '"Unconfined"'),
]


def sysctls(*names: str) -> dict[str, Any]:
    return {"securityContext": {"sysctls": [{"name": n, "value": "1"} for n in names]}}


SYSCTL_10 = c._sysctls(c.SYSCTLS_ALLOWED_1_0)
SYSCTL_127 = c._sysctls(c.SYSCTLS_ALLOWED_1_27)
SYSCTL_129 = c._sysctls(c.SYSCTLS_ALLOWED_1_29)
SYSCTL_132 = c._sysctls(c.SYSCTLS_ALLOWED_1_32)
NEWER_SYSCTLS_127 = ["net.ipv4.ip_local_reserved_ports"]
NEWER_SYSCTLS_129 = ["net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                     "net.ipv4.tcp_keepalive_probes"]
NEWER_SYSCTLS_132 = ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"]
NO_SECCOMP = 'must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"'
SECCOMP_R_SHARED = [  # the cases TestSeccompProfileRestricted_1_25 and _1_19 share
    ("no explicit seccomp", {"containers": [ctr("a")]}, f'pod or container "a" {NO_SECCOMP}'),
    ("pod seccomp invalid", {"securityContext": seccomp("Unconfined"), "containers": [ctr("a", securityContext=None)]},
     'pod must not set securityContext.seccompProfile.type to "Unconfined"'),
    ("containers seccomp invalid", {"securityContext": seccomp("RuntimeDefault"), "containers": SECCOMP_CONTAINERS},
     'containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined"'),
    ("pod nil, container fallthrough",
     {"containers": [ctr("a", securityContext=None), ctr("b", securityContext={}),
                     ctr("d", securityContext=seccomp("RuntimeDefault")),
                     ctr("e", securityContext=seccomp("RuntimeDefault"))]},
     f'pod or containers "a", "b" {NO_SECCOMP}'),
]

CASES += [
    *(case(f"seccompProfile_restricted_test.go TestSeccompProfileRestricted_{v}/{name}", fn, spec, "seccompProfile",
           detail) for v, fn in (("1_25", SECCOMP_R_125), ("1_19", c.seccomp_profile_restricted_1_19))
      for name, spec, detail in SECCOMP_R_SHARED),
    case("seccompProfile_restricted_test.go TestSeccompProfileRestricted_1_25/no explicit seccomp, windows Pod",
         SECCOMP_R_125, {"os": {"name": "windows"}, "containers": [ctr("a")]}),
    case("seccompProfile_restricted_test.go TestSeccompProfileRestricted_1_25/no explicit seccomp, linux pod",
         SECCOMP_R_125, {"os": {"name": "linux"}, "containers": [ctr("a")]}, "seccompProfile",
         f'pod or container "a" {NO_SECCOMP}'),
    # check_sysctls_test.go TestSysctls, TestSysctls_1_27, TestSysctls_1_29, TestSysctls_1_32
    *(case(f"sysctls_test.go {t}/forbidden sysctls", fn, sysctls("a", "b"), "forbidden sysctls", "a, b")
      for t, fn in (("TestSysctls", SYSCTL_10), ("TestSysctls_1_27", SYSCTL_127), ("TestSysctls_1_29", SYSCTL_129),
                    ("TestSysctls_1_32", SYSCTL_132))),
    *(case(f"sysctls_test.go TestSysctls/new supported sysctls not supported: {n}", SYSCTL_10, sysctls(n),
           "forbidden sysctls", n) for n in NEWER_SYSCTLS_127 + NEWER_SYSCTLS_129 + NEWER_SYSCTLS_132),
    *(case(f"sysctls_test.go TestSysctls_1_27/new supported sysctls {n}", SYSCTL_127, sysctls(n))
      for n in NEWER_SYSCTLS_127),
    *(case(f"sysctls_test.go TestSysctls_1_29/new supported sysctls: {n}", SYSCTL_129, sysctls(n))
      for n in NEWER_SYSCTLS_129),
    *(case(f"sysctls_test.go TestSysctls_1_32/new supported sysctls: {n}", SYSCTL_132, sysctls(n))
      for n in NEWER_SYSCTLS_132),
    # check_windowsHostProcess_test.go TestWindowsHostProcess
    case("windowsHostProcess_test.go TestWindowsHostProcess/host process", c.windows_host_process_1_0,
         {"securityContext": {"windowsOptions": {"hostProcess": True}},
          "containers": [ctr("a", securityContext=None), ctr("b", securityContext={}),
                         ctr("c", securityContext={"windowsOptions": {}})]
          + [ctr(n, securityContext={"windowsOptions": {"hostProcess": v}}) for n, v in
             (("d", False), ("e", True), ("f", True))]},
         "hostProcess", 'pod and containers "e", "f" must not set securityContext.windowsOptions.hostProcess=true'),
]


@pytest.mark.parametrize("check, spec, metadata, reason, detail", CASES)
def test_upstream_check_cases(check, spec, metadata, reason, detail):
    assert_case(check, spec, metadata, reason, detail)


def test_valid_checks():
    """checks_test.go TestValidChecks: validateChecks holds, and every override names a check."""
    assert ps.validate_checks(c.DEFAULT_CHECKS) is None
    ids = {check.id for check in c.DEFAULT_CHECKS}
    for check in c.DEFAULT_CHECKS:
        for vc in check.versions:
            assert set(vc.overrides) <= ids, (check.id, vc.overrides)


# --- policy/registry_test.go ----------------------------------------------------------------------------------------


def generate_check(cid: str, level: str, versions: list[str], overrides: tuple[str, ...] = ()) -> c.Check:
    """registry_test.go generateCheck (and withOverrides): each version's check refuses with reason "id:version"."""
    def make(v: str) -> CheckFn:
        return lambda _m, _s: c.CheckResult(f"{cid}:{v}", "")
    return c.Check(cid, level, tuple(c.VersionedCheck((ps.parse_version(v)[0].major, ps.parse_version(v)[0].minor),
                                                      make(v), overrides) for v in versions))


def registry_reasons(reg: ps.Registry, level: str, version: str) -> list[str]:
    return [r.reason for r in reg.evaluate_pod(ps.LevelVersion(level, ps.parse_version(version)[0]), {}, {})]


_MULTI = generate_check("i", "restricted", ["v1.10", "v1.21"])
REGISTRY_CHECKS = (
    generate_check("a", "baseline", ["v1.0"]),
    generate_check("b", "baseline", ["v1.10"]),
    generate_check("c", "baseline", ["v1.0", "v1.5", "v1.10"]),
    generate_check("d", "baseline", ["v1.11", "v1.15", "v1.20"]),
    generate_check("e", "restricted", ["v1.0"]),
    generate_check("f", "restricted", ["v1.12", "v1.16", "v1.21"]),
    generate_check("g", "restricted", ["v1.10"], ("a",)),
    generate_check("h", "restricted", ["v1.0"], ("b",)),
    c.Check("i", "restricted", (c.VersionedCheck((1, 10), _MULTI.versions[0].check, ("c",)),
                                c.VersionedCheck((1, 21), _MULTI.versions[1].check, ("d",)))),
)


@pytest.mark.parametrize("level, version, expected", [
    ("privileged", "v1.0", []), ("privileged", "latest", []),
    ("baseline", "v1.0", ["a:v1.0", "c:v1.0"]),
    ("baseline", "v1.4", ["a:v1.0", "c:v1.0"]),
    ("baseline", "v1.5", ["a:v1.0", "c:v1.5"]),
    ("baseline", "v1.10", ["a:v1.0", "b:v1.10", "c:v1.10"]),
    ("baseline", "v1.11", ["a:v1.0", "b:v1.10", "c:v1.10", "d:v1.11"]),
    ("baseline", "latest", ["a:v1.0", "b:v1.10", "c:v1.10", "d:v1.20"]),
    ("restricted", "v1.0", ["a:v1.0", "c:v1.0", "e:v1.0", "h:v1.0"]),
    ("restricted", "v1.4", ["a:v1.0", "c:v1.0", "e:v1.0", "h:v1.0"]),
    ("restricted", "v1.5", ["a:v1.0", "c:v1.5", "e:v1.0", "h:v1.0"]),
    ("restricted", "v1.10", ["e:v1.0", "g:v1.10", "h:v1.0", "i:v1.10"]),
    ("restricted", "v1.11", ["d:v1.11", "e:v1.0", "g:v1.10", "h:v1.0", "i:v1.10"]),
    ("restricted", "latest", ["c:v1.10", "e:v1.0", "f:v1.21", "g:v1.10", "h:v1.0", "i:v1.21"]),
    ("restricted", "v1.10000", ["c:v1.10", "e:v1.0", "f:v1.21", "g:v1.10", "h:v1.0", "i:v1.21"]),
])
def test_check_registry(level, version, expected):
    """registry_test.go TestCheckRegistry."""
    assert registry_reasons(ps.new_evaluator(REGISTRY_CHECKS, None), level, version) == expected


@pytest.mark.parametrize("level, version, expected", [
    ("privileged", "v1.0", []), ("privileged", "latest", []),
    ("baseline", "v1.0", []), ("baseline", "v1.10", []), ("baseline", "latest", []),
    ("restricted", "v1.0", ["e:v1.0", "h:v1.0"]),
    ("restricted", "v1.10", ["e:v1.0", "g:v1.10", "h:v1.0"]),
    ("restricted", "latest", ["e:v1.0", "f:v1.21", "g:v1.10", "h:v1.0"]),
    ("restricted", "v1.10000", ["e:v1.0", "f:v1.21", "g:v1.10", "h:v1.0"]),
])
def test_check_registry_no_baseline(level, version, expected):
    """registry_test.go TestCheckRegistry_NoBaseline."""
    assert registry_reasons(ps.new_evaluator(REGISTRY_CHECKS[4:8], None), level, version) == expected


@pytest.mark.parametrize("version, expected", [
    ("v1.0", ["a:v1.0", "c:v1.0"]), ("v1.4", ["a:v1.0", "c:v1.0"]), ("v1.5", ["a:v1.0", "c:v1.5"]),
    ("v1.10", ["a:v1.0", "b:v1.10", "c:v1.10"]), ("v1.11", ["a:v1.0", "b:v1.10", "c:v1.10", "d:v1.11"]),
    ("latest", ["a:v1.0", "b:v1.10", "c:v1.10", "d:v1.20"]),
])
def test_check_registry_no_restricted(version, expected):
    """registry_test.go TestCheckRegistry_NoRestricted: restricted results identical to baseline."""
    reg = ps.new_evaluator(REGISTRY_CHECKS[:4], None)
    assert registry_reasons(reg, "baseline", version) == expected
    assert registry_reasons(reg, "restricted", version) == expected


@pytest.mark.parametrize("level", ps.LEVELS)
def test_check_registry_empty(level):
    """registry_test.go TestCheckRegistry_Empty."""
    assert registry_reasons(ps.new_evaluator((), None), level, "latest") == []


@pytest.mark.parametrize("emulate, active", [(None, True), (V(1, 34), True), (V(1, 33), False)])
def test_host_probes_and_host_lifecycle_emulation(emulate, active):
    """check_hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycleEmulation."""
    reg = ps.new_evaluator(c.DEFAULT_CHECKS, emulate)
    spec = {"containers": [{"startupProbe": {"httpGet": {"host": "localhost"}}}]}
    for version in (ps.LATEST, V(1, 34)):
        assert (not reg.evaluate_pod(ps.LevelVersion("baseline", version), {}, spec)) == (not active)
    assert not reg.evaluate_pod(ps.LevelVersion("baseline", V(1, 33)), {}, spec)


@pytest.mark.parametrize("checks, error", [
    ((generate_check("a", "baseline", ["v1.0"]), generate_check("a", "baseline", ["v1.1"])),
     "multiple checks registered for ID a"),
    ((generate_check("a", "privileged", ["v1.0"]),), "check a: invalid level privileged"),
    ((c.Check("a", "baseline", ()),), "check a: empty"),
    ((c.Check("a", "baseline", (c.VersionedCheck((0, 0), c.privileged_1_0),)),), "check a: undefined version found"),
    ((generate_check("a", "baseline", ["v1.2", "v1.2"]),), "check a: duplicate version v1.2"),
    ((generate_check("a", "baseline", ["v1.3", "v1.2"]),), "check a: versions must be strictly increasing"),
    ((generate_check("a", "baseline", ["v1.0"], ("b",)),), "check a: only restricted checks may set overrides"),
    ((generate_check("a", "restricted", ["v1.0"], ("b",)), generate_check("b", "restricted", ["v1.0"])),
     "check a: overrides restricted check b"),
])
def test_validate_checks_refuses(checks, error):
    """registry.go:90-138 validateChecks' errors; NewEvaluator refuses such checks."""
    assert ps.validate_checks(checks) == error
    with pytest.raises(ValueError, match=error):
        ps.new_evaluator(checks)


def test_default_registry_order_and_versions():
    """The default registry (NewEvaluator(DefaultChecks(), 1.36)): max version v1.35, baseline checks by ID then
    restricted checks by ID, overrides applied per version."""
    reg = ps.new_evaluator()
    assert reg.max_version == V(1, 35)
    names = {v: [f.__name__ for f in fns] for v, fns in reg.restricted.items()}
    assert names[V(1, 35)] == [
        "app_armor_profile_1_0", "host_namespaces_1_0", "host_ports_1_0", "host_probes_and_host_lifecycle_1_34",
        "privileged_1_0", "se_linux_options_1_31", "check", "windows_host_process_1_0",
        "allow_privilege_escalation_1_8_windows_exempt", "capabilities_restricted_1_22_windows_exempt",
        "proc_mount_1_0", "restricted_volumes_1_0", "run_as_non_root_1_0_user_namespace_exempt",
        "run_as_user_1_23_user_namespace_exempt", "seccomp_profile_restricted_1_19_windows_exempt"]
    assert names[V(1, 0)] == [
        "app_armor_profile_1_0", "capabilities_baseline_1_0", "host_namespaces_1_0", "host_ports_1_0",
        "privileged_1_0", "proc_mount_1_0", "se_linux_options_1_0", "seccomp_profile_baseline_1_0", "check",
        "windows_host_process_1_0", "restricted_volumes_1_0", "run_as_non_root_1_0"]
    assert len(reg.baseline[V(1, 33)]) == 11 and len(reg.baseline[V(1, 34)]) == 12


# --- the public evaluate --------------------------------------------------------------------------------------------

RESTRICTED_OK = {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [{"name": "a", "securityContext": {"allowPrivilegeEscalation": False,
                                                                  "capabilities": {"drop": ["ALL"]}}}]}


def test_evaluate_aggregates_in_check_order():
    spec = {"hostNetwork": True, "containers": [{"name": "a", "securityContext": {"privileged": True}}],
            "ephemeralContainers": [{"name": "dbg", "securityContext": {"runAsUser": 0}}]}
    results = ps.evaluate(ps.LevelVersion("restricted", ps.LATEST), {}, spec)
    assert [r.reason for r in results] == [
        "host namespaces", "privileged", "allowPrivilegeEscalation != false", "unrestricted capabilities",
        "runAsNonRoot != true", "runAsUser=0", "seccompProfile"]
    assert ps.forbidden_reason(results).startswith("host namespaces, privileged, allowPrivilegeEscalation != false")
    assert ps.forbidden_detail(results[:2]) == (
        'host namespaces (hostNetwork=true), privileged (container "a" must not set securityContext.privileged=true)')
    assert [r.reason for r in ps.evaluate(ps.LevelVersion("baseline", V(1, 22)), {}, spec)] == [
        "host namespaces", "privileged"]
    assert ps.evaluate(ps.LevelVersion("privileged", ps.LATEST), {}, spec) == []


def test_forbidden_detail_of_an_empty_reason_and_detail():
    """checks.go:106-122 and 127-147: no " ()" for an empty detail, UnknownForbiddenReason for an empty reason."""
    results = [ps.CheckResult("", "x"), ps.CheckResult("r", "")]
    assert ps.forbidden_detail(results) == "unknown forbidden reason (x), r"
    assert ps.forbidden_reason(results) == "unknown forbidden reason, r"
    assert ps.forbidden_detail([]) == ps.forbidden_reason([]) == ""


@pytest.mark.parametrize("version", [ps.LATEST, V(1, 36), V(1, 35), V(2, 0)])
def test_versions_past_the_newest_check_evaluate_as_v1_35(version):
    spec = {"hostUsers": False, "containers": [{"name": "a", "securityContext": {"runAsUser": 0}}]}
    results = ps.evaluate(ps.LevelVersion("restricted", version), {}, {**RESTRICTED_OK, **spec})
    assert [r.reason for r in results] == ["allowPrivilegeEscalation != false", "unrestricted capabilities"]
    assert ps.evaluate(ps.LevelVersion("restricted", V(1, 34)), {}, {**RESTRICTED_OK, **spec})[-1].reason == \
        "runAsUser=0"


def test_windows_pods_are_exempt_from_three_restricted_checks_from_v1_25():
    spec = {"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": True}, "containers": [{"name": "a"}]}
    assert ps.evaluate(ps.LevelVersion("restricted", V(1, 25)), {}, spec) == []
    assert [r.reason for r in ps.evaluate(ps.LevelVersion("restricted", V(1, 24)), {}, spec)] == [
        "allowPrivilegeEscalation != false", "unrestricted capabilities", "seccompProfile"]


def test_a_volume_with_no_source_is_an_emptydir_to_evaluate():
    """The API server's SetDefaults_Volume runs before admission (restrictedvolumes0 fixture); the check alone
    reports it "unknown" as upstream's unit test says."""
    spec = {**RESTRICTED_OK, "volumes": [{"name": "v"}, {"name": "w", "emptyDir": None}]}
    assert ps.evaluate(ps.LevelVersion("restricted", ps.LATEST), {}, spec) == []
    assert "unknown" in (c.restricted_volumes_1_0({}, spec) or c.CheckResult("", "")).detail


def test_ephemeral_containers_are_visited():
    """visitor.go:27-37."""
    spec = {"ephemeralContainers": [{"name": "debug", "securityContext": {"privileged": True}}]}
    assert ps.forbidden_detail(ps.evaluate(ps.LevelVersion("baseline", ps.LATEST), {}, spec)) == (
        'privileged (container "debug" must not set securityContext.privileged=true)')


def test_go_quote():
    assert c.go_quote('a"b\\c\n\x00\x7f é\u200b') == '"a\\"b\\\\c\\n\\x00\\x7f é\\u200b"'


# --- api/helpers_test.go --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [("latest", ps.LATEST), ("v1.0", V(1, 0)), ("v1.1", V(1, 1)),
                                            ("v1.20", V(1, 20)), ("v1.10000", V(1, 10000))])
def test_parse_version(text, expected):
    """helpers_test.go TestParseVersion, successes."""
    assert ps.parse_version(text) == (expected, None)


@pytest.mark.parametrize("text", ["foo", "", "v2.0", "v1", "1.1",
                                  # beyond the Go table: Go's `$`, a leading zero, a 64-bit overflow, non-strings
                                  "v1.2\n", "v1.01", "v1.99999999999999999999", None, 1.2, ["v1.2"]])
def test_parse_version_failures(text):
    """helpers_test.go TestParseVersion, failures: latest with the error."""
    assert ps.parse_version(text) == (ps.LATEST, 'must be "latest" or "v1.x"')


@pytest.mark.parametrize("text, expected", [("privileged", ("privileged", None)), ("baseline", ("baseline", None)),
                                            ("restricted", ("restricted", None)),
                                            ("Baseline", ("restricted", "must be one of privileged, baseline, "
                                                                        "restricted")),
                                            (None, ("restricted", "must be one of privileged, baseline, restricted"))])
def test_parse_level(text, expected):
    """api/helpers.go:99-107 ParseLevel: an invalid level is restricted, with the error."""
    assert ps.parse_level(text) == expected


def test_level_version_equals():
    """helpers_test.go TestLevelVersionEquals."""
    versions = [ps.LATEST, V(1, 18), V(1, 30)]
    for level in ps.LEVELS:
        for v in versions:
            assert ps.LevelVersion(level, v).equivalent(ps.LevelVersion(level, v)), str(ps.LevelVersion(level, v))
    for l1 in ps.LEVELS:
        for l2 in ps.LEVELS:
            if l1 != l2:
                assert not ps.LevelVersion(l1, ps.LATEST).equivalent(ps.LevelVersion(l2, ps.LATEST))
    for v1 in versions:
        for v2 in (V(1, 16), V(1, 13)):
            for level in ("baseline", "restricted"):
                assert not ps.LevelVersion(level, v1).equivalent(ps.LevelVersion(level, v2))
            assert ps.LevelVersion("privileged", v1).equivalent(ps.LevelVersion("privileged", v2))


def test_policy_equals():
    """helpers_test.go TestPolicyEquals (Equivalent as each mode's LevelVersion.equivalent)."""
    privileged = ps.DEFAULT_POLICY
    assert privileged.fully_privileged()
    privileged2 = ps.Policy(ps.LevelVersion("privileged", V(1, 20)), privileged.audit, privileged.warn)
    assert privileged2.fully_privileged()
    baseline = ps.Policy(privileged.enforce, ps.LevelVersion("baseline", ps.LATEST), privileged.warn)
    assert not baseline.fully_privileged()
    assert all(getattr(privileged, m).equivalent(getattr(privileged2, m)) for m in ("enforce", "audit", "warn"))
    assert not privileged.audit.equivalent(baseline.audit)


def test_version_string_and_older():
    assert (str(ps.LATEST), str(V(1, 25)), str(ps.LevelVersion("restricted", ps.LATEST))) == (
        "latest", "v1.25", "restricted:latest")
    assert V(1, 2).older(V(1, 10)) and V(1, 99).older(ps.LATEST) and not ps.LATEST.older(V(9, 9))
    assert not ps.LATEST.older(ps.LATEST) and V(1, 99).older(V(2, 0))


def labels(*kvs: str) -> dict[str, str]:
    """helpers_test.go makeLabels: the prefixed pairs, plus other-label: foo-bar."""
    out = {"other-label": "foo-bar"}
    out.update({ps.LABEL_PREFIX + kvs[i]: kvs[i + 1] for i in range(0, len(kvs), 2)})
    return out


PRIV = ps.LevelVersion("privileged", ps.LATEST)


def lv(level: str, version: ps.Version = ps.LATEST) -> ps.LevelVersion:
    return ps.LevelVersion(level, version)


@pytest.mark.parametrize("desc, given, enforce, warn, audit, error", [
    ("simple enforce", labels("enforce", "baseline"), lv("baseline"), lv("baseline"), PRIV, False),
    ("simple warn", labels("warn", "restricted"), PRIV, lv("restricted"), PRIV, False),
    ("simple audit", labels("audit", "baseline"), PRIV, PRIV, lv("baseline"), False),
    ("enforce & warn", labels("enforce", "baseline", "warn", "restricted"), lv("baseline"), lv("restricted"), PRIV,
     False),
    ("enforce version", labels("enforce", "baseline", "enforce-version", "v1.22"), lv("baseline", V(1, 22)),
     lv("baseline", V(1, 22)), PRIV, False),
    ("enforce version & warn-version", labels("enforce", "baseline", "enforce-version", "v1.22", "warn-version",
                                              "latest"), lv("baseline", V(1, 22)), lv("baseline"), PRIV, False),
    ("enforce & warn-version", labels("enforce", "baseline", "warn-version", "v1.23"), lv("baseline"),
     lv("baseline", V(1, 23)), PRIV, False),
    ("fully specd", labels("enforce", "baseline", "enforce-version", "v1.20", "warn", "restricted", "warn-version",
                           "v1.21", "audit", "restricted", "audit-version", "v1.22"),
     lv("baseline", V(1, 20)), lv("restricted", V(1, 21)), lv("restricted", V(1, 22)), False),
    ("enforce no warn", labels("enforce", "baseline", "warn", "privileged"), lv("baseline"), PRIV, PRIV, False),
    ("enforce warn error", labels("enforce", "baseline", "warn", "foo"), lv("baseline"), PRIV, PRIV, True),
    ("enforce error", labels("enforce", "foo"), lv("restricted"), PRIV, PRIV, True),
])
def test_policy_to_evaluate(desc, given, enforce, warn, audit, error):
    """helpers_test.go TestPolicyToEvaluate."""
    policy, errors = ps.policy_to_evaluate(given, ps.DEFAULT_POLICY)
    assert policy == ps.Policy(enforce, audit, warn)
    assert bool(errors) == error


def test_policy_to_evaluate_error_wording():
    """field.Invalid(metadata.labels[<label>], value, detail).Error(), one string per label."""
    policy, errors = ps.policy_to_evaluate({ps.ENFORCE_LEVEL_LABEL: "strict", ps.ENFORCE_VERSION_LABEL: "1.30",
                                            ps.AUDIT_LEVEL_LABEL: "x", ps.WARN_VERSION_LABEL: 'v"2'})
    assert policy == ps.Policy(lv("restricted"), PRIV, PRIV)  # fail closed enforce, fail open audit
    assert errors == [
        'metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, '
        "baseline, restricted",
        'metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: "1.30": must be "latest" or "v1.x"',
        'metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: "x": must be one of privileged, baseline, '
        "restricted",
        'metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: "v\\"2": must be "latest" or "v1.x"']


def test_policy_to_evaluate_defaults_and_odd_labels():
    defaults = ps.Policy(lv("baseline", V(1, 30)), lv("restricted"), lv("baseline"))
    assert ps.policy_to_evaluate(None, defaults) == (defaults, [])
    assert ps.policy_to_evaluate({}, defaults) == (defaults, [])
    assert ps.policy_to_evaluate("enforce=restricted") == (ps.DEFAULT_POLICY, [])
    # warn is raised to enforce only where it is lower, and keeps its own version where warn-version is set
    assert ps.policy_to_evaluate({ps.ENFORCE_LEVEL_LABEL: "baseline"}, defaults)[0].warn == lv("baseline")
    assert ps.policy_to_evaluate({ps.ENFORCE_LEVEL_LABEL: "restricted", ps.ENFORCE_VERSION_LABEL: "v1.28"},
                                 defaults)[0].warn == lv("restricted", V(1, 28))
    # a label value of another type is an invalid value
    policy, errors = ps.policy_to_evaluate({ps.ENFORCE_LEVEL_LABEL: 3, ps.WARN_LEVEL_LABEL: None})
    assert policy.enforce.level == "restricted" and policy.warn == PRIV
    assert errors == ["metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: 3: must be one of "
                      "privileged, baseline, restricted",
                      "metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: null: must be one of "
                      "privileged, baseline, restricted"]
    assert (ps.ENFORCE_VERSION_LABEL, ps.AUDIT_VERSION_LABEL, ps.WARN_LEVEL_LABEL) == (
        "pod-security.kubernetes.io/enforce-version", "pod-security.kubernetes.io/audit-version",
        "pod-security.kubernetes.io/warn")


# --- malformed input: never an exception, a wrong type read as unset ---------------------------------------------

MALFORMED_SPECS = [
    None, "x", 3, [], {"containers": "x"}, {"containers": [None, "x", 3, []]}, {"initContainers": {"a": 1}},
    {"containers": [{"name": 3, "securityContext": 3}]},
    {"containers": [{"name": "a", "securityContext": {"capabilities": {"add": "NET_RAW", "drop": "ALL"}}}]},
    {"containers": [{"name": "a", "securityContext": {"capabilities": {"add": [None, 3, {"x": 1}]}}}]},
    {"containers": [{"name": "a", "securityContext": {"capabilities": "ALL"}}]},
    {"containers": [{"name": "a", "securityContext": {"runAsUser": "0", "privileged": "true",
                                                      "allowPrivilegeEscalation": "false", "procMount": 1,
                                                      "seccompProfile": "RuntimeDefault", "seLinuxOptions": [],
                                                      "windowsOptions": {"hostProcess": "true"},
                                                      "appArmorProfile": {"type": None}}}]},
    {"containers": [{"name": "a", "ports": "80"}, {"name": "b", "ports": [None, "80", {"hostPort": "80"},
                                                                        {"hostPort": True}]}]},
    {"containers": [{"name": "a", "livenessProbe": "x", "lifecycle": {"preStop": {"httpGet": {"host": 3}}}}]},
    {"securityContext": 3}, {"securityContext": {"sysctls": "kernel.x"}},
    {"securityContext": {"sysctls": [None, "a", {"name": 3}]}}, {"securityContext": {"runAsNonRoot": "true"}},
    {"volumes": "x"}, {"volumes": [None, "x", {"name": "a", "hostPath": "/"}, {"name": ["b"], "nfs": {}}]},
    {"hostNetwork": "true", "hostPID": 1, "hostUsers": "false", "os": "windows"},
    {"os": {"name": 3}, "ephemeralContainers": [{"name": None}]},
]


@pytest.mark.parametrize("spec", MALFORMED_SPECS)
@pytest.mark.parametrize("metadata", [None, "x", {"annotations": "x"}, {"annotations": {3: 4, "a": None},
                                                                          "labels": []}])
def test_malformed_input_never_raises(spec, metadata):
    for level in ps.LEVELS:
        for version in (ps.LATEST, V(1, 0), V(1, 24), V(0, 5)):
            results = ps.evaluate(ps.LevelVersion(level, version), metadata, spec)
            ps.forbidden_detail(results)
            ps.forbidden_reason(results)


def test_wrong_types_read_as_unset():
    """A string where Go has a bool, an int, a list or a struct is Go's zero value: unset."""
    def restricted(spec: Any) -> list[str]:
        return [r.detail for r in ps.evaluate(ps.LevelVersion("restricted", ps.LATEST), {}, spec)]

    # runAsUser "0" is no int64 0; capabilities.add "NET_RAW" is no list; privileged "true" is no bool
    spec = {**RESTRICTED_OK, "containers": [{"name": "a", "securityContext": {
        "allowPrivilegeEscalation": False, "runAsUser": "0", "privileged": "true",
        "capabilities": {"add": "NET_RAW", "drop": ["ALL"]}}}]}
    assert restricted(spec) == []
    # a securityContext that is no mapping is nil: the container sets nothing
    assert restricted({**RESTRICTED_OK, "containers": [{"name": "a", "securityContext": 3}]}) == [
        'container "a" must set securityContext.allowPrivilegeEscalation=false',
        'container "a" must set securityContext.capabilities.drop=["ALL"]']
    # containers that are no list: no containers; null entries are containers with no name
    assert restricted({**RESTRICTED_OK, "containers": "x"}) == []
    assert restricted({**RESTRICTED_OK, "containers": [None]})[0] == (
        'container "" must set securityContext.allowPrivilegeEscalation=false')
    # hostPort "80" is no int32; hostNetwork "true" is no bool
    assert ps.evaluate(ps.LevelVersion("baseline", ps.LATEST), {}, {
        "hostNetwork": "true", "containers": [{"name": "a", "ports": [{"hostPort": "80"}]}]}) == []
