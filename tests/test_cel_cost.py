"""The CEL cost bound of the schema stage (policies/schema/cel_cost.py, cel_ast.py).

Ported upstream cases: google/cel-go checker/cost_test.go@v0.26.0 TestCost (lines 33-800), every case whose cost
depends on sizes and types only (no protobuf message type, no custom overload estimator), with the test's
estimator (cost_test.go:801: a hint gives the size [0, hint] at a path, bytes without a hint [0, 12]); the estimate
must be the same [min, max]. Variables of a message type there (TestAllTypes) are maps here where the case only
selects and iterates (a select on a map costs the same, cost.go:516-519).
"""
from __future__ import annotations

from typing import Any

import pytest
import yaml

from policies.kube.objects import Manifest
from policies.schema import BuiltinValidator, crd_rules
from policies.schema import cel, cel_ast, cel_cost
from policies.schema.cel_cost import Est

MAX = 2**64 - 1


def _env(variables: dict[str, Any]) -> Any:
    from cel_expr_python import cel as celpy
    from cel_expr_python.ext import ext_bindings, ext_encoders, ext_math, ext_optional, ext_strings

    return celpy.NewEnv(variables=variables, extensions=[
        ext_strings.ExtStrings(), ext_math.ExtMath(), ext_optional.ExtOptional(), ext_bindings.ExtBindings(),
        ext_encoders.ExtEncoders()])


def _types() -> dict[str, Any]:
    from cel_expr_python import cel as celpy

    T = celpy.Type
    return {"int": T.INT, "bool": T.BOOL, "string": T.STRING, "bytes": T.BYTES, "timestamp": T.TIMESTAMP,
            "duration": T.DURATION, "list(int)": T.List(T.INT), "list(string)": T.List(T.STRING),
            "list(dyn)": T.List(T.DYN), "list(list(dyn))": T.List(T.List(T.DYN)),
            "map(string,string)": T.Map(T.STRING, T.STRING), "map(string,dyn)": T.Map(T.STRING, T.DYN),
            "map(string,map(string,dyn))": T.Map(T.STRING, T.Map(T.STRING, T.DYN))}


def estimate(expr: str, variables: dict[str, str] | None = None, hints: dict[str, int] | None = None,
             presence: int = 1) -> tuple[int, int]:
    types = _types()
    env = _env({k: types[v] for k, v in (variables or {}).items()})
    hints = hints or {}
    var_types = variables or {}

    def size_at(path: list[str]) -> Est | None:
        key = ".".join(path)
        if key in hints:
            return Est(0, hints[key])
        if len(path) == 1 and var_types.get(path[0]) == "bytes":
            return Est(0, 12)
        return None

    cost = cel_cost.estimate(env.compile(expr).serialize(), size_at, lambda path: None, presence)
    return cost.min, cost.max


# (name, expr, vars, hints, presence test cost, wanted min, wanted max): cost_test.go@v0.26.0, in its order.
CASES = [
    ("const", '"Hello World!"', {}, {}, 1, 0, 0),
    ("identity", "input", {"input": "list(int)"}, {}, 1, 1, 1),
    ("select: map", "input['key']", {"input": "map(string,string)"}, {}, 1, 2, 2),
    ("select: non-proto field test has() cost", "has(input.testAttr.nestedAttr)",
     {"input": "map(string,map(string,dyn))"}, {}, 1, 3, 3),
    ("select: non-proto field test no has() cost", "has(input.testAttr.nestedAttr)",
     {"input": "map(string,map(string,dyn))"}, {}, 0, 2, 2),
    ("create list", "[1, 2, 3]", {}, {}, 1, 10, 10),
    ("create map", '{"a": 1, "b": 2, "c": 3}', {}, {}, 1, 30, 30),
    ("all comprehension", "input.all(x, true)", {"input": "list(dyn)"}, {"input": 100}, 1, 2, 302),
    ("nested all comprehension", "input.all(x, x.all(y, true))", {"input": "list(list(dyn))"},
     {"input": 50, "input.@items": 10}, 1, 2, 1752),
    ("all comprehension on literal", "[1, 2, 3].all(x, true)", {}, {}, 1, 20, 20),
    ("variable cost function", "input.matches('[0-9]')", {"input": "string"}, {"input": 500}, 1, 3, 103),
    ("variable cost function with constant", "'123'.matches('[0-9]')", {}, {}, 1, 2, 2),
    ("or", "true || false", {}, {}, 1, 0, 0),
    ("or accumulated branch cost", "a || b || c || d", {v: "bool" for v in "abcd"}, {}, 1, 1, 4),
    ("and", "true && false", {}, {}, 1, 0, 0),
    ("and accumulated branch cost", "a && b && c && d", {v: "bool" for v in "abcd"}, {}, 1, 1, 4),
    ("lt", "1 < 2", {}, {}, 1, 1, 1),
    ("lte", "1 <= 2", {}, {}, 1, 1, 1),
    ("eq", "1 == 2", {}, {}, 1, 1, 1),
    ("gt", "2 > 1", {}, {}, 1, 1, 1),
    ("gte", "2 >= 1", {}, {}, 1, 1, 1),
    ("in", "2 in [1, 2, 3]", {}, {}, 1, 13, 13),
    ("plus", "1 + 1", {}, {}, 1, 1, 1),
    ("minus", "1 - 1", {}, {}, 1, 1, 1),
    ("/", "1 / 1", {}, {}, 1, 1, 1),
    ("*", "1 * 1", {}, {}, 1, 1, 1),
    ("%", "1 % 1", {}, {}, 1, 1, 1),
    ("ternary", "true ? 1 : 2", {}, {}, 1, 0, 0),
    ("string size", 'size("123")', {}, {}, 1, 1, 1),
    ("bytes size", 'size(b"123")', {}, {}, 1, 1, 1),
    ("bytes to string conversion", "string(input)", {"input": "bytes"}, {"input": 500}, 1, 1, 51),
    ("bytes to string conversion equality", "string(input) == string(input)", {"input": "bytes"},
     {"input": 500}, 1, 3, 152),
    ("string to bytes conversion", "bytes(input)", {"input": "string"}, {"input": 500}, 1, 1, 51),
    ("string to bytes conversion equality", "bytes(input) == bytes(input)", {"input": "string"},
     {"input": 500}, 1, 3, 302),
    ("int to string conversion", "string(1)", {}, {}, 1, 1, 1),
    ("contains", "input.contains(arg1)", {"input": "string", "arg1": "string"}, {"input": 500, "arg1": 500}, 1,
     2, 2502),
    ("matches", "input.matches('\\\\d+a\\\\d+b')", {"input": "string"}, {"input": 500}, 1, 3, 103),
    ("startsWith", "input.startsWith(arg1)", {"input": "string", "arg1": "string"}, {"arg1": 500}, 1, 2, 52),
    ("endsWith", "input.endsWith(arg1)", {"input": "string", "arg1": "string"}, {"arg1": 500}, 1, 2, 52),
    ("size receiver", "input.size()", {"input": "string"}, {}, 1, 2, 2),
    ("size", "size(input)", {"input": "string"}, {}, 1, 2, 2),
    ("ternary eval", "(x > 2 ? input1 : input2).all(y, true)",
     {"x": "int", "input1": "list(dyn)", "input2": "list(dyn)"}, {"input1": 1, "input2": 1}, 1, 4, 7),
    ("comprehension over map", "input.all(k, input[k].single_int32 > 3)", {"input": "map(string,map(string,dyn))"},
     {"input": 10}, 1, 2, 82),
    ("comprehension over nested map of maps", "input.all(k, input[k].all(x, true))",
     {"input": "map(string,map(string,dyn))"}, {"input": 5, "input.@values": 10}, 1, 2, 187),
    ("string size of map keys", "input.all(k, k.contains(k))", {"input": "map(string,map(string,dyn))"},
     {"input": 5, "input.@keys": 10}, 1, 2, 32),
    ("comprehension variable shadowing", "input.all(k, input[k].all(k, true) && k.contains(k))",
     {"input": "map(string,map(string,dyn))"}, {"input": 2, "input.@values": 2, "input.@keys": 5}, 1, 2, 34),
    ("list concat", "(list1 + list2).all(x, true)", {"list1": "list(int)", "list2": "list(int)"},
     {"list1": 10, "list2": 10}, 1, 4, 64),
    ("str concat", '"abcdefg".contains(str1 + str2)', {"str1": "string", "str2": "string"},
     {"str1": 10, "str2": 10}, 1, 2, 6),
    ("list size comparison", "list1.size() == list2.size()", {"list1": "list(int)", "list2": "list(int)"}, {}, 1,
     5, 5),
    ("list size from ternary", "x > y ? list1.size() : list2.size()",
     {"x": "int", "y": "int", "list1": "list(int)", "list2": "list(int)"}, {}, 1, 5, 5),
    ("list size from concat", "([x, y] + list1 + list2).size()",
     {"x": "int", "y": "int", "list1": "list(int)", "list2": "list(int)"}, {"list1": 10, "list2": 20}, 1, 17, 17),
    ("list cost tracking through comprehension", "[list1, list2].exists(l, l.exists(v, v.startsWith('hi')))",
     {"list1": "list(string)", "list2": "list(string)"},
     {"list1": 10, "list1.@items": 64, "list2": 20, "list2.@items": 128}, 1, 21, 265),
    ("str endsWith equality",
     'str1.endsWith("abcdefghijklmnopqrstuvwxyz") == str2.endsWith("abcdefghijklmnopqrstuvwxyz")',
     {"str1": "string", "str2": "string"}, {}, 1, 9, 9),
    ("nested subexpression operators", "((5 != 6) == (1 == 2)) == ((3 <= 4) == (9 != 9))", {}, {}, 1, 7, 7),
    ("str size estimate", "string(timestamp1) == string(timestamp2)",
     {"timestamp1": "timestamp", "timestamp2": "timestamp"}, {}, 1, 5, 1844674407370955268),
    ("timestamp equality check", "timestamp1 == timestamp2", {"timestamp1": "timestamp", "timestamp2": "timestamp"},
     {}, 1, 3, 3),
    ("duration inequality check", "duration1 != duration2", {"duration1": "duration", "duration2": "duration"}, {},
     1, 3, 3),
    (".filter list literal", "[1,2,3,4,5].filter(x, x % 2 == 0)", {}, {}, 1, 41, 101),
    (".map list literal", "[1,2,3,4,5].map(x, x)", {}, {}, 1, 86, 86),
    (".map.filter list literal", "[1,2,3,4,5].map(x, x).filter(x, x % 2 == 0)", {}, {}, 1, 117, 177),
    (".map.exists list literal", "[1,2,3,4,5].map(x, x).exists(x, x == 5) == true", {}, {}, 1, 108, 118),
    (".map.map list literal", "[1,2,3,4,5].map(x, x).map(x, x)", {}, {}, 1, 162, 162),
    (".map list literal selection", "[1,2,3,4,5].map(x, x)[4]", {}, {}, 1, 87, 87),
    ("nested array selection", "[[1,2],[1,2],[1,2],[1,2],[1,2]][4]", {}, {}, 1, 61, 61),
    ("nested map selection", "{'a': [1,2], 'b': [1,2], 'c': [1,2], 'd': [1,2], 'e': [1,2]}.b", {}, {}, 1, 81, 81),
    ("comprehension on nested list", "[[1, 1], [2, 2], [3, 3], [4, 4], [5, 5]].all(y, y.all(y, y == 1))", {}, {}, 1,
     76, 136),
    ("comprehension on transformed nested list", "[1,2,3,4,5].map(x, [x, x]).all(y, y.all(y, y == 1))", {}, {}, 1,
     157, 217),
    ("comprehension on nested literal list",
     "[\"a\", \"ab\", \"abc\", \"abcd\", \"abcde\"].map(x, [x, x]).all(y, y.all(y, y.startsWith('a')))", {}, {}, 1,
     157, 217),
    ("comprehension on nested variable list", "input.map(x, [x, x]).all(y, y.all(y, y.startsWith('a')))",
     {"input": "list(string)"}, {"input": 5, "input.@items": 10}, 1, 13, 208),
    ("comprehension chaining with concat", "[1,2,3,4,5].map(x, x).map(x, x) + [1]", {}, {}, 1, 173, 173),
    ("nested comprehension", "[1,2,3].all(i, i in [1,2,3].map(j, j + j))", {}, {}, 1, 20, 230),
    ("nested dyn comprehension", "dyn([1,2,3]).all(i, i in dyn([1,2,3]).map(j, j + j))", {}, {}, 1, 21, 234),
    ("literal map access", "{'hello': 'hi'}['hello'] != {'hello': 'bye'}['hello']", {}, {}, 1, 63, 63),
    ("literal list access", "['hello', 'hi'][0] != ['hello', 'bye'][1]", {}, {}, 1, 23, 23),
]


@pytest.mark.parametrize("name,expr,variables,hints,presence,lo,hi", CASES, ids=[c[0] for c in CASES])
def test_cel_go_cost_cases(name, expr, variables, hints, presence, lo, hi):
    assert estimate(expr, variables, hints, presence) == (lo, hi)
