"""Read Kubernetes objects from YAML text (a file, standard input or kustomize's output) into Manifests.
Every failure is an InputError with one line naming the file, document and what is wrong."""
from __future__ import annotations

import json
import re
from typing import Any

import yaml

from ..kube.objects import Manifest
from ..kube.values import KUSTOMIZE_GROUP, KUSTOMIZE_READS, configuration, group_of
from .scalars import go_plain, whole

try:  # libyaml is several times faster on large renders; the pure-Python loader behaves the same
    _Base: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Base = yaml.SafeLoader


class InputError(Exception):
    """Bad input: the message is the whole one-line report."""


# A Helm chart's root holds its Chart.yaml (helm v3 pkg/chart/loader/directory.go reads it first, and refuses a
# folder without one): the loader skips it as helm's (objects), and a folder walk reads nothing else of the chart
# (render/kustomization.py helm_chart).
HELM_CHART_FILE = "Chart.yaml"


class NotKubernetes(InputError):
    """A file none of whose documents is a Kubernetes object (a GitHub workflow, Helm values, a
    .pre-commit-config.yaml, kind's cluster configuration): not a manifest at all, so it is skipped, not an error
    (engine.SKIPPED). `why` says what it is instead."""

    def __init__(self, source: str, why: str = "no document has an apiVersion, a kind or metadata") -> None:
        super().__init__(f"{source}: {why}: not a Kubernetes manifest")
        self.why = why


# Bounds on what one input may be and what one YAML document may expand to, checked on the parser's events before
# anything is built (docs/validation.md, "Bounds"), so memory and time stay bounded on any input:
# - MAX_INPUT_BYTES: one file, standard input or one overlay's render. Read at most this much plus one byte, so
#   /dev/zero or an endless pipe ends too. About 40 times the repository's 13 rendered overlays together.
MAX_INPUT_BYTES = 32 * 1024 * 1024
# - MAX_OBJECT_BYTES: the text of one document once its aliases are expanded (every scalar, keys included). The API
#   server refuses a request body over 3 MiB (MaxRequestBodyBytes, kubernetes/kubernetes
#   staging/src/k8s.io/apiserver/pkg/server/config.go, NewConfig), and an object is one request, so a larger one
#   can never be applied.
MAX_OBJECT_BYTES = 3 * 1024 * 1024
# - MAX_DEPTH: nesting of one document, aliases expanded. go-yaml (what kubectl and kubeconform read YAML with)
#   refuses 10,000 ("exceeded max depth", kubeconform v0.7.0 vendor/sigs.k8s.io/yaml/goyaml.v2/scannerc.go:894-948);
#   here every stage after the reader walks objects recursively, within Python's default recursion limit of 1,000,
#   and libyaml's composer recurses in C (100,000 levels crash it), hence less. The deepest real manifest here, the
#   TrainJob CRD, nests 48 levels.
MAX_DEPTH = 256
# - Aliases: go-yaml's own rule, as kubectl and kubeconform apply it ("document contains excessive aliasing", the
#   fix for CVE-2019-11253): once more than 100 of a document's decoded nodes come from aliases and more than 1,000
#   are decoded, at most 99 % may come from aliases up to 400,000 decoded nodes, falling linearly to 10 % at
#   4,000,000 (kubeconform v0.7.0 vendor/sigs.k8s.io/yaml/goyaml.v2/decode.go:321-357, allowedAliasRatio and
#   unmarshal). Counted the same way, in the same order, so what go-yaml decodes is read here and what it refuses
#   is refused.
_ALIAS_RANGE_LOW, _ALIAS_RANGE_HIGH = 400_000, 4_000_000


def _allowed_alias_ratio(decoded: int) -> float:
    if decoded <= _ALIAS_RANGE_LOW:
        return 0.99
    if decoded >= _ALIAS_RANGE_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_RANGE_LOW) / (_ALIAS_RANGE_HIGH - _ALIAS_RANGE_LOW)


def mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"


def check_bounds(text: str, source: str) -> None:
    """Refuse, as one InputError naming the file, line and document, YAML that would expand past the bounds above.
    Walks the parser's events (libyaml's parser keeps its own stack, so any depth is safe to scan) and keeps, per
    anchor, the size of what an alias to it expands to: the whole walk is linear in the text. Syntax errors are
    yaml.YAMLError, as from yaml.load."""
    _walk(text, source, build=False)


class _Fallback(Exception):
    """What the one-pass builder leaves to PyYAML's own loader (explicit tags, merge keys, keys that are not
    strings, duplicate keys, undefined aliases): it reads those, and says what is wrong with its line."""


_NO_KEY = object()
_STR_TAG, _MAP_TAG, _SEQ_TAG = (yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG,
                                yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG)
# Tags a plain scalar may resolve to that the builder constructs itself (with _StrictLoader's own constructors, so
# the values are the same); any other (merge `<<`, value `=`) goes to the fallback.
# _GO_PLAIN: the plain scalars go_plain reads as go-yaml v2 does (numbers, y/n), resolved below.
_GO_PLAIN = "tag:ddp-k8s,go-plain"
_PLAIN_TAGS = {*(f"tag:yaml.org,2002:{t}" for t in ("null", "bool", "int", "float", "timestamp")), _GO_PLAIN}
_PLAIN_CACHE: dict[str, Any] = {}  # plain scalar text -> its value (the tag depends on the text alone)


def _walk(text: str, source: str, build: bool) -> list[Any] | None:
    """check_bounds' walk; with `build`, also the documents, built from the same events (what yaml.load_all with
    _StrictLoader returns, in one pass instead of a second parse). None where the builder met what it leaves to
    PyYAML (_Fallback); the bounds are checked over the whole text either way."""
    if len(text) > MAX_INPUT_BYTES:
        raise InputError(f"{source}: larger than {mib(MAX_INPUT_BYTES)}, the most one input may be (split it)")
    anchors: dict[str, tuple[int, int, int]] = {}  # anchor -> (nodes decoded, scalar bytes, height) of its node
    open_anchors: set[str] = set()
    stack: list[list[Any]] = []  # per open collection: [nodes, bytes, height of its children, anchor]
    doc = decoded = from_aliases = 0
    root: list[Any] = [0, 0, 0, None]
    # The builder: per open collection [container, pending key]; the documents; anchored values.
    docs: list[Any] = []
    frames: list[list[Any]] = []
    values: dict[str, Any] = {}
    top: list[Any] = []

    def where(event: Any) -> str:
        return f"{source}:{event.start_mark.line + 1}: document {doc}"

    def excessive(event: Any) -> None:  # go-yaml checks at every node it decodes; so does this, in its order
        if from_aliases > 100 and decoded > 1000 and from_aliases / decoded > _allowed_alias_ratio(decoded):
            raise InputError(f"{where(event)}: excessive aliasing: {from_aliases:,} of the first {decoded:,} nodes "
                             "come from aliases (a YAML alias bomb? kubectl's YAML reader refuses it too)")

    def place(value: Any, is_str_key: bool) -> None:
        if not frames:
            top.append(value)
            return
        frame = frames[-1]
        container, key = frame
        if type(container) is list:
            container.append(value)
        elif key is _NO_KEY:
            if not is_str_key or value in container:
                raise _Fallback  # a key that is not a string (sigs.k8s.io/yaml's conversions), or a duplicate
            frame[1] = value
        else:
            container[key] = value
            frame[1] = _NO_KEY

    loader = _StrictLoader("") if build else None
    scalar_node = yaml.ScalarNode
    scalar_event, alias_event, start_events = yaml.ScalarEvent, yaml.AliasEvent, (yaml.MappingStartEvent,
                                                                                yaml.SequenceStartEvent)
    mapping_start = yaml.MappingStartEvent
    end_events, document_start, stream_end = (yaml.MappingEndEvent, yaml.SequenceEndEvent), yaml.DocumentStartEvent, \
        yaml.StreamEndEvent
    document_end = yaml.DocumentEndEvent
    parser = _Base(text)
    try:
        while True:
            event = parser.get_event()  # one event at a time: the walk holds no more than the open collections
            cls = type(event)
            if cls is scalar_event:
                decoded += 1
                size, height, nodes = len(event.value), 1, 1
                if event.anchor is not None and (event.anchor in anchors or event.anchor in open_anchors):
                    build = False  # a duplicate anchor: PyYAML's composer refuses it, with its line
                if build:
                    try:
                        value, is_str = _scalar(loader, event)
                        place(value, is_str)
                    except _Fallback:
                        build = False
                    else:
                        if event.anchor is not None:
                            values[event.anchor] = value
                if event.anchor is not None:
                    anchors[event.anchor] = (1, size, 1)
            elif cls in start_events:
                decoded += 1
                if len(stack) >= MAX_DEPTH:
                    raise InputError(f"{where(event)} nests deeper than {MAX_DEPTH} levels (the most read here)")
                if event.anchor is not None:
                    if event.anchor in anchors or event.anchor in open_anchors:
                        build = False  # a duplicate anchor: PyYAML's composer refuses it, with its line
                    open_anchors.add(event.anchor)
                stack.append([1, 0, 0, event.anchor])
                if build:
                    tag = event.tag
                    container: Any = {} if cls is mapping_start else []
                    try:
                        if tag not in (None, "!", _MAP_TAG if cls is mapping_start else _SEQ_TAG):
                            raise _Fallback  # !!set, !!omap, a custom tag: PyYAML says what it makes of it
                        place(container, False)
                    except _Fallback:
                        build = False
                    else:
                        frames.append([container, _NO_KEY])
                        if event.anchor is not None:
                            values[event.anchor] = container
                if from_aliases > 100:
                    excessive(event)
                continue
            elif cls in end_events:
                nodes, size, height, anchor = stack.pop()
                height += 1
                if anchor is not None:
                    anchors[anchor] = (nodes, size, height)
                    open_anchors.discard(anchor)
                if build:
                    frames.pop()
            elif cls is alias_event:
                if event.anchor in open_anchors:
                    raise InputError(f"{where(event)}: anchor '{event.anchor}' contains an alias to itself (an "
                                     "endless object)")
                target = anchors.get(event.anchor)
                if target is None:
                    build = False  # an unknown anchor: the composer reports it with its line
                    continue
                if build:
                    try:
                        value = values[event.anchor]
                        place(value, False)  # an alias as a key: PyYAML's reading (and refusal) of it
                    except (_Fallback, KeyError):
                        build = False
                decoded += 1 + target[0]
                from_aliases += target[0]
                if len(stack) + target[2] > MAX_DEPTH:
                    raise InputError(f"{where(event)}: alias *{event.anchor} makes it nest deeper than {MAX_DEPTH} "
                                     "levels (the most read here)")
                nodes, size, height = 1 + target[0], target[1], target[2]
            elif cls is document_start:
                doc += 1
                anchors.clear()
                open_anchors.clear()
                values.clear()
                decoded, from_aliases, root = 1, 0, [0, 0, 0, None]
                continue
            elif cls is document_end:
                if build:
                    docs.append(top.pop() if top else None)
                continue
            elif cls is stream_end:
                return docs if build else None
            else:
                continue
            if from_aliases > 100:
                excessive(event)
            parent = stack[-1] if stack else root
            parent[0] += nodes
            parent[1] += size
            if height > parent[2]:
                parent[2] = height
            if parent[1] > MAX_OBJECT_BYTES:
                cause = "expands to" if from_aliases else "holds"
                raise InputError(f"{where(event)} {cause} more than {mib(MAX_OBJECT_BYTES)} of text, more than the "
                                 "API server accepts for one object" + (" (a YAML alias bomb?)" if from_aliases else ""))
    finally:
        parser.dispose()


def _scalar(loader: Any, event: Any) -> tuple[Any, bool]:
    """A scalar event's value as _StrictLoader constructs it, and whether it is a string; _Fallback where the builder
    leaves it to PyYAML. The tag is resolved as PyYAML's composer does (`resolve` with the event's implicit flags)."""
    tag, value = event.tag, event.value
    if tag is None or tag == "!":
        if not event.implicit[0]:
            return value, True  # quoted (or a block scalar): a string
        hit = _PLAIN_CACHE.get(value, _NO_KEY)
        if hit is not _NO_KEY:
            return hit, type(hit) is str
        tag = loader.resolve(yaml.ScalarNode, value, event.implicit)
        if tag == _STR_TAG:
            result: Any = value
        elif tag in _PLAIN_TAGS:
            try:
                result = loader.yaml_constructors[tag](loader, yaml.ScalarNode(tag, value, event.start_mark,
                                                                                event.end_mark, event.style))
            except yaml.YAMLError:
                raise _Fallback from None
        else:
            raise _Fallback
        if len(value) <= 64 and len(_PLAIN_CACHE) < 65536:  # keys and short values: at most 4 MiB of text kept
            _PLAIN_CACHE[value] = result
        return result, type(result) is str
    if tag == _STR_TAG:
        return value, True
    raise _Fallback  # !!binary, !!int "3", a custom tag: PyYAML constructs (or refuses) it


class _StrictLoader(_Base):  # (_Base: Any, the C loader where PyYAML has it)
    """Safe loader that rejects duplicate keys (kubectl keeps the last one silently; strict validation refuses) and
    reads what is not JSON the way kubectl's sigs.k8s.io/yaml does: keys become strings (`5:` -> "5", `true:` ->
    "true"), timestamps stay the text written, `!!binary` is its UTF-8 text; `!!set`, `!!omap` and `!!pairs` are
    refused. Plain scalars resolve as go-yaml v2 resolves them (go_plain: the reader of kubectl, kubeconform and Argo
    CD; kustomize writes such values out already resolved): y/n booleans, 0o/0X/0B prefixes, 1e3 and 08 floats, a
    whole float as the integer encoding/json writes for it, no YAML 1.1 base-60 numbers (`12:30` is the string
    "12:30", where PyYAML read 750, and a 2 MB `1:0:0:...` took minutes to build), and an integer too large for
    go-yaml's int64, uint64 and float64 stays the text written (go-yaml's resolve falls through to a string; Python
    refuses more than 4,300 digits). Merge keys (`<<: *anchor`) are
    expanded, the mapping's own keys winning, as kustomize renders them."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in ("tag:yaml.org,2002:int",
                                                                           "tag:yaml.org,2002:float")]
        for first, resolvers in _Base.yaml_implicit_resolvers.items()}


# PyYAML's float pattern (resolver.py) less its sexagesimal alternative: go-yaml (v2 resolve.go, v3 resolve.go) has
# none.
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                |\.[0-9_]+(?:[eE][-+][0-9]+)?
                |[-+]?\.(?:inf|Inf|INF)
                |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))
# Every other plain scalar that may be a number or a boolean to go-yaml v2 (sigs.k8s.io/yaml v1.6.0 goyaml.v2/
# resolve.go, the reader of kubectl, kubeconform and Argo CD): integers in every base strconv.ParseInt(s, 0, 64) takes
# (0x, 0o, 0b, a leading 0, either case), resolveMap's y, Y, n, N, yamlStyleFloat's 1e3, 1.5e3, +.5, 08: tried last,
# and go_plain decides (the text where go-yaml reads a string).
_StrictLoader.add_implicit_resolver(_GO_PLAIN, re.compile(r"^(?:[yYnN]|[-+]?[0-9.][0-9A-Za-z_.+-]*)$"),
                                    list("yYnN-+0123456789."))


def _go_plain(loader: "_StrictLoader", node: yaml.ScalarNode) -> Any:
    return whole(go_plain(node.value))


def _float(loader: "_StrictLoader", node: yaml.ScalarNode) -> Any:
    return whole(loader.construct_yaml_float(node))


def key_text(key: Any, node: yaml.Node) -> Any:
    """A mapping key as the JSON the API server receives has it (sigs.k8s.io/yaml turns scalar keys into strings)."""
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        text = repr(key)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(node, yaml.ScalarNode):
        return node.value
    return key  # a list or mapping as a key: construct_mapping below refuses it with its line


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:
            continue  # `<<`: flatten_mapping below merges it, the mapping's own keys winning
        key = key_text(loader.construct_object(key_node, deep=deep), key_node)
        if isinstance(key, (list, dict)):
            raise yaml.constructor.ConstructorError(None, None, f"a {type(key).__name__} as a mapping key (keys must "
                                                    "be strings)", key_node.start_mark)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key '{key}'", key_node.start_mark)
        seen.add(key)
    loader.flatten_mapping(node)
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = key_text(loader.construct_object(key_node, deep=deep), key_node)
        out[key] = loader.construct_object(value_node, deep=deep)
    return out


def _timestamp(loader: _StrictLoader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


def _binary(loader: _StrictLoader, node: yaml.ScalarNode) -> str:
    data: bytes = loader.construct_yaml_binary(node)
    try:
        return data.decode("utf-8")  # what sigs.k8s.io/yaml hands the API server
    except UnicodeDecodeError:
        raise yaml.constructor.ConstructorError(None, None, "!!binary value is not UTF-8 text (JSON has no bytes; "
                                                "write it base64-encoded as a string)", node.start_mark) from None


def _refuse(loader: _StrictLoader, node: yaml.Node) -> Any:
    raise yaml.constructor.ConstructorError(None, None, f"tag {node.tag.rsplit(':', 1)[-1]} has no JSON form (a "
                                            "Kubernetes manifest holds mappings, lists and scalars)", node.start_mark)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _go_plain)
_StrictLoader.add_constructor(_GO_PLAIN, _go_plain)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _float)
_StrictLoader.add_constructor("tag:yaml.org,2002:binary", _binary)
for _tag in ("set", "omap", "pairs"):
    _StrictLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse)


def parse(text: str, source: str) -> list[Manifest]:
    """All objects in a multi-document YAML text; `List` kinds are unpacked; empty documents are skipped."""
    try:
        docs = _walk(text, source, build=True)
        if docs is None:
            docs = list(yaml.load_all(text, Loader=_StrictLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{source}{where}: invalid YAML: {problem}") from None
    return objects(docs, source)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key '{key}'")
        out[key] = value
    return out


def parse_json(text: str, source: str) -> list[Manifest]:
    """One JSON document (an object, a `List` of objects); duplicate keys are refused as in YAML. JSON has no
    aliases; its size and depth are bounded as YAML's are (JSON is YAML: the same walk checks it)."""
    try:
        check_bounds(text, source)
        walked = True
    except yaml.YAMLError:
        walked = False  # not YAML-readable (tabs): json.loads below says what is wrong, or reads it
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    except ValueError as exc:  # a duplicate key (JSON gives no position for it)
        raise InputError(f"{source}: invalid JSON: {exc}") from None
    except RecursionError:
        raise InputError(f"{source}: invalid JSON: nests deeper than {MAX_DEPTH} levels (the most read here)") from None
    if not walked:
        _json_depth(doc, source)
    return objects([doc], source)


def _json_depth(doc: Any, source: str) -> None:
    """MAX_DEPTH for JSON the YAML walk could not read (tabs), without recursion."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise InputError(f"{source}: document 1 nests deeper than {MAX_DEPTH} levels (the most read here)")
            stack += [(v, depth + 1) for v in (value.values() if isinstance(value, dict) else value)]


def looks_like_an_object(doc: Any) -> bool:
    return isinstance(doc, dict) and ("apiVersion" in doc or "kind" in doc or isinstance(doc.get("metadata"), dict))


def objects(docs: list[Any], source: str) -> list[Manifest]:
    """Parsed documents -> Manifests: `List` kinds (`v1/List`, `kubectl get -o yaml`) are unpacked. Documents none
    of which looks like a Kubernetes object (a mapping with an apiVersion, a kind or a metadata mapping) are not
    Kubernetes at all: NotKubernetes. A document with metadata and no apiVersion or kind is a manifest missing its
    header, and one odd document beside Kubernetes objects a broken manifest: the schema stage reports each."""
    present = [doc for doc in docs if doc is not None]
    if source.rsplit("/", 1)[-1] == HELM_CHART_FILE and len(present) == 1 and isinstance(present[0], dict) and \
            "kind" not in present[0]:
        raise NotKubernetes(source, "a Helm chart's Chart.yaml: the chart is helm's to render, which the validator "
                            "does not run (`helm template <chart> | make validate PATHS=-` checks what it renders)")
    if present and not any(looks_like_an_object(doc) for doc in present):
        raise NotKubernetes(source)
    configures = {configuration(doc) for doc in present}
    if present and None not in configures:  # (one beside Kubernetes objects: schema.lookup.triage says so)
        kustomize = f" (kustomize reads it only from {KUSTOMIZE_READS})" if \
            any(group_of(d["apiVersion"]) == KUSTOMIZE_GROUP for d in present) else ""
        raise NotKubernetes(source, " and ".join(sorted(str(c) for c in configures)) + ", which no API server "
                            "serves" + kustomize)
    out: list[Manifest] = []
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise InputError(f"{source}: document {i + 1} is a {type(doc).__name__}, not a Kubernetes object")
        kind = doc.get("kind")
        if kind == "List" or isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            items = doc.get("items")
            if items is None:
                continue
            if not isinstance(items, list):
                raise InputError(f"{source}: document {i + 1} ({kind}) field items is a {type(items).__name__}, "
                                 "not a list of Kubernetes objects")
            for j, item in enumerate(items):
                if not isinstance(item, dict):
                    raise InputError(f"{source}: document {i + 1} ({kind}) items[{j}] is a {type(item).__name__}, "
                                     "not a Kubernetes object")
                out.append(Manifest(item, source, len(out)))
            continue
        out.append(Manifest(doc, source, len(out)))
    return out


def parse_any(text: str, source: str) -> list[Manifest]:
    """A `.json` file as JSON; anything else as YAML, except standard input that holds one JSON document."""
    if source.lower().endswith(".json"):
        return parse_json(text, source)
    if source == "<stdin>" and text.lstrip().startswith("{"):
        try:
            return parse_json(text, source)
        except InputError:
            pass  # YAML's flow style starts with `{` too: let the YAML reader say what is wrong
    return parse(text, source)
