"""The pod checks of Kubernetes Pod Security Admission (k8s.io/pod-security-admission v0.36.0, Kubernetes 1.36),
ported from `policy/check_*.go`, `policy/helpers.go` and `policy/visitor.go` at that tag; `pod_security.py` holds the
registry that orders and versions them (`policy/registry.go`) and the `api/` package. It is one file because the
19 checks share one set of typed-field readers and phrase helpers and end in one table (`DEFAULT_CHECKS`) that must
list every check: split by level, the halves would share those helpers and the table would span files, as upstream's
one Go package does not.

Each check function reads a Pod's `metadata` and `spec` mappings as parsed from YAML and returns None (allowed) or
a `CheckResult` whose reason and detail are byte-identical to upstream's ForbiddenReason and ForbiddenDetail. Inputs
are never trusted: a value of the wrong type reads as Go's typed decoding would leave the field, unset (a pointer
nil, a bool false, a string "", a number 0); a list entry that is null reads as the zero value of its element (Go
decodes `null` in a list that way) and any other entry of the wrong type is skipped.

Only the default checks are here: upstream's experimental checks (those with one version and an empty
MinimumVersion, `policy/checks.go:154-165`) are left out; v0.36.0 registers none.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .values import listing, mapping


@dataclass(frozen=True)
class CheckResult:
    """A forbidden check result (policy/checks.go:75-87, CheckResult with Allowed false)."""

    reason: str
    detail: str


CheckFn = Callable[[dict[str, Any], dict[str, Any]], "CheckResult | None"]


@dataclass(frozen=True)
class VersionedCheck:
    """policy/checks.go:58-69: a check's implementation from `minimum` (major, minor) on."""

    minimum: tuple[int, int]
    check: CheckFn
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    """policy/checks.go:33-44: a check's ID, level ("baseline" or "restricted") and versions, oldest first."""

    id: str
    level: str
    versions: tuple[VersionedCheck, ...]


# --- reading the typed fields of a parsed pod ---------------------------------------------------------------------


def _ptr(obj: Any, key: str) -> dict[str, Any] | None:
    """A pointer-to-struct field: the mapping, or None (nil) where it is absent, null or not a mapping."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else None


def _bool(obj: Any, key: str) -> bool | None:
    """A *bool field: True or False, else None (nil)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, bool) else None


def _str(obj: Any, key: str) -> str:
    """A string field: the string, else "" (Go's zero value)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def _int(obj: Any, key: str) -> int | None:
    """An integer field (runAsUser, hostPort): the integer, else None (a bool or a string is no integer to Go)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _structs(value: Any) -> list[dict[str, Any]]:
    """A list of structs: null entries read as the zero value ({}), entries of another type are skipped."""
    return [{} if item is None else item for item in listing(value) if item is None or isinstance(item, dict)]


def _strings(value: Any) -> list[str]:
    """A list of strings: null entries read as "", entries of another type are skipped."""
    return ["" if item is None else item for item in listing(value) if item is None or isinstance(item, str)]


def _annotations(metadata: dict[str, Any]) -> dict[str, str]:
    """metadata.annotations, a map[string]string: entries whose key or value is not a string are left out."""
    return {k: v for k, v in mapping(metadata.get("annotations")).items() if isinstance(k, str) and isinstance(v, str)}


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """visitContainers (policy/visitor.go:27-37): init containers, containers, then ephemeral containers."""
    return (_structs(spec.get("initContainers")) + _structs(spec.get("containers"))
            + _structs(spec.get("ephemeralContainers")))


def _name(container: dict[str, Any]) -> str:
    return _str(container, "name")


def _security_context(obj: dict[str, Any]) -> dict[str, Any] | None:
    return _ptr(obj, "securityContext")


def _windows(spec: dict[str, Any]) -> bool:
    """podSpec.OS != nil && podSpec.OS.Name == corev1.Windows ("windows")."""
    return _str(_ptr(spec, "os"), "name") == "windows"


# --- policy/helpers.go --------------------------------------------------------------------------------------------


def join_quote(items: list[str]) -> str:
    """joinQuote (policy/helpers.go:25-30): no escaping, `"a", "b"`."""
    return '"' + '", "'.join(items) + '"' if items else ""


def pluralize(singular: str, plural: str, count: int) -> str:
    """pluralize (policy/helpers.go:32-37)."""
    return singular if count == 1 else plural


def relax_for_user_namespace(spec: dict[str, Any]) -> bool:
    """relaxPolicyForUserNamespacePod (policy/helpers.go:41-43): hostUsers set to false."""
    return _bool(spec, "hostUsers") is False


def go_quote(text: str) -> str:
    """Go's %q of a string (strconv.Quote): printable runes as they are, the rest escaped."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append({"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t",
                        "\v": r"\v"}[ch])
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\ufffd")  # a lone surrogate is no valid rune: Go writes U+FFFD's escape
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _setters(bad: list[str]) -> str:
    """`container "a"` / `containers "a", "b"`, the phrase several checks build (e.g. check_runAsUser.go:96-105)."""
    return f'{pluralize("container", "containers", len(bad))} {join_quote(bad)}'


# --- baseline checks ------------------------------------------------------------------------------------------------

_APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


def app_armor_profile_1_0(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_appArmorProfile.go:67-143 (allowedAnnotationValue, allowedProfileType, appArmorProfile_1_0)."""
    allowed_types = ("RuntimeDefault", "Localhost")
    bad_setters: list[str] = []
    bad_values: set[str] = set()
    profile = _ptr(_security_context(spec), "appArmorProfile")
    if profile is not None and _str(profile, "type") not in allowed_types:
        bad_setters.append("pod")
        bad_values.add(_str(profile, "type"))
    bad_containers = []
    for c in _containers(spec):
        profile = _ptr(_security_context(c), "appArmorProfile")
        if profile is not None and _str(profile, "type") not in allowed_types:
            bad_containers.append(_name(c))
            bad_values.add(_str(profile, "type"))
    if bad_containers:
        bad_setters.append(_setters(bad_containers))
    forbidden_annotations = sorted(
        f"{k}={go_quote(v)}" for k, v in _annotations(metadata).items()
        if k.startswith(_APPARMOR_ANNOTATION_PREFIX) and not (v == "" or v == "runtime/default"
                                                              or v.startswith("localhost/")))
    bad_value_list = sorted(bad_values)
    if forbidden_annotations:
        bad_value_list += forbidden_annotations
        bad_setters.append(pluralize("annotation", "annotations", len(forbidden_annotations)))
    if bad_setters:
        return CheckResult(
            pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", len(bad_value_list)),
            f"{' and '.join(bad_setters)} must not set AppArmor profile type to {join_quote(bad_value_list)}")
    return None


# check_capabilities_baseline.go:61-77
CAPABILITIES_ALLOWED_1_0 = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP",
    "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})


def capabilities_baseline_1_0(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_capabilities_baseline.go:79-110."""
    bad_containers = []
    non_default: set[str] = set()
    for c in _containers(spec):
        caps = _ptr(_security_context(c), "capabilities")
        if caps is None:
            continue
        added = [cap for cap in _strings(caps.get("add")) if cap not in CAPABILITIES_ALLOWED_1_0]
        non_default.update(added)
        if added:
            bad_containers.append(_name(c))
    if bad_containers:
        return CheckResult("non-default capabilities",
                           f"{_setters(bad_containers)} must not include {join_quote(sorted(non_default))} in "
                           "securityContext.capabilities.add")
    return None


def host_namespaces_1_0(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_hostNamespaces.go:58-82."""
    found = [f"{field}=true" for field in ("hostNetwork", "hostPID", "hostIPC") if _bool(spec, field) is True]
    return CheckResult("host namespaces", ", ".join(found)) if found else None


def host_path_volumes_1_0(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_hostPathVolumes.go:58-76."""
    volumes = [_name(v) for v in _structs(spec.get("volumes")) if _ptr(v, "hostPath") is not None]
    if volumes:
        return CheckResult("hostPath volumes", f'{pluralize("volume", "volumes", len(volumes))} {join_quote(volumes)}')
    return None


def host_ports_1_0(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_hostPorts.go:60-91 (the ports as sets.NewString().List() sorts them: as strings)."""
    bad_containers = []
    ports: set[str] = set()
    for c in _containers(spec):
        used = [str(p) for p in (_int(port, "hostPort") for port in _structs(c.get("ports"))) if p]
        ports.update(used)
        if used:
            bad_containers.append(_name(c))
    if bad_containers:
        return CheckResult("hostPort", f"{_setters(bad_containers)} {pluralize('uses', 'use', len(bad_containers))} "
                                       f"{pluralize('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}")
    return None


def _handler_hosts(handler: dict[str, Any] | None) -> list[str]:
    """getForbiddenHostProbes / getForbiddenHostLifecycle (check_hostProbesAndhostLifecycle.go:124-150)."""
    if handler is None:
        return []
    return [h for h in (_str(_ptr(handler, "httpGet"), "host"), _str(_ptr(handler, "tcpSocket"), "host")) if h]


def host_probes_and_host_lifecycle_1_34(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_hostProbesAndhostLifecycle.go:76-122: both lists are sets (sets.List: sorted, each once)."""
    bad_containers: set[str] = set()
    forbidden: set[str] = set()
    for c in _containers(spec):
        lifecycle = _ptr(c, "lifecycle")
        handlers = [_ptr(c, "livenessProbe"), _ptr(c, "readinessProbe"), _ptr(c, "startupProbe")]
        if lifecycle is not None:
            handlers += [_ptr(lifecycle, "postStart"), _ptr(lifecycle, "preStop")]
        for handler in handlers:
            hosts = _handler_hosts(handler)
            if hosts:
                bad_containers.add(_name(c))
                forbidden.update(hosts)
    if bad_containers:
        return CheckResult(
            "probe or lifecycle host",
            f"{_setters(sorted(bad_containers))} {pluralize('uses', 'use', len(bad_containers))} "
            f"{pluralize('probe or lifecycle host', 'probe or lifecycle hosts', len(forbidden))} "
            f"{join_quote(sorted(forbidden))}")
    return None


def privileged_1_0(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_privileged.go:56-75."""
    bad = [_name(c) for c in _containers(spec) if _bool(_security_context(c), "privileged") is True]
    if bad:
        return CheckResult("privileged", f"{_setters(bad)} must not set securityContext.privileged=true")
    return None


def proc_mount_1_0(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_procMount_baseline.go:66-97: a procMount other than "Default" (corev1.DefaultProcMount)."""
    bad_containers = []
    types: set[str] = set()
    for c in _containers(spec):
        sc = _security_context(c)
        if sc is None or not isinstance(sc.get("procMount"), str):
            continue
        if sc["procMount"] != "Default":
            bad_containers.append(_name(c))
            types.add(sc["procMount"])
    if bad_containers:
        return CheckResult("procMount", f"{_setters(bad_containers)} must not set securityContext.procMount to "
                                        f"{join_quote(sorted(types))}")
    return None


def proc_mount_1_35_baseline(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_procMount_baseline.go:100-106: any procMount in a user namespace (hostUsers: false)."""
    return None if relax_for_user_namespace(spec) else proc_mount_1_0(metadata, spec)


# check_seLinuxOptions.go:77-80
SELINUX_ALLOWED_TYPES_1_0 = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
SELINUX_ALLOWED_TYPES_1_31 = SELINUX_ALLOWED_TYPES_1_0 | {"container_engine_t"}


def _se_linux_options(spec: dict[str, Any], allowed: frozenset[str]) -> CheckResult | None:
    """check_seLinuxOptions.go:90-172."""
    bad_setters: list[str] = []
    bad_types: set[str] = set()
    set_user = set_role = False

    def valid(opts: dict[str, Any]) -> bool:
        nonlocal set_user, set_role
        ok = True
        if _str(opts, "type") not in allowed:
            ok = False
            bad_types.add(_str(opts, "type"))
        if _str(opts, "user"):
            ok, set_user = False, True
        if _str(opts, "role"):
            ok, set_role = False, True
        return ok

    opts = _ptr(_security_context(spec), "seLinuxOptions")
    if opts is not None and not valid(opts):
        bad_setters.append("pod")
    bad_containers = []
    for c in _containers(spec):
        opts = _ptr(_security_context(c), "seLinuxOptions")
        if opts is not None and not valid(opts):
            bad_containers.append(_name(c))
    if bad_containers:
        bad_setters.append(_setters(bad_containers))
    if not bad_setters:
        return None
    bad_data = []
    if bad_types:
        bad_data.append(f'{pluralize("type", "types", len(bad_types))} {join_quote(sorted(bad_types))}')
    if set_user:
        bad_data.append("user may not be set")
    if set_role:
        bad_data.append("role may not be set")
    return CheckResult("seLinuxOptions", f"{' and '.join(bad_setters)} set forbidden securityContext.seLinuxOptions: "
                                         f"{'; '.join(bad_data)}")


def se_linux_options_1_0(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    return _se_linux_options(spec, SELINUX_ALLOWED_TYPES_1_0)


def se_linux_options_1_31(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    return _se_linux_options(spec, SELINUX_ALLOWED_TYPES_1_31)


# check_seccompProfile_baseline.go:47-52, 75-84
_SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"
_SECCOMP_TYPES = ("Localhost", "RuntimeDefault")


def _valid_seccomp_annotation(value: str) -> bool:
    return value in ("runtime/default", "docker/default") or value.startswith("localhost/")


def seccomp_profile_baseline_1_0(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_seccompProfile_baseline.go:87-118: the deprecated annotations (a set: each once, sorted)."""
    annotations = _annotations(metadata)
    forbidden: set[str] = set()
    keys = [_SECCOMP_POD_ANNOTATION] + [_SECCOMP_CONTAINER_PREFIX + _name(c) for c in _containers(spec)]
    for key in keys:
        if key in annotations and not _valid_seccomp_annotation(annotations[key]):
            forbidden.add(f"{key}={go_quote(annotations[key])}")
    if forbidden:
        return CheckResult("seccompProfile", f"forbidden {pluralize('annotation', 'annotations', len(forbidden))} "
                                             f"{', '.join(sorted(forbidden))}")
    return None


def _seccomp(spec: dict[str, Any], require: bool) -> CheckResult | None:
    """seccompProfileBaseline_1_19 (check_seccompProfile_baseline.go:121-171) and, with `require`,
    seccompProfileRestricted_1_19 (check_seccompProfile_restricted.go:69-144)."""
    bad_setters: list[str] = []
    bad_values: set[str] = set()
    pod_set = False
    profile = _ptr(_security_context(spec), "seccompProfile")
    if profile is not None:
        if _str(profile, "type") not in _SECCOMP_TYPES:
            bad_setters.append("pod")
            bad_values.add(_str(profile, "type"))
        else:
            pod_set = True
    explicit, implicit = [], []
    for c in _containers(spec):
        profile = _ptr(_security_context(c), "seccompProfile")
        if profile is not None:
            if _str(profile, "type") not in _SECCOMP_TYPES:
                explicit.append(_name(c))
                bad_values.add(_str(profile, "type"))
        elif not pod_set:
            implicit.append(_name(c))
    if explicit:
        bad_setters.append(_setters(explicit))
    if bad_setters:
        return CheckResult("seccompProfile", f"{' and '.join(bad_setters)} must not set "
                                             f"securityContext.seccompProfile.type to {join_quote(sorted(bad_values))}")
    if require and implicit:
        return CheckResult("seccompProfile", f'pod or {_setters(implicit)} must set securityContext.seccompProfile.type'
                                             ' to "RuntimeDefault" or "Localhost"')
    return None


def seccomp_profile_baseline_1_19(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    return _seccomp(spec, require=False)


# check_sysctls.go:85-106
SYSCTLS_ALLOWED_1_0 = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                                 "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"})
SYSCTLS_ALLOWED_1_27 = SYSCTLS_ALLOWED_1_0 | {"net.ipv4.ip_local_reserved_ports"}
SYSCTLS_ALLOWED_1_29 = SYSCTLS_ALLOWED_1_27 | {"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                                               "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
SYSCTLS_ALLOWED_1_32 = SYSCTLS_ALLOWED_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}


def _sysctls(allowed: frozenset[str]) -> CheckFn:
    """check_sysctls.go:108-143: every forbidden name, in order, repeats kept."""
    def check(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
        sysctls = _structs(mapping(_security_context(spec)).get("sysctls"))
        forbidden = [_str(s, "name") for s in sysctls if _str(s, "name") not in allowed]
        return CheckResult("forbidden sysctls", ", ".join(forbidden)) if forbidden else None
    return check


def windows_host_process_1_0(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_windowsHostProcess.go:59-102."""
    bad = [_name(c) for c in _containers(spec)
           if _bool(_ptr(_security_context(c), "windowsOptions"), "hostProcess") is True]
    setters = ["pod"] if _bool(_ptr(_security_context(spec), "windowsOptions"), "hostProcess") is True else []
    if bad:
        setters.append(_setters(bad))
    if setters:
        return CheckResult("hostProcess", f"{' and '.join(setters)} must not set "
                                          "securityContext.windowsOptions.hostProcess=true")
    return None


# --- restricted checks ----------------------------------------------------------------------------------------------


def allow_privilege_escalation_1_8(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_allowPrivilegeEscalation.go:64-84: unset or true is forbidden."""
    bad = [_name(c) for c in _containers(spec) if _bool(_security_context(c), "allowPrivilegeEscalation") is not False]
    if bad:
        return CheckResult("allowPrivilegeEscalation != false",
                           f"{_setters(bad)} must set securityContext.allowPrivilegeEscalation=false")
    return None


def _passes_where(exempt: Callable[[dict[str, Any]], bool], suffix: str) -> Callable[[CheckFn], CheckFn]:
    """The later version of a check that lets a pod through where `exempt(spec)` holds and runs the check otherwise,
    named `<check>_<suffix>`."""
    def wrap(check: CheckFn) -> CheckFn:
        def variant(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
            return None if exempt(spec) else check(metadata, spec)
        variant.__name__ = f"{check.__name__}_{suffix}"
        return variant
    return wrap


# The 1.25 variants (e.g. check_allowPrivilegeEscalation.go:86-93): a pod with spec.os.name "windows" passes.
_not_on_windows = _passes_where(_windows, "windows_exempt")
# The 1.35 variants (check_runAsNonRoot.go:67-76, check_runAsUser.go:68-77): hostUsers: false passes.
_user_namespace_exempt = _passes_where(relax_for_user_namespace, "user_namespace_exempt")


def capabilities_restricted_1_22(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_capabilities_restricted.go:79-136."""
    missing_drop_all, adding = [], []
    forbidden: set[str] = set()
    for c in _containers(spec):
        caps = _ptr(_security_context(c), "capabilities")
        if caps is None:
            missing_drop_all.append(_name(c))
            continue
        if "ALL" not in _strings(caps.get("drop")):
            missing_drop_all.append(_name(c))
        added = [cap for cap in _strings(caps.get("add")) if cap != "NET_BIND_SERVICE"]
        forbidden.update(added)
        if added:
            adding.append(_name(c))
    details = []
    if missing_drop_all:
        details.append(f'{_setters(missing_drop_all)} must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f"{_setters(adding)} must not include {join_quote(sorted(forbidden))} in "
                       "securityContext.capabilities.add")
    return CheckResult("unrestricted capabilities", "; ".join(details)) if details else None


# check_restrictedVolumes.go:92-154: the allowed sources, then the forbidden ones in the order the switch names them.
_ALLOWED_VOLUME_SOURCES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
                           "persistentVolumeClaim", "projected", "secret")
_RESTRICTED_VOLUME_SOURCES = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi",
                              "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile",
                              "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "portworxVolume",
                              "scaleIO", "storageos")
_VOLUME_SOURCES = frozenset(_ALLOWED_VOLUME_SOURCES + _RESTRICTED_VOLUME_SOURCES)


def restricted_volumes_1_0(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_restrictedVolumes.go:88-173 (a volume with no source is of type "unknown"; `evaluate` sees none, as the
    API server's defaulting makes it an emptyDir first: `with_volume_defaults`)."""
    bad_volumes = []
    bad_types: set[str] = set()
    for volume in _structs(spec.get("volumes")):
        if any(_ptr(volume, source) is not None for source in _ALLOWED_VOLUME_SOURCES):
            continue
        bad_volumes.append(_name(volume))
        bad_types.add(next((s for s in _RESTRICTED_VOLUME_SOURCES if _ptr(volume, s) is not None), "unknown"))
    if bad_volumes:
        return CheckResult(
            "restricted volume types",
            f"{pluralize('volume', 'volumes', len(bad_volumes))} {join_quote(bad_volumes)} "
            f"{pluralize('uses', 'use', len(bad_volumes))} "
            f"{pluralize('restricted volume type', 'restricted volume types', len(bad_types))} "
            f"{join_quote(sorted(bad_types))}")
    return None


def with_volume_defaults(spec: dict[str, Any]) -> dict[str, Any]:
    """The pod as admission sees it: the API server defaults a volume with no source to an emptyDir before admission
    runs (k8s.io/kubernetes pkg/apis/core/v1/defaults.go, SetDefaults_Volume: every VolumeSource pointer nil ->
    EmptyDir), which upstream's pass fixture restrictedvolumes0 (`- name: volume0`) relies on. The 30 sources of
    corev1.VolumeSource are the two tuples above. The spec is not changed; a copy is returned where a volume is."""
    volumes = spec.get("volumes")
    if not isinstance(volumes, list):
        return spec
    # (a volume's own keys looked up among the sources: a handful, where the sources are 30)
    defaulted = [{**(v or {}), "emptyDir": {}} if v is None or (isinstance(v, dict) and not any(
                 k in _VOLUME_SOURCES and isinstance(x, dict) for k, x in v.items())) else v
                 for v in volumes]  # null: a zero Volume
    return spec if defaulted == volumes else {**spec, "volumes": defaulted}


def run_as_non_root_1_0(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_runAsNonRoot.go:78-145."""
    bad_setters = []
    pod_value = _bool(_security_context(spec), "runAsNonRoot")
    if pod_value is False:
        bad_setters.append("pod")
    explicit, implicit = [], []
    for c in _containers(spec):
        value = _bool(_security_context(c), "runAsNonRoot")
        if value is False:
            explicit.append(_name(c))
        elif value is None and pod_value is not True:
            implicit.append(_name(c))
    if explicit:
        bad_setters.append(_setters(explicit))
    if bad_setters:
        return CheckResult("runAsNonRoot != true",
                           f"{' and '.join(bad_setters)} must not set securityContext.runAsNonRoot=false")
    if implicit:
        return CheckResult("runAsNonRoot != true", f"pod or {_setters(implicit)} must set "
                                                   "securityContext.runAsNonRoot=true")
    return None


def run_as_user_1_23(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    """check_runAsUser.go:79-116."""
    setters = ["pod"] if _int(_security_context(spec), "runAsUser") == 0 else []
    bad = [_name(c) for c in _containers(spec) if _int(_security_context(c), "runAsUser") == 0]
    if bad:
        setters.append(_setters(bad))
    if setters:
        return CheckResult("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0")
    return None


def seccomp_profile_restricted_1_19(metadata: dict[str, Any], spec: dict[str, Any]) -> CheckResult | None:
    return _seccomp(spec, require=True)


# --- the registered checks (each Check* function's table) ---------------------------------------------------------

DEFAULT_CHECKS: tuple[Check, ...] = (
    Check("allowPrivilegeEscalation", "restricted", (  # check_allowPrivilegeEscalation.go:44-62
        VersionedCheck((1, 8), allow_privilege_escalation_1_8),
        VersionedCheck((1, 25), _not_on_windows(allow_privilege_escalation_1_8)))),
    Check("appArmorProfile", "baseline", (  # check_appArmorProfile.go:54-65
        VersionedCheck((1, 0), app_armor_profile_1_0),)),
    Check("capabilities_baseline", "baseline", (  # check_capabilities_baseline.go:48-59
        VersionedCheck((1, 0), capabilities_baseline_1_0),)),
    Check("capabilities_restricted", "restricted", (  # check_capabilities_restricted.go:59-77
        VersionedCheck((1, 22), capabilities_restricted_1_22, ("capabilities_baseline",)),
        VersionedCheck((1, 25), _not_on_windows(capabilities_restricted_1_22), ("capabilities_baseline",)))),
    Check("hostNamespaces", "baseline", (  # check_hostNamespaces.go:45-56
        VersionedCheck((1, 0), host_namespaces_1_0),)),
    Check("hostPathVolumes", "baseline", (  # check_hostPathVolumes.go:45-56
        VersionedCheck((1, 0), host_path_volumes_1_0),)),
    Check("hostPorts", "baseline", (  # check_hostPorts.go:47-58
        VersionedCheck((1, 0), host_ports_1_0),)),
    Check("hostProbesAndHostLifecycle", "baseline", (  # check_hostProbesAndhostLifecycle.go:63-74
        VersionedCheck((1, 34), host_probes_and_host_lifecycle_1_34),)),
    Check("privileged", "baseline", (  # check_privileged.go:43-54
        VersionedCheck((1, 0), privileged_1_0),)),
    Check("procMount", "baseline", (  # check_procMount_baseline.go:48-63
        VersionedCheck((1, 0), proc_mount_1_0),
        VersionedCheck((1, 35), proc_mount_1_35_baseline))),
    Check("procMount_restricted", "restricted", (  # check_procMount_restricted.go:40-56
        VersionedCheck((1, 35), proc_mount_1_0, ("procMount",)),)),
    Check("restrictedVolumes", "restricted", (  # check_restrictedVolumes.go:74-86
        VersionedCheck((1, 0), restricted_volumes_1_0, ("hostPathVolumes",)),)),
    Check("runAsNonRoot", "restricted", (  # check_runAsNonRoot.go:50-65
        VersionedCheck((1, 0), run_as_non_root_1_0),
        VersionedCheck((1, 35), _user_namespace_exempt(run_as_non_root_1_0)))),
    Check("runAsUser", "restricted", (  # check_runAsUser.go:51-66
        VersionedCheck((1, 23), run_as_user_1_23),
        VersionedCheck((1, 35), _user_namespace_exempt(run_as_user_1_23)))),
    Check("seLinuxOptions", "baseline", (  # check_seLinuxOptions.go:60-75
        VersionedCheck((1, 0), se_linux_options_1_0),
        VersionedCheck((1, 31), se_linux_options_1_31))),
    Check("seccompProfile_baseline", "baseline", (  # check_seccompProfile_baseline.go:58-73
        VersionedCheck((1, 0), seccomp_profile_baseline_1_0),
        VersionedCheck((1, 19), seccomp_profile_baseline_1_19))),
    Check("seccompProfile_restricted", "restricted", (  # check_seccompProfile_restricted.go:48-66
        VersionedCheck((1, 19), seccomp_profile_restricted_1_19, ("seccompProfile_baseline",)),
        VersionedCheck((1, 25), _not_on_windows(seccomp_profile_restricted_1_19), ("seccompProfile_baseline",)))),
    Check("sysctls", "baseline", (  # check_sysctls.go:61-83
        VersionedCheck((1, 0), _sysctls(SYSCTLS_ALLOWED_1_0)),
        VersionedCheck((1, 27), _sysctls(SYSCTLS_ALLOWED_1_27)),
        VersionedCheck((1, 29), _sysctls(SYSCTLS_ALLOWED_1_29)),
        VersionedCheck((1, 32), _sysctls(SYSCTLS_ALLOWED_1_32)))),
    Check("windowsHostProcess", "baseline", (  # check_windowsHostProcess.go:46-57
        VersionedCheck((1, 0), windows_host_process_1_0),)),
)
