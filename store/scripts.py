"""The Lua script library: each script (store/lua/, prefixed with the shared helpers)
is called through a typed async method with keyword-only KEYS and ARGV contracts.

The contract of each script lives in Python beside its method, as two frozen
dataclasses whose fields are the keys and the arguments IN ORDER (a nested `IndexKeys`
or a tuple field stands for its members, in order): script_step.py holds the step
path's scripts, script_gate.py gate and take, script_operator.py the operators', the
locks' and the fleet's, script_capacity.py the provider capacity's, script_access.py the
tenancy's. Each script binds them to named locals at its top, in that order
(script_library.binding_header, checked by tests/unit/test_script_contracts.py), and
each method returns its reply decoded.
"""

from __future__ import annotations

from redis.asyncio import Redis

from strands_durable.store.script_access import AccessScripts
from strands_durable.store.script_capacity import CapacityScripts
from strands_durable.store.script_gate import GateScripts
from strands_durable.store.script_library import IndexKeys, flat, script_source
from strands_durable.store.script_operator import OperatorScripts
from strands_durable.store.script_step import StepScripts
from strands_durable.store.script_transfer import TransferScripts

__all__ = ["IndexKeys", "Scripts", "flat", "script_source"]


class Scripts(StepScripts, GateScripts, OperatorScripts, CapacityScripts, TransferScripts,
              AccessScripts):
    @classmethod
    def register(cls, redis: Redis) -> Scripts:
        return cls(redis)
