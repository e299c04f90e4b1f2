"""What the API server's core validation refuses in a pod template and a Service (kubernetes v1.36.0
pkg/apis/core/validation/validation.go: ValidatePodTemplateSpec -> ValidatePodSpec, validateContainers,
validateInitContainers, validateContainerCommon, validateContainerPorts, ValidateEnv, ValidateVolumeMounts,
validatePodHostNetworkDeps, ValidateTolerations; ValidateService, validateServicePort), and the kubelet's refusal
to start a pod whose fully qualified hostname is too long (pkg/kubelet/kubelet_pods.go GeneratePodHostNameAndDomain,
pkg/kubelet/util/util.go GetNodenameForKernel).

Only what the schema cannot say, after the defaults the API server fills in first (SetDefaults_PodSpec: restartPolicy
Always, dnsPolicy ClusterFirst; SetDefaults_Container and _ContainerPort: imagePullPolicy, terminationMessagePolicy,
protocol TCP; SetDefaults_Service: sessionAffinity None, type ClusterIP), so a field left out is never refused here.
A Job's template is checked where its validation calls ValidatePodTemplateSpec (job_validation.job_validation); a
StatefulSet's validation does not (apps/validation ValidatePodTemplateSpecForStatefulSet leaves the PodSpec out), but
its pods are checked alike when the controller creates them (statefulset.validation); a Service by TOPO011."""
from __future__ import annotations

import functools
import re
from typing import Any

from ..kube.values import DNS1123_LABEL, DNS1123_SUBDOMAIN, QUALIFIED_NAME, listing, mapping
from ..kube.objects import WARNING
from .base import Check
from .pods import Pod

REFUSE = "the API server refuses it"
RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PROTOCOLS = ("TCP", "UDP", "SCTP")
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
MAX_INT32 = 2**31 - 1
# k8s.io/apimachinery pkg/util/validation/validation.go IsValidPortName (IANA_SVC_NAME: at most 15 characters of
# a-z, 0-9 and '-', a letter among them, no '-' at either end or twice in a row); qualifiedNameFmt (a label key's name
# part and a label value) is kube/values.QUALIFIED_NAME.
PORT_NAME = re.compile(r"^[-a-z0-9]+$")
_LETTER = re.compile(r"[a-z]")
# A character an env name may not hold: RelaxedEnvironmentVariableValidation allows printable ASCII (32 to 126) but '='.
_NOT_ENV_NAME = re.compile(r"[^\x20-\x3c\x3e-\x7e]")
# pkg/kubelet/util/util.go GetNodenameForKernel: fqdnMaxLen, the kernel's limit on a host name (struct utsname
# nodename); the cluster domain where the environment declares none (the kubelet's clusterDomain is commonly it).
HOSTNAME_MAX = 64
DEFAULT_CLUSTER_DOMAIN = "cluster.local"


# The checks of one name (a label key, a port name, a DNS-1123 label) are answered once per text: the same names recur in
# every pod template and input (bounded caches; each answer is a string, None or a bool, which nobody changes).
@functools.lru_cache(maxsize=4096)
def label_key_problem(key: str) -> str | None:
    """Why IsQualifiedName refuses a label key: an optional DNS-1123 subdomain prefix (at most 253) and '/', then a
    name of at most 63 characters of alphanumerics, '-', '_' and '.', alphanumeric at both ends."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        return f"label key '{key}' has a prefix that is not a DNS-1123 subdomain"
    if not name or len(name) > 63 or not QUALIFIED_NAME.match(name):
        return f"label key '{key}' is not a qualified name (at most 63 alphanumerics, '-', '_' or '.', " \
               "alphanumeric at both ends)"
    return None


def label_value_problem(value: Any) -> str | None:
    """Why IsValidLabelValue refuses a label value: empty, or at most 63 characters, alphanumeric at both ends."""
    text = "" if value is None else str(value)
    if text and (len(text) > 63 or not QUALIFIED_NAME.match(text)):
        return f"label value '{text}' is not valid (at most 63 alphanumerics, '-', '_' or '.', alphanumeric at " \
               "both ends)"
    return None


def labels_problems(labels: Any, where: str) -> list[Check]:
    """unversionedvalidation.ValidateLabels: every key a qualified name, every value a label value."""
    out: list[Check] = []
    for k, v in mapping(labels).items():
        for why in (label_key_problem(str(k)), label_value_problem(v)):
            if why:
                out.append(Check(where, f"{why}: {REFUSE}", "use at most 63 letters, digits, '-', '_' or '.', "
                                 "starting and ending with a letter or digit"))
    return out


@functools.lru_cache(maxsize=4096)
def port_name_problem(name: str) -> str | None:
    """Why IsValidPortName refuses a container port name."""
    if len(name) > 15:
        return f"port name '{name}' is longer than 15 characters"
    if not PORT_NAME.match(name) or not _LETTER.search(name):
        return f"port name '{name}' must be lowercase letters, digits and '-', with at least one letter"
    if name.startswith("-") or name.endswith("-") or "--" in name:
        return f"port name '{name}' may not begin or end with '-' or hold '--'"
    return None


def _port_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


@functools.lru_cache(maxsize=4096)
def _dns1123_label(value: str) -> bool:
    return len(value) <= 63 and bool(DNS1123_LABEL.match(value))


def _handlers(obj: dict[str, Any], kinds: tuple[str, ...]) -> list[str]:
    return [k for k in kinds if obj.get(k) is not None]


def _container(c: dict[str, Any], where: str, volumes: set[str], host_network: bool) -> list[Check]:
    """validateContainerCommon and validateContainerPorts, ValidateEnv, ValidateVolumeMounts; hostNetwork's port
    rule (validatePodHostNetworkDeps: a hostPort in a template is 0, defaulted later, or the containerPort)."""
    out: list[Check] = []
    name = c.get("name")
    if isinstance(name, str) and name and not _dns1123_label(name):
        out.append(Check(f"{where}.name", f"container name '{name}' is not a DNS-1123 label: {REFUSE}",
                         "use lowercase letters, digits and '-', at most 63 characters"))
    if not c.get("image"):
        out.append(Check(f"{where}.image", f"container '{name}' has no image (Required value): {REFUSE}",
                         "set image"))
    pull = c.get("imagePullPolicy")
    if pull is not None and pull not in PULL_POLICIES:
        out.append(Check(f"{where}.imagePullPolicy", f"imagePullPolicy '{pull}' is not one of "
                         f"{', '.join(PULL_POLICIES)}: {REFUSE}", "set imagePullPolicy: IfNotPresent"))
    names: set[str] = set()
    for i, p in enumerate(listing(c.get("ports"))):
        p, pw = mapping(p), f"{where}.ports[{i}]"
        pname = p.get("name")
        if isinstance(pname, str) and pname:
            why = port_name_problem(pname)
            if why:
                out.append(Check(f"{pw}.name", f"{why}: {REFUSE}", "use a name like 'c10d' of at most 15 "
                                 "lowercase letters, digits and '-'"))
            elif pname in names:
                out.append(Check(f"{pw}.name", f"port name '{pname}' is used twice in container '{name}' "
                                 f"(Duplicate value): {REFUSE}", "give each port its own name"))
            names.add(pname)
        port = p.get("containerPort")
        if not _port_number(port):
            out.append(Check(f"{pw}.containerPort", f"containerPort {port} is not between 1 and 65535: {REFUSE}",
                             "set containerPort between 1 and 65535"))
        host = p.get("hostPort")
        if host not in (None, 0) and not _port_number(host):
            out.append(Check(f"{pw}.hostPort", f"hostPort {host} is not between 1 and 65535: {REFUSE}",
                             "set hostPort between 1 and 65535, or leave it out"))
        elif host_network and host not in (None, 0) and host != port:
            out.append(Check(f"{pw}.hostPort", f"hostPort {host} differs from containerPort {port} with "
                             f"hostNetwork (must match `containerPort` when `hostNetwork` is true): {REFUSE}",
                             f"set hostPort to {port}, or leave it out"))
        protocol = p.get("protocol")
        if protocol is not None and protocol not in PROTOCOLS:
            out.append(Check(f"{pw}.protocol", f"protocol '{protocol}' is not one of {', '.join(PROTOCOLS)}: "
                             f"{REFUSE}", "set protocol: TCP"))
    for i, var in enumerate(listing(c.get("env"))):
        var = mapping(var)
        vname = str(var.get("name") or "")
        # RelaxedEnvironmentVariableValidation (GA in 1.34): any printable ASCII but '='.
        if _NOT_ENV_NAME.search(vname):
            out.append(Check(f"{where}.env[{i}].name", f"env name {vname!r} holds '=' or a character that is not "
                             f"printable ASCII: {REFUSE}", "rename the variable"))
        source = var.get("valueFrom")
        if isinstance(source, dict):
            ew = f"{where}.env[{i}]"
            kinds = _handlers(source, ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef"))
            if not kinds:
                out.append(Check(f"{ew}.valueFrom", f"env {vname} valueFrom names no source (must specify one of: "
                                 f"`fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`): {REFUSE}",
                                 "name one source"))
            elif var.get("value"):
                out.append(Check(f"{ew}.valueFrom", f"env {vname} has both value and valueFrom (may not be "
                                 f"specified when `value` is not empty): {REFUSE}", "keep one of them"))
            elif len(kinds) > 1:
                out.append(Check(f"{ew}.valueFrom", f"env {vname} valueFrom names {' and '.join(kinds)} (may not "
                                 f"have more than one field specified at a time): {REFUSE}", "keep one source"))
    paths: set[str] = set()
    for i, mount in enumerate(listing(c.get("volumeMounts"))):
        mount, mw = mapping(mount), f"{where}.volumeMounts[{i}]"
        vol = mount.get("name")
        if vol is not None and str(vol) not in volumes:
            out.append(Check(f"{mw}.name", f"volumeMount '{vol}' names no volume of the pod (Not found): {REFUSE}",
                             f"add a volume named {vol} to the pod, or mount an existing one"))
        path = mount.get("mountPath")
        if isinstance(path, str) and path:
            if path in paths:
                out.append(Check(f"{mw}.mountPath", f"mountPath {path} is mounted twice in container '{name}' "
                                 f"(must be unique): {REFUSE}", "mount each path once"))
            paths.add(path)
        if mount.get("subPath") and mount.get("subPathExpr"):
            out.append(Check(f"{mw}.subPathExpr", f"subPath and subPathExpr both set (mutually exclusive): {REFUSE}",
                             "keep one of them"))
    return out


def _probes(c: dict[str, Any], where: str, init_without_always: bool) -> list[Check]:
    """validateLivenessProbe / validateStartupProbe (successThreshold 1), validateHandler (exactly one handler);
    an init container that is no sidecar (restartPolicy Always) may have no probe or lifecycle."""
    out: list[Check] = []
    for key in ("livenessProbe", "readinessProbe", "startupProbe", "lifecycle"):
        probe = c.get(key)
        if not isinstance(probe, dict):
            continue
        if init_without_always:
            out.append(Check(f"{where}.{key}", f"{key} on an init container (may not be set for init containers "
                             f"without restartPolicy=Always): {REFUSE}", f"remove {key}, or make it a sidecar with "
                             "restartPolicy: Always"))
            continue
        if key == "lifecycle":
            continue
        handlers = _handlers(probe, ("exec", "httpGet", "tcpSocket", "grpc"))
        if len(handlers) != 1:
            what = ", ".join(handlers) if handlers else "must specify a handler type"
            out.append(Check(f"{where}.{key}", f"{key} has {len(handlers) or 'no'} handler"
                             f"{'s' if len(handlers) != 1 else ''} ({what}): {REFUSE}",
                             "give it exactly one of exec, httpGet, tcpSocket, grpc"))
        threshold = probe.get("successThreshold")
        if key != "readinessProbe" and threshold is not None and threshold != 1:
            out.append(Check(f"{where}.{key}.successThreshold", f"{key} successThreshold {threshold} (must be 1): "
                             f"{REFUSE}", "set successThreshold: 1, or leave it out"))
    return out


def pod_template(template: Any, field: str, added_volumes: tuple[str, ...] = (), refused: str = REFUSE
                 ) -> list[Check]:
    """What ValidatePodTemplateSpec refuses in `template` (at `field`) that the schema cannot say; `added_volumes`
    are pod volumes the object's controller adds before the API server sees the pods (a JobSet's or StatefulSet's
    claims); `refused` says what the API server refuses (the object, or the pods its controller creates)."""
    out = _pod_template(template, field, added_volumes)
    if refused != REFUSE:
        for c in out:
            c.message = c.message.replace(REFUSE, refused)
    return out


def _pod_template(template: Any, field: str, added_volumes: tuple[str, ...]) -> list[Check]:
    template = mapping(template)
    spec = mapping(template.get("spec"))
    where = f"{field}.spec"
    out = labels_problems(mapping(template.get("metadata")).get("labels"), f"{field}.metadata.labels")
    volumes: set[str] = set()
    for i, v in enumerate(listing(spec.get("volumes"))):
        vname = mapping(v).get("name")
        if not isinstance(vname, str):
            continue
        if not _dns1123_label(vname):
            out.append(Check(f"{where}.volumes[{i}].name", f"volume name '{vname}' is not a DNS-1123 label: "
                             f"{REFUSE}", "use lowercase letters, digits and '-', at most 63 characters"))
        elif vname in volumes:
            out.append(Check(f"{where}.volumes[{i}].name", f"volume '{vname}' is listed twice (Duplicate value): "
                             f"{REFUSE}", "give each volume its own name"))
        volumes.add(vname)
    volumes.update(added_volumes)
    host_network = spec.get("hostNetwork") is True
    seen: set[str] = set()
    for key in ("containers", "initContainers"):
        for i, c in enumerate(listing(spec.get(key))):
            c, cw = mapping(c), f"{where}.{key}[{i}]"
            out += _container(c, cw, volumes, host_network and key == "containers")
            name = c.get("name")
            if isinstance(name, str) and name:
                if name in seen:
                    out.append(Check(f"{cw}.name", f"container name '{name}' is used twice in the pod (Duplicate "
                                     f"value): {REFUSE}", "give each container and init container its own name"))
                seen.add(name)
            restart = c.get("restartPolicy")
            if key == "initContainers" and restart is not None and restart != "Always":
                out.append(Check(f"{cw}.restartPolicy", f"init container restartPolicy '{restart}' (Unsupported "
                                 f"value: only Always, a sidecar): {REFUSE}", "set restartPolicy: Always, or leave it "
                                 "out"))
            out += _probes(c, cw, key == "initContainers" and restart != "Always")
    for key, allowed in (("restartPolicy", RESTART_POLICIES), ("dnsPolicy", DNS_POLICIES)):
        value = spec.get(key)
        if value is not None and value not in allowed:
            out.append(Check(f"{where}.{key}", f"{key} '{value}' is not one of {', '.join(allowed)} (Unsupported "
                             f"value): {REFUSE}", f"set {key} to one of {', '.join(allowed)}"))
    if spec.get("dnsPolicy") == "None" and not mapping(spec.get("dnsConfig")).get("nameservers"):
        out.append(Check(f"{where}.dnsConfig", f"dnsPolicy None without dnsConfig nameservers (must provide at least "
                         f"one DNS nameserver when `dnsPolicy` is None): {REFUSE}",
                         "add dnsConfig.nameservers, or use dnsPolicy: ClusterFirst"))
    for key in ("hostname", "subdomain"):
        value = spec.get(key)
        if isinstance(value, str) and value and not _dns1123_label(value):
            out.append(Check(f"{where}.{key}", f"{key} '{value}' is not a DNS-1123 label of at most 63 characters: "
                             f"{REFUSE}", "use lowercase letters, digits and '-', at most 63 characters"))
    # ValidatePodSpec: ValidateServiceAccountName and ValidateNodeName are NameIsDNSSubdomain (at most 253).
    for key in ("serviceAccountName", "nodeName"):
        value = spec.get(key)
        if isinstance(value, str) and value and (len(value) > 253 or not DNS1123_SUBDOMAIN.match(value)):
            out.append(Check(f"{where}.{key}", f"{key} '{value}' is not a DNS-1123 subdomain: {REFUSE}",
                             "use lowercase letters, digits, '-' and '.', at most 253 characters"))
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not 1 <= deadline <= MAX_INT32:
        out.append(Check(f"{where}.activeDeadlineSeconds", f"activeDeadlineSeconds {deadline} is not between 1 and "
                         f"{MAX_INT32}: {REFUSE}", "set it to 1 or more, or leave it out"))
    for i, t in enumerate(listing(spec.get("tolerations"))):
        out += _toleration(mapping(t), f"{where}.tolerations[{i}]")
    return out


def _toleration(t: dict[str, Any], where: str) -> list[Check]:
    """ValidateTolerations: an empty key needs operator Exists; Exists takes no value; tolerationSeconds only with
    effect NoExecute; known operators and effects."""
    out: list[Check] = []
    op = t.get("operator") or "Equal"
    if not t.get("key") and op != "Exists":
        out.append(Check(f"{where}.operator", f"a toleration without key has operator {op} (operator must be Exists "
                         f"when `key` is empty): {REFUSE}", "set operator: Exists, or give it a key"))
    if op == "Exists" and t.get("value"):
        out.append(Check(f"{where}.operator", f"operator Exists with value '{t['value']}' (value must be empty when "
                         f"`operator` is 'Exists'): {REFUSE}", "remove value, or use operator: Equal"))
    elif op not in TOLERATION_OPERATORS:
        out.append(Check(f"{where}.operator", f"operator '{op}' is not Equal or Exists: {REFUSE}",
                         "set operator: Equal or Exists"))
    effect = t.get("effect")
    if t.get("tolerationSeconds") is not None and effect != "NoExecute":
        out.append(Check(f"{where}.effect", f"tolerationSeconds with effect {effect or '(any)'} (effect must be "
                         f"'NoExecute' when `tolerationSeconds` is set): {REFUSE}", "set effect: NoExecute"))
    elif effect and effect not in TAINT_EFFECTS:
        out.append(Check(f"{where}.effect", f"effect '{effect}' is not one of {', '.join(TAINT_EFFECTS)}: {REFUSE}",
                         "set a known effect, or leave it out"))
    return out


def service(obj: dict[str, Any]) -> list[Check]:
    """What ValidateService refuses in a Service as written (after SetDefaults_Service; its name, a DNS-1035 label, is
    ARGO003's): no ports on a Service that is neither headless nor ExternalName, a headless NodePort or
    LoadBalancer, an unknown type, port names missing where there are several, not DNS-1123 labels or used twice,
    port numbers outside 1..65535, an unknown protocol, a targetPort that is no port number or name, the same port
    and protocol twice, a nodePort on a ClusterIP Service, selector labels that are not labels."""
    out: list[Check] = []
    spec = mapping(obj.get("spec"))
    kind = spec.get("type") or "ClusterIP"
    headless = spec.get("clusterIP") == "None"
    ports = [mapping(p) for p in listing(spec.get("ports"))]
    if kind not in SERVICE_TYPES:
        out.append(Check("spec.type", f"type '{kind}' is not one of {', '.join(SERVICE_TYPES)}: {REFUSE}",
                         "set type: ClusterIP"))
    if not ports and not headless and kind != "ExternalName":
        out.append(Check("spec.ports", f"a {kind} Service without ports (Required value): {REFUSE}",
                         "add the port the pods listen on, or set clusterIP: None"))
    if headless and kind in ("NodePort", "LoadBalancer"):
        out.append(Check("spec.clusterIP", f"clusterIP None on a {kind} Service (may not be set to 'None' for "
                         f"{kind} services): {REFUSE}", "set type: ClusterIP for a headless Service"))
    names: set[str] = set()
    pairs: set[tuple[Any, Any]] = set()
    for i, p in enumerate(ports):
        where = f"spec.ports[{i}]"
        pname = p.get("name")
        if not pname and len(ports) > 1:
            out.append(Check(f"{where}.name", f"port {p.get('port')} has no name, and a Service of several ports "
                             f"needs one on each (Required value): {REFUSE}", "name every port"))
        elif pname:
            if not _dns1123_label(str(pname)):
                out.append(Check(f"{where}.name", f"port name '{pname}' is not a DNS-1123 label: {REFUSE}",
                                 "use lowercase letters, digits and '-'"))
            elif pname in names:
                out.append(Check(f"{where}.name", f"port name '{pname}' is used twice (Duplicate value): {REFUSE}",
                                 "give each port its own name"))
            names.add(str(pname))
        if not _port_number(p.get("port")):
            out.append(Check(f"{where}.port", f"port {p.get('port')} is not between 1 and 65535: {REFUSE}",
                             "set port between 1 and 65535"))
        protocol = p.get("protocol") or "TCP"
        if protocol not in PROTOCOLS:
            out.append(Check(f"{where}.protocol", f"protocol '{protocol}' is not one of {', '.join(PROTOCOLS)}: "
                             f"{REFUSE}", "set protocol: TCP"))
        target = p.get("targetPort")
        if isinstance(target, str) and port_name_problem(target):
            out.append(Check(f"{where}.targetPort", f"targetPort: {port_name_problem(target)}: {REFUSE}",
                             "name a container port, or give its number"))
        elif isinstance(target, int) and not _port_number(target):
            out.append(Check(f"{where}.targetPort", f"targetPort {target} is not between 1 and 65535: {REFUSE}",
                             "set targetPort between 1 and 65535, or leave it out (the port)"))
        if (protocol, p.get("port")) in pairs:
            out.append(Check(where, f"port {p.get('port')}/{protocol} is listed twice (Duplicate value): {REFUSE}",
                             "list each port once"))
        pairs.add((protocol, p.get("port")))
        if kind == "ClusterIP" and p.get("nodePort") not in (None, 0):
            out.append(Check(f"{where}.nodePort", f"nodePort on a ClusterIP Service (may not be used when `type` is "
                             f"'ClusterIP'): {REFUSE}", "remove nodePort"))
    out += labels_problems(spec.get("selector"), "spec.selector")
    return out


# pkg/apis/core/types.go: MaxSecretSize, the most data a Secret or a ConfigMap may hold (1 MiB).
MAX_DATA_BYTES = 1024 * 1024
# k8s.io/apimachinery pkg/util/validation/validation.go: IsConfigMapKey (configMapKeyFmt, at most 253 characters, not
# `.`, `..` or starting with `..`).
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def config_key_problem(key: str) -> str | None:
    if len(key) > 253:
        return f"key '{key[:40]}...' is longer than 253 characters"
    if not CONFIG_KEY.match(key):
        return f"key '{key}' is not alphanumerics, '-', '_' or '.'"
    if key in (".", "..") or key.startswith(".."):
        return f"key '{key}' may not be '.' or '..' or start with '..'"
    return None


def _decoded_length(value: Any) -> int | None:
    """The bytes a base64 value of `binaryData` or a Secret's `data` stands for (None where it is not base64: the
    schema stage says so)."""
    import base64
    import binascii

    try:
        return len(base64.b64decode(str(value), validate=True))
    except (binascii.Error, ValueError):
        return None


def config_data(obj: dict[str, Any], kind: str) -> list[Check]:
    """What ValidateConfigMap and ValidateSecret refuse in the data (kubernetes v1.36.0 pkg/apis/core/validation/
    validation.go, read at commit 000f260): each key an IsConfigMapKey, no key in both `data` and `binaryData`, and
    the values' bytes (`data` as UTF-8 and `binaryData` decoded for a ConfigMap; a Secret's `data` decoded with its
    `stringData` merged over it, as the API server converts it before validating) at most MaxSecretSize, 1 MiB.
    Keys are the object's own (a ConfigMap generated from files names them after the files)."""
    out: list[Check] = []
    sizes: dict[str, int] = {}
    fields = ("data", "binaryData") if kind == "ConfigMap" else ("data", "stringData")
    for f in fields:
        for key, value in mapping(obj.get(f)).items():
            problem = config_key_problem(str(key))
            if problem:
                out.append(Check(f"{f}.{key}", f"{problem} (IsConfigMapKey): {REFUSE}",
                                 "rename the key (a file's name for a generated one)"))
            if kind == "ConfigMap" and f == "binaryData" and key in mapping(obj.get("data")):
                out.append(Check(f"data.{key}", f"key '{key}' is in both data and binaryData (duplicate of key "
                                 f"present in binaryData): {REFUSE}", "keep the key in one of them"))
            if value is None:
                continue
            text = str(value)
            size = _decoded_length(text) if (f, kind) in (("binaryData", "ConfigMap"), ("data", "Secret")) \
                else len(text.encode("utf-8"))
            if size is not None:
                sizes[str(key)] = size  # stringData, read after data, replaces a key's value
    total = sum(sizes.values())
    if total > MAX_DATA_BYTES:
        where = "data" if kind == "Secret" else None
        out.append(Check(where, f"the {kind}'s data is {total:,} bytes, more than the {MAX_DATA_BYTES:,} (1 MiB) the "
                         f"API server allows (Too long): {REFUSE}",
                         "keep large files out of ConfigMaps and Secrets: a volume (a PVC, an image) holds them"))
    return out


def fqdn_hostname(pod: Pod, where: str, cluster_domain: str | None = None) -> Check | None:
    """The kubelet refuses to start a pod with setHostnameAsFQDN whose fully qualified name
    `<hostname>.<subdomain>.<namespace>.svc.<cluster domain>` is over 64 characters: GeneratePodHostNameAndDomain
    (pkg/kubelet/kubelet_pods.go) makes the domain `<subdomain>.<namespace>.svc.<the kubelet's clusterDomain>` and
    GetNodenameForKernel (pkg/kubelet/util/util.go, fqdnMaxLen = 64) refuses "FQDN ... is too long (64 characters is
    the max, N characters requested)"; the pod stays ContainerCreating. The cluster domain is the one the
    environment declares (`clusterDomain`): then a name over the limit is an error. Where none is declared, an error
    where the name is too long whatever the domain, a warning where it is with cluster.local."""
    if pod.spec.get("setHostnameAsFQDN") is not True or not pod.subdomain:
        return None
    namespace = pod.namespace or "default"
    stem = f"{pod.hostname}.{pod.subdomain}.{namespace}.svc."
    domain = cluster_domain or DEFAULT_CLUSTER_DOMAIN
    full = len(stem) + len(domain)
    if full <= HOSTNAME_MAX:
        return None
    hint = "shorten the names, or drop setHostnameAsFQDN"
    if cluster_domain and pod.namespace:
        return Check(where, f"setHostnameAsFQDN: pod {pod.hostname}'s fully qualified name {stem}{domain} is {full} "
                     f"characters, over {HOSTNAME_MAX}, with the environment's cluster domain {domain}: the kubelet "
                     "never starts it (FQDN is too long)", hint)
    if not cluster_domain and len(stem) + 1 > HOSTNAME_MAX and pod.namespace:
        return Check(where, f"setHostnameAsFQDN: pod {pod.hostname}'s fully qualified name {stem}<cluster domain> is "
                     f"over {HOSTNAME_MAX} characters whatever the cluster domain: the kubelet never starts it (FQDN "
                     "is too long)", hint)
    # A warning: the name is too long only if the cluster domain is cluster.local (none declared) or the namespace,
    # which the manifests do not write, is 'default'.
    condition = (f"with the environment's cluster domain {domain}, if the namespace is 'default'" if cluster_domain
                 else f"if the cluster domain is {domain}" + ("" if pod.namespace else " and the namespace 'default'"))
    return Check(where, f"setHostnameAsFQDN: pod {pod.hostname}'s fully qualified name {stem}{domain} is {full} "
                 f"characters, over {HOSTNAME_MAX}, {condition}: the kubelet would never start it", hint,
                 severity=WARNING)
