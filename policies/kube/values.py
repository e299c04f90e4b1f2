"""Kubernetes value formats, each written once: DNS names, domain-prefixed paths, int-or-percent, label selectors,
resource quantities, `$(VAR)` expansion, and the helpers that read a field of a parsed object whatever its shape.
Each cites the k8s.io/apimachinery (or kubernetes) function it follows."""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

# The label Kueue reads a job's LocalQueue from. Kueue v0.19.2 reads the label only:
# pkg/controller/jobframework/utils.go:180-182 (QueueNameForObject: object.GetLabels()[QueueLabel]); the deprecated
# annotation of the same key (constants.QueueAnnotation, pkg/controller/constants/constants.go:32 at v0.14.0) is gone
# since v0.15.0. An object is queued where the label is a non-empty string (utils.go:148, WorkloadShouldBeSuspended).
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def kueue_queue(metadata: Any) -> str | None:
    """The LocalQueue an object's metadata names (KUEUE_QUEUE_LABEL, a non-empty string), or None."""
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    value = labels.get(KUEUE_QUEUE_LABEL) if isinstance(labels, dict) else None
    return value if isinstance(value, str) and value else None

# A DNS-1035 label (k8s.io/apimachinery validation.IsDNS1035Label, with its 63-character limit checked apart): what
# Service names and the names webhooks check must be.
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# A DNS-1123 label and subdomain (IsDNS1123Label, 63 characters; IsDNS1123Subdomain, 253), checked apart from length.
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# apimachinery pkg/util/validation/validation.go: qualifiedNameFmt (a label key's name part, a qualified name) and
# labelValueFmt (a label value, empty allowed); the 63-character bounds are the callers'.
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# The path part of IsDomainPrefixedPath (httpPathFmt).
HTTP_PATH = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")
# An int-or-string percentage (IsValidPercent).
PERCENT = re.compile(r"^([0-9]+)%$")


# The API groups Kubernetes v1.36 serves itself (schemas/kubernetes: the core group "" and the rest); any other is a
# custom resource's.
BUILT_IN_GROUPS = frozenset({
    "", "apps", "batch", "autoscaling", "policy", "networking.k8s.io", "rbac.authorization.k8s.io", "storage.k8s.io",
    "scheduling.k8s.io", "node.k8s.io", "coordination.k8s.io", "discovery.k8s.io", "events.k8s.io", "resource.k8s.io",
    "admissionregistration.k8s.io", "apiextensions.k8s.io", "apiregistration.k8s.io", "certificates.k8s.io",
    "flowcontrol.apiserver.k8s.io", "authentication.k8s.io", "authorization.k8s.io", "internal.apiserver.k8s.io",
    "storagemigration.k8s.io"})


# Configuration files that share the manifest's header but no API server serves: a tool or a component reads them
# from disk (kind's cluster config: kind v0.31 pkg/apis/config/v1alpha4; kustomize's: api/types; the component
# configuration of Kubernetes v1.36 staging/src/k8s.io/{kubelet,kube-proxy,kube-scheduler,apiserver,...}/config;
# kubeadm's; a kubeconfig, `v1` `Config`, client-go tools/clientcmd/api/v1). None of these groups is among
# BUILT_IN_GROUPS (tests/test_inputs.py checks it), and a cluster has no CRD for them.
KUSTOMIZE_GROUP = "kustomize.config.k8s.io"
# The files kustomize reads its configuration from (kustomize v5.8.1 api/konfig/general.go
# RecognizedKustomizationFileNames; render/kustomization.py KUSTOMIZATION_FILES), in words.
KUSTOMIZE_READS = "kustomization.yaml, kustomization.yml or Kustomization"
CONFIGURATION_GROUPS = {
    "kind.x-k8s.io": "kind's cluster configuration",
    KUSTOMIZE_GROUP: "kustomize's configuration",
    "kubeadm.k8s.io": "kubeadm's configuration",
    "kubelet.config.k8s.io": "the kubelet's configuration",
    "kubeproxy.config.k8s.io": "kube-proxy's configuration",
    "kubescheduler.config.k8s.io": "the scheduler's configuration",
    "kubecontrollermanager.config.k8s.io": "the controller manager's configuration",
    "controllermanager.config.k8s.io": "the controller manager's configuration",
    "cloudcontrollermanager.config.k8s.io": "the cloud controller manager's configuration",
    "apiserver.config.k8s.io": "the API server's configuration",
    "apiserver.k8s.io": "the API server's configuration",
    "audit.k8s.io": "the API server's audit policy",
    "pod-security.admission.config.k8s.io": "the API server's Pod Security configuration",
    "eventratelimit.admission.k8s.io": "the API server's admission configuration",
    "clientauthentication.k8s.io": "a client credential plugin's message",
}


def configuration(doc: Any) -> str | None:
    """What a document configures where it is such a file (CONFIGURATION_GROUPS, or a kubeconfig), else None."""
    if not isinstance(doc, dict) or not isinstance(doc.get("apiVersion"), str):
        return None
    if doc["apiVersion"] == "v1" and doc.get("kind") == "Config":
        return "a kubeconfig (kubectl's client configuration)"
    return CONFIGURATION_GROUPS.get(group_of(doc["apiVersion"]))


def group_of(api_version: str) -> str:
    """The API group of an apiVersion (`batch/v1` -> `batch`; the core group `v1` -> "")."""
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def version_of(api_version: str) -> str:
    """The version of an apiVersion (`batch/v1` -> `v1`; the core group's `v1` -> `v1`)."""
    return api_version.rsplit("/", 1)[-1]


def domain_prefixed_path_problems(value: str) -> list[str]:
    """Why k8s.io/apimachinery validation.IsDomainPrefixedPath refuses `value` (`<DNS-1123 subdomain>/<HTTP path>`,
    both parts non-empty); empty where it is one."""
    host, _, path = value.partition("/")
    if not host or not path:
        return ['is not a domain-prefixed path (such as "acme.io/foo")']
    why = []
    if len(host) > 253 or not DNS1123_SUBDOMAIN.match(host):
        why.append(f"has '{host}' before the '/', not a DNS-1123 subdomain")
    if not HTTP_PATH.match(path):
        why.append(f"has '{path}' after the '/', not an HTTP path")
    return why


def int_or_percent(value: Any) -> tuple[int, bool] | None:
    """An intstr value as (number, is a percentage); None where it is neither an integer nor `<digits>%`."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value, False
    match = PERCENT.match(value) if isinstance(value, str) else None
    return (int(match.group(1)), True) if match else None


def selects(selector: Any, labels: dict[str, Any]) -> bool:
    """Whether a label selector (matchLabels and matchExpressions: In, NotIn, Exists, DoesNotExist) selects these
    labels (metav1.LabelSelectorAsSelector); label values compared as strings."""
    if not isinstance(selector, dict):
        return False
    for k, v in mapping(selector.get("matchLabels")).items():
        if labels.get(str(k)) != str(v):
            return False
    for e in listing(selector.get("matchExpressions")):
        e = mapping(e)
        key, op = str(e.get("key")), e.get("operator")
        values = [str(x) for x in listing(e.get("values"))]
        has = key in labels
        if (op == "In" and (not has or labels[key] not in values)) or (op == "NotIn" and has and labels[key] in values) \
                or (op == "Exists" and not has) or (op == "DoesNotExist" and has):
            return False
    return True


# --- resource quantities ------------------------------------------------------------------------------------------

# resource.Quantity's serialised form (k8s.io/apimachinery pkg/api/resource/quantity.go, the grammar in its
# comment; the same pattern as the OpenAPI schema's): a signed decimal number, then a binary-SI suffix (Ki .. Ei), a
# decimal exponent (e3, E-2) or a decimal-SI suffix (n, u, m, none, k, M, G, T, P, E).
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([KMGTPE]i)|([eE][+-]?(?:[0-9]+(?:\.[0-9]*)?|"
                       r"\.[0-9]+))|([numkMGTPE]?))$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
# Every suffix and the factor it stands for ("" none), for those who write quantities back (make scale).
SUFFIX_FACTORS: dict[str, Fraction] = {**_DECIMAL, **{k: Fraction(v) for k, v in _BINARY.items()}}
# An exponent past this is not a size anyone writes (resource.Quantity itself caps what it can hold): not a quantity.
_MAX_EXPONENT = 64


@dataclass(frozen=True)
class Quantity:
    """A parsed resource.Quantity: its exact value, the suffix as written (`Gi`, `m`, `e9`, "" for none) and the number
    before it as written."""

    value: Fraction
    suffix: str
    number: str

    def __float__(self) -> float:
        return float(self.value)


# parse_quantity's answers for the strings it read (a Quantity is not changed once made): an input names a few
# sizes many times over, and Fraction's parsing of one costs more than the rest of a rule's look at it.
_PARSED: dict[str, Quantity | None] = {}


def parse_quantity(value: Any) -> Quantity | None:
    """A resource quantity (`256Gi`, `1500m`, `4e9`, a YAML number); None where the API server would refuse it."""
    if type(value) is str:
        try:
            return _PARSED[value]
        except KeyError:
            if len(_PARSED) > 4096:  # bounded on any input
                _PARSED.clear()
            q = _PARSED[value] = _parse_quantity(value)
            return q
    return _parse_quantity(value)


def _parse_quantity(value: Any) -> Quantity | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Quantity(Fraction(value), "", str(value))
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return Quantity(Fraction(value), "", repr(value))
    m = _QUANTITY.match(str(value).strip())
    if not m:
        return None
    number, binary, exponent, decimal = m.groups()
    base = Fraction(number)
    if binary:
        return Quantity(base * _BINARY[binary], binary, number)
    if exponent:
        power = Fraction(exponent[1:])
        if power.denominator != 1 or abs(power) > _MAX_EXPONENT:
            return None
        return Quantity(base * Fraction(10) ** int(power), exponent, number)
    return Quantity(base * _DECIMAL[decimal or ""], decimal or "", number)


def quantity_bytes(value: Any) -> float | None:
    """`256Gi` -> bytes (`4e9`, `4G`, `4000M` alike); None where it is not a quantity."""
    q = parse_quantity(value)
    return float(q.value) if q is not None else None


def quantity_cpu(value: Any) -> float | None:
    """`2` -> 2.0, `1500m` -> 1.5; None where it is not a quantity."""
    q = parse_quantity(value)
    return float(q.value) if q is not None else None


def quantity_value(value: Any) -> int | None:
    """resource.Quantity.Value(): the quantity rounded up to a whole number (a CPU count); None where it is not one."""
    q = parse_quantity(value)
    if q is None:
        return None
    whole = q.value.numerator // q.value.denominator
    return whole if whole == q.value else whole + 1


# --- reading a parsed object ------------------------------------------------------------------------------------


# Go's int64 (a 64-bit platform's int): the numbers strconv.Atoi takes, and time.Duration holds.
MAX_INT64 = 2**63 - 1
_ATOI = re.compile(r"[+-]?[0-9]+")


def go_atoi(text: str) -> int | None:
    """strconv.Atoi on a 64-bit platform: an optional sign and decimal digits within int64; None where it errs."""
    if not _ATOI.fullmatch(text):
        return None
    value = int(text)
    return value if -MAX_INT64 - 1 <= value <= MAX_INT64 else None


def as_int(value: Any, default: int | None = None) -> int | None:
    if value is None or isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except ValueError:
        return default


def dig(obj: Any, *path: Any) -> Any:
    """obj[path[0]][path[1]]...; None where a step is missing or of the wrong type."""
    for key in path:
        if type(obj) is dict and type(key) is str:  # the common step, tested first
            obj = obj.get(key)
        elif isinstance(key, int):
            if not isinstance(obj, list) or not -len(obj) <= key < len(obj):
                return None
            obj = obj[key]
        elif not isinstance(obj, dict):
            return None
        else:
            obj = obj.get(key)
    return obj


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def listing(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def env_entry(container: Any, name: str, *, first: bool = False) -> dict[str, Any] | None:
    """The container's env entry named `name`: the last one, the one the kubelet gives the process (a later
    definition of a name hides an earlier one), or with `first` the first, the one a controller's lookup finds
    (KubeRay's utils.EnvVarByName, LWS's GetEnvVarValueIfInContainer walk the list and stop at it)."""
    found = None
    for var in listing(mapping(container).get("env")):
        if isinstance(var, dict) and var.get("name") == name:
            if first:
                return var
            found = var
    return found


# --- $(VAR) expansion in env values, command and args (k8s.io/kubernetes third_party/forked/golang/expansion) -------

_K8S_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")


def expand_k8s(text: str, env: dict[str, str | None]) -> str:
    """Kubernetes `$(VAR)` expansion against `env`; `$$` escapes, an unknown variable stays as written."""
    if "$" not in text:
        return text

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        value = env.get(m.group(1))
        return m.group(0) if value is None else value

    return _K8S_VAR.sub(sub, text)
