"""Run argocd/health/*.lua and argocd/actions/*.lua as Argo CD v3.5.1 does, in a real Lua 5.1 (lupa.lua51).

What Argo CD does (util/lua/lua.go at v3.5.1, runLuaWithResourceActionParameters, decodeValue): a fresh gopher-lua
state (Lua 5.1) per call; for a script from argocd-cm (useOpenLibs unset) only the package, base and table libraries
and a safe `os` (time, date) are opened, so there is no `string`, `math`, `io` or `debug`, and strings have no methods;
the object, decoded from JSON (maps to tables, lists to 1-based arrays), is the global `obj`; the chunk's return value
is the result, a health table ({status, message}) or the modified object. Differences from gopher-lua that remain:
lupa is the C Lua 5.1 (the same language; its error texts differ), and `os` here is the C one narrowed to time and
date."""
from __future__ import annotations

from typing import Any

import lupa.lua51 as lua51

# The base library functions gopher-lua's OpenBase registers (baselib.go), which Argo CD opens for every script.
_BASE = ("assert", "error", "getmetatable", "ipairs", "next", "pairs", "pcall", "print", "rawequal", "rawget",
         "rawset", "select", "setmetatable", "tonumber", "tostring", "type", "unpack", "xpcall", "_VERSION")

_SANDBOX = """
local base, chunk, obj = ...
local env = {}
for _, name in ipairs(base) do env[name] = _G[name] end
env.table = {concat = table.concat, insert = table.insert, remove = table.remove, sort = table.sort,
             maxn = table.maxn, getn = table.getn}
env.os = {time = os.time, date = os.date}
env._G = env
env.obj = obj
setfenv(chunk, env)
local string_mt = debug.getmetatable("")
debug.setmetatable("", nil)  -- no string methods: OpenString is not called
local ok, result = pcall(chunk)
debug.setmetatable("", string_mt)
if not ok then error(result, 0) end
return result
"""


class Lua:
    """One Lua 5.1 state per script run, as Argo CD makes one per evaluation."""

    def __init__(self) -> None:
        self.rt = lua51.LuaRuntime(unpack_returned_tuples=True, register_eval=False)
        assert self.rt.eval("_VERSION") == "Lua 5.1"

    def table(self, value: Any) -> Any:
        """A Python value decoded from YAML as Argo CD's decodeValue decodes JSON: dicts to tables, lists to arrays."""
        if isinstance(value, dict):
            t = self.rt.table()
            for k, v in value.items():
                t[str(k)] = self.table(v)
            return t
        if isinstance(value, list):
            t = self.rt.table()
            for i, v in enumerate(value, 1):
                t[i] = self.table(v)
            return t
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return value
        if isinstance(value, (int, float)):
            return float(value) if isinstance(value, float) else value
        return str(value)  # a timestamp YAML read as a datetime: JSON has it as a string

    def run(self, script: str, obj: dict[str, Any]) -> Any:
        chunk = self.rt.execute("return function(src) return loadstring(src, '=script') end")(script)
        if not chunk or isinstance(chunk, tuple):
            raise SyntaxError(f"the script does not compile: {chunk}")
        base = self.table(list(_BASE))
        return self.rt.execute(_SANDBOX, base, chunk, self.table(obj))


def from_lua(value: Any) -> Any:
    """A returned table as Argo CD's luajson encodes it: 1..n keys an array, an empty table an empty array."""
    if lua51.lua_type(value) != "table":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value
    keys = list(value.keys())
    if keys and all(isinstance(k, int) for k in keys) and sorted(keys) == list(range(1, len(keys) + 1)):
        return [from_lua(value[i]) for i in range(1, len(keys) + 1)]
    if not keys:
        return []
    return {str(k): from_lua(value[k]) for k in keys}


def health(script: str, obj: dict[str, Any]) -> dict[str, Any]:
    result = Lua().run(script, obj)
    return from_lua(result)


def action(script: str, obj: dict[str, Any]) -> Any:
    return from_lua(Lua().run(script, obj))
