"""An upper bound of the runtime cost the API server charges a CRD validation rule, without evaluating it.

The API server bounds CEL by cost, not time (k8s.io/apiserver pkg/apis/cel/config.go@v0.36.0:22,26): a rule's
evaluation is cancelled past celconfig.PerCallLimit = 1,000,000 (pkg/cel/environment/base.go@v0.36.0:83, the
error `operation cancelled: actual cost limit exceeded`, validation.go:445), and the rules of one object together
get celconfig.RuntimeCELCostBudget = 10,000,000 (k8s.io/apiextensions-apiserver
pkg/registry/customresource/strategy.go@v0.36.0:221,309; pkg/apiserver/schema/cel/validation.go@v0.36.0:380,430:
`validation failed due to running out of cost budget`). The charge is cel-go's runtime cost
(interpreter/runtimecost.go@v0.26.0, the cel-go Kubernetes v1.36.0 builds with) plus the Kubernetes library's
(k8s.io/apiserver pkg/cel/library/cost.go@v0.36.0 CallCost). cel-expr-python (cel-cpp) tracks no cost, so this
module ports cel-go's *estimator* (checker/cost.go@v0.26.0, which cel-go keeps in step with the runtime cost: its
line 27) and Kubernetes' EstimateCallCost (library/cost.go@v0.36.0:274-542), and feeds it the sizes of the actual
object: the size at a path (`self.spec.items.@items.name`) is the largest size of any value at that path in the
object the rule sees. The estimator is a worst case given those sizes, so a bound within the limit proves the API
server accepts the rule on cost; a bound past it says only that the API server MAY refuse.

Where cel-go's estimator charges less than its runtime does, the bound takes the runtime's charge: a field select on
a value of unknown type (dyn: x-kubernetes-int-or-string, x-kubernetes-preserve-unknown-fields) costs 1, as the
runtime charges every qualifier (runtimecost.go:151,183), where the estimator charges 0 (cost.go:516-519);
`startsWith`/`endsWith` cost the larger of the receiver's and the argument's size * 0.1 (the runtime charges the
receiver's, runtimecost.go:295-296, the estimate the argument's, cost.go:778-781); `join` costs twice its result's
size * 0.1 (library/cost.go:121-125; the estimate, once: :384-406); and Kubernetes' list functions on a list of
lists or maps (`indexOf`) cost the traversal of the object's own elements (library/cost.go:104-109,616), where the
estimate charges 1 per element. `estimate(..., runtime=False)` gives cel-go's estimate exactly (the ported tests).

The walk is one pass over the checked AST (cel_ast.py) and never evaluates anything; sizes come from one walk of the
object per distinct path. A size the estimator cannot bound (a function's result of unknown size: `split`) makes
the bound unknown (None) rather than a number: no claim is made for that rule, and it is evaluated as before.

It is one file because it is one port: cel-go's checker/cost.go, whose functionCost calls Kubernetes'
EstimateCallCost and cel-go's sets estimator, with the sizes of the object they read; kept together, each function
sits in the order and under the name of the Go it follows, so the line references can be checked side by side.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from .cel_ast import checked_expr

MAX = 2**64 - 1
# A bound this large came from the estimator's unknown size (2^64-1 times a factor >= 0.1): see Cost.unknown.
UNKNOWN_FROM = 2**60

# cel-go common/cost.go@v0.26.0:19-39.
SELECT_AND_IDENT_COST = 1
CONST_COST = 0
LIST_CREATE_BASE_COST = 10
MAP_CREATE_BASE_COST = 30
STRUCT_CREATE_BASE_COST = 40
STRING_TRAVERSAL_COST_FACTOR = 0.1
REGEX_STRING_LENGTH_COST_FACTOR = 0.25

# cel-go parser: the accumulator names (parser.AccumulatorName, parser.HiddenAccumulatorName).
_ACCUMULATORS = ("__result__", "@result")


def _add(x: int, y: int) -> int:
    return MAX if x + y > MAX else x + y


def _mul(x: int, y: int) -> int:
    return MAX if x * y > MAX else x * y


def _factor(x: int, f: float) -> int:
    """multiplyByCostFactor (cost.go:236): x * f rounded up, saturating at 2^64-1."""
    xf = float(x)
    if xf > 0 and f > 0 and xf > MAX / f:
        return MAX
    c = math.ceil(xf * f)
    return MAX if c >= 2.0**64 else int(c)


@dataclass(frozen=True)
class Est:
    """A cel-go SizeEstimate or CostEstimate (cost.go:100-215): a [lo, hi] range, saturating arithmetic."""

    lo: int
    hi: int

    def add(self, o: "Est") -> "Est":
        return Est(_add(self.lo, o.lo), _add(self.hi, o.hi))

    def mul(self, o: "Est") -> "Est":
        return Est(_mul(self.lo, o.lo), _mul(self.hi, o.hi))

    def factor(self, f: float) -> "Est":
        return Est(_factor(self.lo, f), _factor(self.hi, f))

    def union(self, o: "Est") -> "Est":
        return Est(min(self.lo, o.lo), max(self.hi, o.hi))


def fixed(n: int) -> Est:
    return Est(n, n)


UNKNOWN_SIZE = Est(0, MAX)
ZERO = Est(0, 0)
ONE = fixed(1)


@dataclass(frozen=True)
class CelType:
    """The part of a CEL type the estimator reads: its kind and parameters (list element, map key and value)."""

    kind: str  # bool int uint double string bytes duration timestamp null list map struct dyn typeparam type opaque
    params: tuple["CelType", ...] = ()
    name: str = ""

    def scalar(self) -> bool:
        """isScalar (cost.go:1018)."""
        if self.kind in ("bool", "double", "duration", "int", "timestamp", "uint"):
            return True
        return self.kind == "opaque" and self.name == "optional_type" and bool(self.params) and self.params[0].scalar()


DYN = CelType("dyn")
_PRIMITIVE = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN = {1: "dyn", 2: "timestamp", 3: "duration"}


def proto_type(t: Any) -> CelType:
    """A cel.expr.Type (checked.proto) as a CelType."""
    which = t.WhichOneof("type_kind")
    if which == "primitive":
        return CelType(_PRIMITIVE.get(t.primitive, "dyn"))
    if which == "wrapper":
        return CelType("wrapper", (CelType(_PRIMITIVE.get(t.wrapper, "dyn")),))
    if which == "well_known":
        return CelType(_WELL_KNOWN.get(t.well_known, "dyn"))
    if which == "list_type":
        return CelType("list", (proto_type(t.list_type.elem_type),))
    if which == "map_type":
        return CelType("map", (proto_type(t.map_type.key_type), proto_type(t.map_type.value_type)))
    if which == "message_type":
        return CelType("struct", name=t.message_type)
    if which == "type_param":
        return CelType("typeparam", name=t.type_param)
    if which == "abstract_type":
        return CelType("opaque", tuple(proto_type(p) for p in t.abstract_type.parameter_types),
                       name=t.abstract_type.name)
    if which in ("null", "type", "error", "function"):
        return CelType(which)
    return DYN


def schema_type(schema: Any) -> CelType:
    """The CEL type the API server gives a structural schema node (k8s.io/apiserver pkg/cel/common/schemas.go
    SchemaDeclType@v0.36.0): objects with properties are structs, with additionalProperties maps, arrays lists;
    int-or-string and untyped nodes dyn; strings of format date-time/date timestamps, duration durations, byte
    bytes."""
    if not isinstance(schema, dict) or schema.get("x-kubernetes-int-or-string"):
        return DYN
    t = schema.get("type")
    if t == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and not schema.get("properties"):
            return CelType("map", (CelType("string"), schema_type(extra)))
        return CelType("struct", name="object")
    if t == "array":
        return CelType("list", (schema_type(schema.get("items")),))
    if t == "string":
        return CelType({"date-time": "timestamp", "date": "timestamp", "duration": "duration",
                        "byte": "bytes"}.get(str(schema.get("format")), "string"))
    return CelType({"integer": "int", "number": "double", "boolean": "bool"}.get(str(t), "dyn"))


@dataclass
class _Entry:
    """entrySizeEstimate (cost.go:321)."""

    container: str
    key: Est
    val: Est

    def union(self, other: "_Entry | None") -> "_Entry | None":
        if other is None:
            return None
        return _Entry(self.container, self.key.union(other.key), self.val.union(other.val))


@dataclass
class _Local:
    path: list[str] | None
    size: Est | None
    entry: _Entry | None


@dataclass
class _Node:
    """checker.AstNode (cost.go:57): a path, a type, the expression, a computed size."""

    path: list[str] | None
    type: CelType
    expr: Any
    size: Est | None


# EstimateSize (cost.go:41): the size at a field path (None: the node has none) of a node of that type, or None.
SizeFn = Callable[[list[str] | None, CelType], "Est | None"]
TypeFn = Callable[[list[str]], "CelType | None"]


@dataclass
class Cost:
    """A rule's estimated cost: `bound` is None where the estimator met a size it cannot bound."""

    min: int
    max: int
    unknown: bool

    @property
    def bound(self) -> int | None:
        return None if self.unknown else self.max


class Coster:
    """cel-go's coster (checker/cost.go@v0.26.0:300) over a cel.expr.CheckedExpr, with Kubernetes' library
    estimator (library/cost.go@v0.36.0) as its CostEstimator and `size_at`/`type_at` (sizes and types by field
    path) as its SizeEstimator. presence_test_cost=0: the API server's cel.CostEstimatorOptions(
    checker.PresenceTestHasCost(false)) (environment/base.go@v0.36.0:79)."""

    def __init__(self, checked: Any, size_at: SizeFn, type_at: TypeFn, presence_test_cost: int = 0,
                 traversal_at: "Callable[[list[str]], int | None] | None" = None, runtime: bool = True) -> None:
        self.refs = checked.reference_map
        self.types = checked.type_map
        self.size_at = size_at
        self.type_at = type_at
        self.traversal_at = traversal_at
        # runtime=True: where the runtime charges more than cel-go's estimate (module doc), the runtime's charge;
        # runtime=False: cel-go's and Kubernetes' estimate exactly (their tests' values)
        self.runtime = runtime
        self.presence = fixed(presence_test_cost)
        self.paths: dict[int, list[str]] = {}
        self.locals: dict[str, list[_Local]] = {}
        self.sizes: dict[int, Est] = {}
        self.entries: dict[int, _Entry] = {}
        self.unknown = False  # an unknown size was met (UnknownSizeEstimate)

    # --- the AST --------------------------------------------------------------------------------------------------
    @staticmethod
    def kind(e: Any) -> str:
        return str(e.WhichOneof("expr_kind") or "")

    # --- types, paths, sizes (cost.go:869-1028) -------------------------------------------------------------------
    def get_type(self, e: Any) -> CelType:
        t = proto_type(self.types[e.id]) if e.id in self.types else DYN
        if t.kind == "dyn":
            path = self.get_path(e)
            if path:
                t = self.type_at(path) or DYN
        return t

    def get_path(self, e: Any) -> list[str] | None:
        if self.kind(e) == "ident_expr":
            v = self.peek(e.ident_expr.name)
            if v is not None:
                return v.path
        return self.paths.get(e.id)

    def peek(self, name: str) -> _Local | None:
        stack = self.locals.get(name)
        return stack[-1] if stack else None

    def push(self, name: str, path: list[str] | None, size: Est | None, entry: _Entry | None) -> None:
        self.locals.setdefault(name, []).append(_Local(path, size, entry))

    def pop(self, name: str) -> None:
        self.locals[name].pop()

    def new_node(self, e: Any) -> _Node:
        path = self.get_path(e)
        if path and path[0] in _ACCUMULATORS:
            path = None
        return _Node(path, self.get_type(e), e, self.compute_size(e))

    def set_size(self, e: Any, size: Est | None) -> None:
        if size is not None:
            self.sizes[e.id] = size

    def size_or_unknown(self, node: Any) -> Est:
        sz = node.size if isinstance(node, _Node) else self.compute_size(node)
        if sz is not None:
            return sz
        self.unknown = True
        return UNKNOWN_SIZE

    def compute_size(self, e: Any) -> Est | None:
        hit = self.sizes.get(e.id)
        if hit is not None:
            return hit
        sz = self.expr_size(e)
        if sz is not None:
            return sz
        sz = self.size_at(self.get_path(e), self.get_type(e))
        if sz is not None:
            self.sizes[e.id] = sz
            return sz
        if self.get_type(e).scalar():
            return ONE
        if self.kind(e) == "ident_expr":
            v = self.peek(e.ident_expr.name)
            if v is not None and v.size is not None:
                return v.size
        return None

    @staticmethod
    def expr_size(e: Any) -> Est | None:
        """computeExprSize (cost.go:977)."""
        k = Coster.kind(e)
        if k == "const_expr":
            c = e.const_expr
            which = c.WhichOneof("constant_kind")
            if which == "string_value":
                return fixed(len(c.string_value))
            if which == "bytes_value":
                return fixed(len(c.bytes_value))
            if which in ("bool_value", "double_value", "duration_value", "int64_value", "timestamp_value",
                         "uint64_value", "null_value"):
                return ONE
            return None
        if k == "list_expr":
            return fixed(len(e.list_expr.elements))
        if k == "struct_expr" and not e.struct_expr.message_name:
            return fixed(len(e.struct_expr.entries))
        return None

    def copy_sizes(self, dst: Any, src: Any) -> None:
        self.set_size(dst, self.compute_size(src))
        entry = self.entry_size(src)
        if entry is not None:
            self.entries[dst.id] = entry

    def entry_size(self, e: Any) -> _Entry | None:
        hit = self.entries.get(e.id)
        if hit is not None:
            return hit
        if self.kind(e) == "ident_expr":
            v = self.peek(e.ident_expr.name)
            if v is not None and v.entry is not None:
                return v.entry
        return None

    # --- costs (cost.go:459-724) ----------------------------------------------------------------------------------
    def cost(self, e: Any) -> Est:
        k = self.kind(e)
        if k == "const_expr":
            return fixed(CONST_COST)
        if k == "ident_expr":
            v = self.peek(e.ident_expr.name)
            self.paths[e.id] = v.path if v is not None and v.path is not None else [e.ident_expr.name]
            return fixed(SELECT_AND_IDENT_COST)
        if k == "select_expr":
            return self.cost_select(e)
        if k == "call_expr":
            return self.cost_call(e)
        if k == "list_expr":
            return self.cost_list(e)
        if k == "struct_expr":
            return self.cost_map(e) if not e.struct_expr.message_name else self.cost_struct(e)
        if k == "comprehension_expr":
            return self.cost_bind(e) if self.is_bind(e) else self.cost_comprehension(e)
        return self.not_ported()

    def not_ported(self) -> Est:
        """A node this port does not know (cost.go gives 0 where the checker left no overload, and for an
        expression of no kind): here an unknown cost, so the rule gets no bound and is evaluated as before, rather
        than a bound that might be too low."""
        self.unknown = True
        return Est(0, MAX)

    def cost_select(self, e: Any) -> Est:
        sel = e.select_expr
        if sel.test_only:
            return self.presence.add(self.cost(sel.operand))
        total = self.cost(sel.operand)
        # cost.go:516-519 charges map/struct/type-param operands; a dyn operand costs 1 at run time (module doc).
        if self.get_type(sel.operand).kind in ("map", "struct", "typeparam") \
                or (self.runtime and self.get_type(sel.operand).kind == "dyn"):
            total = total.add(fixed(SELECT_AND_IDENT_COST))
        base = self.get_path(sel.operand)
        self.paths[e.id] = [*(base or []), sel.field] if base is not None else [sel.field]
        return total

    def cost_call(self, e: Any) -> Est:
        call = e.call_expr
        if call.function == "dyn" and len(call.args) == 1:  # maybeUnwrapDynCall (cost.go:590)
            arg_cost = self.cost(call.args[0])
            self.copy_sizes(e, call.args[0])
            return ONE.add(arg_cost)
        arg_costs = []
        args = []
        for a in call.args:
            arg_costs.append(self.cost(a))
            args.append(self.new_node(a))
        ref = self.refs.get(e.id)
        overloads = list(ref.overload_id) if ref is not None else []
        if not overloads:
            return self.not_ported()
        total = ZERO
        target: _Node | None = None
        if call.HasField("target"):
            total = total.add(self.cost(call.target))
            target = self.new_node(call.target)
        overloads, typed = _typed_overloads(overloads, [n.type for n in ([target] if target else []) + args])
        fn = Est(MAX, 0)
        result: Est | None = None
        sizeless = False
        for overload in overloads:
            c, size = self.function_cost(e, call.function, overload, target, args, arg_costs)
            fn = fn.union(c)
            if size is not None:
                result = size if result is None else result.union(size)
            else:
                sizeless = True
            if overload in ("index_list", "index_map") and args:
                entry = self.entry_size(args[0].expr)
                result = entry.val if entry is not None else None
                self.paths[e.id] = [*(self.get_path(args[0].expr) or []),
                                    "@items" if overload == "index_list" else "@values"]
            if result is None:
                result = self.compute_size(e)
        if sizeless and not typed and not {"index_list", "index_map"} & set(overloads):
            # cel-cpp's candidates for arguments of unknown type: the API server's checker, knowing their types, may
            # have chosen one whose result has no size estimate; its size is then unknown, not the others' union
            result = self.compute_size(e)
        self.set_size(e, result)
        return total.add(fn)

    def cost_list(self, e: Any) -> Est:
        total = ZERO
        item = Est(0 if not e.list_expr.elements else MAX, 0)
        for el in e.list_expr.elements:
            total = total.add(self.cost(el))
            item = item.union(self.size_or_unknown(el))
        self.entries[e.id] = _Entry("list", ONE, item)
        return total.add(fixed(LIST_CREATE_BASE_COST))

    def cost_map(self, e: Any) -> Est:
        total = ZERO
        empty = not e.struct_expr.entries
        key = Est(0 if empty else MAX, 0)
        val = Est(0 if empty else MAX, 0)
        for ent in e.struct_expr.entries:
            total = total.add(self.cost(ent.map_key)).add(self.cost(ent.value))
            key = key.union(self.size_or_unknown(ent.map_key))
            val = val.union(self.size_or_unknown(ent.value))
        self.entries[e.id] = _Entry("map", key, val)
        return total.add(fixed(MAP_CREATE_BASE_COST))

    def cost_struct(self, e: Any) -> Est:
        total = ZERO
        for ent in e.struct_expr.entries:
            total = total.add(self.cost(ent.value))
        return total.add(fixed(STRUCT_CREATE_BASE_COST))

    def _container(self, entry: _Entry | None, range_expr: Any) -> str:
        return entry.container if entry is not None else self.get_type(range_expr).kind

    def cost_comprehension(self, e: Any) -> Est:
        comp = e.comprehension_expr
        total = self.cost(comp.iter_range).add(self.cost(comp.accu_init))
        self.push(comp.accu_var, self.get_path(comp.accu_init), self.compute_size(comp.accu_init),
                  self.entry_size(comp.accu_init))
        entry = self.entry_size(comp.iter_range)
        container = self._container(entry, comp.iter_range)
        path = self.get_path(comp.iter_range)
        base = path if path is not None else []
        if comp.iter_var2:  # pushIterKey, pushIterValue (cost.go:397-425)
            self.push(comp.iter_var, [*base, "@indices" if container == "list" else "@keys"],
                      entry.key if entry is not None else None, None)
            self.push(comp.iter_var2, [*base, "@items" if container == "list" else "@values"],
                      entry.val if entry is not None else None, None)
        else:  # pushIterSingle (cost.go:427)
            if container == "list":
                self.push(comp.iter_var, [*base, "@items"], entry.val if entry is not None else None, None)
            else:
                self.push(comp.iter_var, [*base, "@keys"], entry.key if entry is not None else None, None)
        loop = self.cost(comp.loop_condition)
        step = self.cost(comp.loop_step)
        self.pop(comp.iter_var)
        if comp.iter_var2:
            self.pop(comp.iter_var2)
        total = total.add(self.cost(comp.result))
        self.pop(comp.accu_var)
        count = self.size_or_unknown(comp.iter_range)
        total = total.add(count.mul(step.add(loop)))
        init_kind = self.kind(comp.accu_init)
        if init_kind == "const_expr":
            self.set_size(e, self.compute_size(comp.accu_init))
        elif init_kind in ("list_expr", "struct_expr"):
            self.set_size(e, count)
            step_entry = self.entry_size(comp.loop_step)
            if step_entry is not None:
                self.entries[e.id] = step_entry
        return total

    def is_bind(self, e: Any) -> bool:
        comp = e.comprehension_expr
        cond = comp.loop_condition
        return (self.kind(comp.iter_range) == "list_expr" and not comp.iter_range.list_expr.elements
                and self.kind(cond) == "const_expr" and cond.const_expr.WhichOneof("constant_kind") == "bool_value"
                and not cond.const_expr.bool_value and comp.accu_var != "__result__")

    def cost_bind(self, e: Any) -> Est:
        comp = e.comprehension_expr
        total = self.cost(comp.iter_range).add(self.cost(comp.accu_init))
        self.push(comp.accu_var, self.get_path(comp.accu_init), self.compute_size(comp.accu_init),
                  self.entry_size(comp.accu_init))
        total = total.add(self.cost(comp.result))
        self.pop(comp.accu_var)
        self.copy_sizes(e, comp.result)
        return total

    # --- functions (cost.go:726-867; Kubernetes' library first, library/cost.go:274) -----------------------------
    def k8s_size(self, node: _Node) -> Est:
        """library/cost.go:555 sizeEstimate."""
        if node.size is not None:
            return node.size
        sz = self.size_at(node.path, node.type)
        if sz is not None:
            return sz
        self.unknown = True
        return UNKNOWN_SIZE

    def element_node(self, node: _Node) -> _Node | None:
        """library/cost.go:565 listElementNode."""
        if not node.type.params:
            return None
        return _Node([*node.path, "@items"] if node.path else None, node.type.params[0], None, None)

    def k8s_call(self, function: str, overload: str, target: _Node | None,
                 args: list[_Node]) -> tuple[Est, Est | None] | None:
        if function in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf") and target is not None:
            el = self.element_node(target)
            if el is not None:
                el_cost = ONE
                if el.type.kind in ("string", "bytes"):
                    el_cost = el_cost.add(self.k8s_size(el).factor(STRING_TRAVERSAL_COST_FACTOR))
                est = self.k8s_size(target).mul(el_cost)
                if self.runtime and not el.type.scalar() and el.type.kind not in ("string", "bytes") \
                        and target.path and self.traversal_at is not None:
                    # indexOf on a list of lists or maps: the runtime charges a traversal of every element
                    # (library/cost.go:104-109,616), above the estimate's 1 per element; the object's own is taken
                    deep = self.traversal_at(target.path)
                    if deep is not None:
                        est = Est(est.lo, max(est.hi, deep))
                return est, None
            return self.k8s_size(target).factor(STRING_TRAVERSAL_COST_FACTOR), None
        if function in ("url", "jsonpatch.escapeKey") and len(args) == 1:
            sz = self.k8s_size(args[0])
            return sz.factor(STRING_TRAVERSAL_COST_FACTOR), sz
        if function in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            sz = self.k8s_size(target)
            return sz.factor(STRING_TRAVERSAL_COST_FACTOR), sz
        if function == "replace" and target is not None and len(args) >= 2:
            return self.k8s_replace(target, args)
        if function == "split" and target is not None:
            sz = self.k8s_size(target)
            most = sz.hi
            if len(args) > 1 and args[1].expr is not None and self.kind(args[1].expr) == "const_expr" \
                    and args[1].expr.const_expr.WhichOneof("constant_kind") == "int64_value":
                most = args[1].expr.const_expr.int64_value % 2**64
            return sz.factor(2 * STRING_TRAVERSAL_COST_FACTOR), Est(0, most)
        if function == "join" and target is not None:
            size = ZERO
            count = self.k8s_size(target)
            el = self.element_node(target)
            if el is not None:
                size = count.mul(self.k8s_size(el))
            if args:
                sep = self.k8s_size(args[0])
                size = size.add(sep.mul(Est(max(count.lo - 1, 0), max(count.hi - 1, 0))))
            # the runtime charges twice the result's size * 0.1 (library/cost.go:121-125), the estimate once
            return size.factor((2 if self.runtime else 1) * STRING_TRAVERSAL_COST_FACTOR), size
        if function in ("find", "findAll") and target is not None and args:
            sz = self.k8s_size(target)
            str_cost = sz.add(ONE).factor(STRING_TRAVERSAL_COST_FACTOR)
            regex_cost = self.k8s_size(args[0]).factor(REGEX_STRING_LENGTH_COST_FACTOR)
            return str_cost.mul(regex_cost), Est(0, sz.hi)
        if function in ("cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver") and args:
            return self.k8s_size(args[0]).factor(STRING_TRAVERSAL_COST_FACTOR), None
        if function in ("sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan",
                        "compareTo", "add", "sub", "major", "minor", "patch", "getScheme", "getHostname", "getHost",
                        "getPort", "getEscapedPath", "getQuery", "format.named", "masked", "prefixLength", "family",
                        "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
                        "isGlobalUnicast"):
            return ONE, None
        return None

    def k8s_replace(self, target: _Node, args: list[_Node]) -> tuple[Est, Est | None]:
        """library/cost.go:317-367."""
        sz = self.k8s_size(target)
        to_replace = self.k8s_size(args[0])
        replace_with = self.k8s_size(args[1])
        if to_replace.lo == 0:
            count_hi, kept_hi = (sz.hi + 1 if sz.hi < MAX else sz.hi), sz.hi
        elif replace_with.hi <= to_replace.lo:
            count_hi, kept_hi = 0, sz.hi
        else:
            count_hi, kept_hi = math.ceil(sz.hi / to_replace.lo), 0
        if to_replace.hi == 0:
            count_lo, kept_lo = (sz.lo + 1 if sz.lo < MAX else sz.lo), sz.lo
        elif to_replace.hi <= replace_with.lo:
            count_lo, kept_lo = 0, sz.lo
        else:
            count_lo, kept_lo = math.ceil(sz.lo / to_replace.hi), 0
        size = Est(count_lo, min(count_hi, MAX)).mul(replace_with).add(Est(kept_lo, kept_hi))
        return sz.factor(2 * STRING_TRAVERSAL_COST_FACTOR), size

    def function_cost(self, e: Any, function: str, overload: str, target: _Node | None, args: list[_Node],
                      arg_costs: list[Est]) -> tuple[Est, Est | None]:
        arg_sum = ZERO
        for c in arg_costs:
            arg_sum = arg_sum.add(c)
        if function in _SETS and len(args) == 2:
            # cel-go ext/sets.go@v0.26.0:121-125,237-247 (an OverloadCostEstimate: it comes first, cost.go:734)
            size = self.k8s_size(args[0]).mul(self.k8s_size(args[1]))
            return size.factor(_SETS[function]).add(ONE).add(arg_sum), None
        k8s = self.k8s_call(function, overload, target, args)
        if k8s is not None:
            return k8s[0].add(arg_sum), k8s[1]
        if overload == "string_format" and target is not None:
            return self.size_or_unknown(target).factor(STRING_TRAVERSAL_COST_FACTOR).add(arg_sum), None
        if overload in ("string_to_bytes", "bytes_to_string", "strings_quote") and len(args) == 1:
            sz = self.size_or_unknown(args[0])
            result = {"string_to_bytes": Est(sz.lo, _mul(sz.hi, 4)), "bytes_to_string": Est(sz.lo // 4, sz.hi),
                      "strings_quote": Est(_add(sz.lo, 2), _add(_mul(sz.hi, 2), 2))}[overload]
            return sz.factor(STRING_TRAVERSAL_COST_FACTOR).add(arg_sum), result
        if overload in ("starts_with_string", "ends_with_string") and len(args) == 1:
            size = self.size_or_unknown(args[0])
            if self.runtime and target is not None:
                # the runtime charges the receiver's size (runtimecost.go:295-296: its args[0] is the receiver),
                # the estimate the argument's
                size = size.union(self.size_or_unknown(target))
            return size.factor(STRING_TRAVERSAL_COST_FACTOR).add(arg_sum), None
        if overload == "in_list" and len(args) == 2:
            return self.size_or_unknown(args[1]).factor(1).add(arg_sum), None
        if overload == "matches_string" and target is not None and len(args) == 1:
            str_cost = self.size_or_unknown(target).add(ONE).factor(STRING_TRAVERSAL_COST_FACTOR)
            regex_cost = self.size_or_unknown(args[0]).factor(REGEX_STRING_LENGTH_COST_FACTOR)
            return str_cost.mul(regex_cost).add(arg_sum), None
        if overload == "contains_string" and target is not None and len(args) == 1:
            str_cost = self.size_or_unknown(target).factor(STRING_TRAVERSAL_COST_FACTOR)
            sub_cost = self.size_or_unknown(args[0]).factor(STRING_TRAVERSAL_COST_FACTOR)
            return str_cost.mul(sub_cost).add(arg_sum), None
        if overload in ("logical_or", "logical_and"):
            lhs, rhs = arg_costs[0], arg_costs[1]
            return Est(lhs.lo, lhs.add(rhs).hi), None
        if overload == "conditional":
            size = self.size_or_unknown(args[1]).union(self.size_or_unknown(args[2]))
            a, b = self.entry_size(args[1].expr), self.entry_size(args[2].expr)
            if a is not None:
                u = a.union(b)
                if u is not None:
                    self.entries[e.id] = u
            return arg_costs[0].add(arg_costs[1].union(arg_costs[2])), size
        if overload in ("add_string", "add_bytes", "add_list") and len(args) == 2:
            size = self.size_or_unknown(args[0]).add(self.size_or_unknown(args[1]))
            a, b = self.entry_size(args[0].expr), self.entry_size(args[1].expr)
            if a is not None:
                u = a.union(b)
                if u is not None:
                    self.entries[e.id] = u
            if overload == "add_list":
                return ONE.add(arg_sum), size
            return size.factor(STRING_TRAVERSAL_COST_FACTOR).add(arg_sum), size
        if overload in _SIZED_COMPARISONS:
            lhs, rhs = self.size_or_unknown(args[0]), self.size_or_unknown(args[1])
            smallest = min(lhs.hi, rhs.hi)
            return Est(1 if smallest > 0 else 0, smallest).factor(STRING_TRAVERSAL_COST_FACTOR).add(arg_sum), None
        return ONE.add(arg_sum), None


_TYPE_TOKENS = {"int64": "int", "uint64": "uint", "double": "double", "string": "string", "bytes": "bytes",
                "bool": "bool", "duration": "duration", "timestamp": "timestamp", "list": "list", "map": "map"}


def _typed_overloads(overloads: list[str], kinds: list[CelType]) -> tuple[list[str], bool]:
    """The overloads the API server's checker could choose given the arguments' types (cel-cpp, with `self` dyn,
    lists every candidate: `string(self.n)` gets int64_to_string, bytes_to_string, ...). An overload id names its
    argument types (`add_string`, `less_equals_int64`, `size_list`; `int64_to_string`: before `_to_`); one naming a
    type no argument has is dropped. (overloads, True) where every argument's type is known, else all of them."""
    known = {k.kind for k in kinds}
    if len(overloads) < 2 or not kinds or known & {"dyn", "typeparam", "wrapper", "opaque", "error"}:
        return overloads, False
    kept = []
    for overload in overloads:
        words = overload.split("_to_")[0].split("_") if "_to_" in overload else overload.split("_")
        tokens = {_TYPE_TOKENS[w] for w in words if w in _TYPE_TOKENS}
        if tokens <= known:
            kept.append(overload)
    return (kept, True) if kept else (overloads, False)


_SETS = {"sets.contains": 1.0, "sets.intersects": 1.0, "sets.equivalent": 2.0}
_SIZED_COMPARISONS = frozenset({
    "less_string", "greater_string", "less_equals_string", "greater_equals_string", "less_bytes", "greater_bytes",
    "less_equals_bytes", "greater_equals_bytes", "equals", "not_equals"})


def estimate(serialized: bytes | Any, size_at: SizeFn, type_at: TypeFn, presence_test_cost: int = 0,
             traversal_at: Callable[[list[str]], int | None] | None = None, runtime: bool = True) -> Cost:
    """The cost range of a compiled expression (`Expression.serialize()`, or the CheckedExpr decoded from it);
    runtime=False: cel-go's estimate exactly, without the runtime's higher charges (Coster)."""
    checked = checked_expr(serialized) if isinstance(serialized, bytes) else serialized
    coster = Coster(checked, size_at, type_at, presence_test_cost, traversal_at, runtime)
    est = coster.cost(checked.expr)
    return Cost(est.lo, est.hi, coster.unknown and est.hi >= UNKNOWN_FROM)


# --- sizes and types of an object's paths -------------------------------------------------------------------------

def value_size(v: Any) -> int:
    """The size cel-go's runtime gives a value (runtimecost.go:353 actualSize): characters of a string, bytes,
    entries of a list or map; 1 for anything else."""
    if isinstance(v, (str, bytes, list, dict)):
        return len(v)
    return 1


def traversal_cost(v: Any) -> int:
    """Kubernetes' traversalCost (library/cost.go@v0.36.0:616): what its list functions charge per element."""
    if isinstance(v, (str, bytes)):
        return int(len(v) * STRING_TRAVERSAL_COST_FACTOR)
    if isinstance(v, list):
        return sum(traversal_cost(x) for x in v)
    if isinstance(v, dict):
        return sum(traversal_cost(k) + traversal_cost(x) for k, x in v.items())
    return 1


def _step(values: list[Any], part: str) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if part == "@items" and isinstance(v, list):
            out += v
        elif part == "@values" and isinstance(v, dict):
            out += list(v.values())
        elif part == "@keys" and isinstance(v, dict):
            out += list(v.keys())
        elif part == "@indices" and isinstance(v, list):
            out += list(range(len(v)))
        elif isinstance(v, dict) and part in v:
            out.append(v[part])
    return out


@dataclass
class Activation:
    """The values and schemas of a rule's variables (`self`, `oldSelf`), and the size and type at a path."""

    values: dict[str, Any]
    schemas: dict[str, Any]
    _sizes: dict[tuple[str, ...], Est | None] = field(default_factory=dict)
    _traversals: dict[tuple[str, ...], int | None] = field(default_factory=dict)

    def size_at(self, path: list[str] | None, _type: CelType | None = None) -> Est | None:
        if not path:
            return None
        key = tuple(path)
        if key in self._sizes:
            return self._sizes[key]
        out: Est | None = None
        if path[0] in self.values:
            # [0, largest]: the estimator's range (cel-go's test estimator's shape); no value there: nothing runs
            out = Est(0, max((value_size(v) for v in self.values_at(path)), default=0))
        self._sizes[key] = out
        return out

    def values_at(self, path: list[str]) -> list[Any]:
        vals = [self.values[path[0]]] if path and path[0] in self.values else []
        for part in path[1:]:
            vals = _step(vals, part)
        return vals

    def traversal_at(self, path: list[str]) -> int | None:
        """The largest traversal_cost of a value at the path (None: none there)."""
        key = tuple(path)
        if key not in self._traversals:
            vals = self.values_at(path)
            self._traversals[key] = max(traversal_cost(v) for v in vals) if vals else None
        return self._traversals[key]

    def asked(self) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]:
        """The paths size_at and traversal_at were asked for, in order: all a bound depends on besides the AST and
        the schemas."""
        return tuple(self._sizes), tuple(self._traversals)

    def answers(self, asked: tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]) -> tuple[Any, ...]:
        """What size_at and traversal_at answer here for those paths."""
        return (*(self.size_at(list(p)) for p in asked[0]), None, *(self.traversal_at(list(p)) for p in asked[1]))

    def type_at(self, path: list[str]) -> CelType | None:
        if not path or path[0] not in self.schemas:
            return None
        node: Any = self.schemas[path[0]]
        for part in path[1:]:
            if not isinstance(node, dict):
                return None
            if part == "@items":
                node = node.get("items")
            elif part == "@values":
                node = node.get("additionalProperties")
            elif part == "@keys":
                node = {"type": "string"}
            elif part == "@indices":
                node = {"type": "integer"}
            else:
                props = node.get("properties") or {}
                extra = node.get("additionalProperties")
                node = props.get(part, extra if isinstance(extra, dict) else None)
        return schema_type(node) if isinstance(node, dict) else None
