"""strands-durable: durable Strands Agents workflows on Redis Streams, from Python.

Submit a workflow spec to a fleet and wait for it:

    from pathlib import Path
    from strands_durable import Client

    with Client("http://127.0.0.1:8080", token="...") as client:
        submitted = client.submit(Path("examples/chain-research.yaml"),
                                  variables={"topic": "tides"})
        done = client.wait(submitted.session_id, timeout=120)

Build a spec as objects, check it as `durable validate` does, and write it as YAML:

    from strands_durable import (AgentSpec, AgentStep, ChainConfig, Pattern, Runtime,
                                 Spec, dump_spec, validate_spec)

    spec = Spec(version=0, name="hello", runtime=Runtime(provider="scripted"),
                agents={"writer": AgentSpec(prompt="Say hello.")},
                pattern=Pattern(type="chain",
                                config=ChainConfig(steps=[AgentStep(agent="writer")])))
    assert validate_spec(spec) == []
    print(dump_spec(spec))

Every name here is imported on first use (PEP 562): every worker process imports this
package, and it must not pay for the client, httpx or the spec models it does not use.
"""

# No import at module level, not even `typing`: `import strands_durable` stays free.
TYPE_CHECKING = False

# Each public name and the module that defines it.
_MODEL = "strands_durable.spec.model"
_STEPS = "strands_durable.spec.steps"
_TOOLS = "strands_durable.spec.tools"
_SCRIPT = "strands_durable.spec.script"
_ERRORS = "strands_durable.errors"
_CLIENT_ERRORS = "strands_durable.client.errors"
_PATTERNS = "strands_durable.patterns."
_EXPORTS: dict[str, str] = {
    # the clients
    "AsyncClient": "strands_durable.client.aio",
    "Client": "strands_durable.client.sync",
    # errors: the root, its kinds, and the classes the client raises (each one of them)
    **dict.fromkeys(("DurableError", "InvalidInput", "NotFound", "Conflict", "Unavailable",
                     "SpecError"), _ERRORS),
    **dict.fromkeys(("ClientError", "ApiInvalidInput", "Unauthorized", "Forbidden",
                     "PayloadTooLarge",
                     "ApiNotFound", "ApiConflict", "ApiUnavailable", "RateLimited",
                     "ServerError", "ConnectionFailed", "WaitTimeout"), _CLIENT_ERRORS),
    # specs as objects: the whole spec and what it is made of
    **dict.fromkeys(("Spec", "Runtime", "Budgets", "FailurePolicy", "Inference", "AgentSpec",
                     "Pattern", "Inputs", "InputVarSpec", "Outputs", "Artifact"), _MODEL),
    **dict.fromkeys(("AgentStep", "HitlStep", "HitlGate"), _STEPS),
    **dict.fromkeys(("ToolsConfig", "PythonTool", "McpServer", "HttpExecutor"), _TOOLS),
    **dict.fromkeys(("ScriptConfig", "ScriptRule", "ScriptToolCall"), _SCRIPT),
    # each pattern's `pattern.config` and the parts it is built from
    "ChainConfig": _PATTERNS + "chain",
    **dict.fromkeys(("WorkflowConfig", "WorkflowTask"), _PATTERNS + "workflow"),
    **dict.fromkeys(("RoutingConfig", "RouterConfig", "Route"), _PATTERNS + "routing"),
    **dict.fromkeys(("ParallelConfig", "Branch"), _PATTERNS + "parallel"),
    **dict.fromkeys(("EvaluatorOptimizerConfig", "EvaluatorConfig", "AcceptConfig"),
                    _PATTERNS + "evaluator_optimizer"),
    **dict.fromkeys(("OrchestratorWorkersConfig", "OrchestratorConfig", "WorkerTemplate"),
                    _PATTERNS + "orchestrator_workers"),
    **dict.fromkeys(("GraphConfig", "AgentNode", "Edge", "Choice"), _PATTERNS + "graph"),
    # functions
    "load_spec": "strands_durable.spec.public",
    "validate_spec": "strands_durable.spec.public",
    "dump_spec": "strands_durable.spec.dump",
    "current_tool_call": "strands_durable.worker.tools.context",
}

# Pinned by tests/unit/test_public_surface.py; each name but __version__ is in _EXPORTS.
__all__ = [
    "AcceptConfig", "AgentNode", "AgentSpec", "AgentStep", "ApiConflict", "ApiInvalidInput",
    "ApiNotFound", "ApiUnavailable", "Artifact", "AsyncClient", "Branch", "Budgets",
    "ChainConfig", "Choice", "Client", "ClientError", "Conflict", "ConnectionFailed",
    "DurableError", "Edge", "EvaluatorConfig", "EvaluatorOptimizerConfig", "FailurePolicy",
    "Forbidden", "GraphConfig", "HitlGate", "HitlStep", "HttpExecutor", "Inference", "InputVarSpec",
    "Inputs", "InvalidInput", "McpServer", "NotFound", "OrchestratorConfig",
    "OrchestratorWorkersConfig", "Outputs", "ParallelConfig", "Pattern", "PayloadTooLarge",
    "PythonTool", "RateLimited", "Route", "RouterConfig", "RoutingConfig", "Runtime",
    "ScriptConfig", "ScriptRule", "ScriptToolCall", "ServerError", "Spec", "SpecError",
    "ToolsConfig", "Unauthorized", "Unavailable", "WaitTimeout", "WorkerTemplate",
    "WorkflowConfig", "WorkflowTask", "__version__", "current_tool_call", "dump_spec",
    "load_spec", "validate_spec"
]

if TYPE_CHECKING:  # for type checkers and IDEs only; at run time __getattr__ imports
    from strands_durable.client.aio import AsyncClient
    from strands_durable.client.errors import (
        ApiConflict,
        ApiInvalidInput,
        ApiNotFound,
        ApiUnavailable,
        ClientError,
        ConnectionFailed,
        Forbidden,
        PayloadTooLarge,
        RateLimited,
        ServerError,
        Unauthorized,
        WaitTimeout,
    )
    from strands_durable.client.sync import Client
    from strands_durable.errors import (
        Conflict,
        DurableError,
        InvalidInput,
        NotFound,
        SpecError,
        Unavailable,
    )
    from strands_durable.patterns.chain import ChainConfig
    from strands_durable.patterns.evaluator_optimizer import (
        AcceptConfig,
        EvaluatorConfig,
        EvaluatorOptimizerConfig,
    )
    from strands_durable.patterns.graph import AgentNode, Choice, Edge, GraphConfig
    from strands_durable.patterns.orchestrator_workers import (
        OrchestratorConfig,
        OrchestratorWorkersConfig,
        WorkerTemplate,
    )
    from strands_durable.patterns.parallel import Branch, ParallelConfig
    from strands_durable.patterns.routing import Route, RouterConfig, RoutingConfig
    from strands_durable.patterns.workflow import WorkflowConfig, WorkflowTask
    from strands_durable.spec.dump import dump_spec
    from strands_durable.spec.model import (
        AgentSpec,
        Artifact,
        Budgets,
        FailurePolicy,
        Inference,
        Inputs,
        InputVarSpec,
        Outputs,
        Pattern,
        Runtime,
        Spec,
    )
    from strands_durable.spec.public import load_spec, validate_spec
    from strands_durable.spec.script import ScriptConfig, ScriptRule, ScriptToolCall
    from strands_durable.spec.steps import AgentStep, HitlGate, HitlStep
    from strands_durable.spec.tools import HttpExecutor, McpServer, PythonTool, ToolsConfig
    from strands_durable.worker.tools.context import current_tool_call

    __version__: str


def __getattr__(name: str) -> object:
    """Import a public name on first use and keep it (later lookups skip this)."""
    if name == "__version__":
        value: object = _version()
    elif name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'strands_durable' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _version() -> str:
    """The installed distribution's version; a source tree that was never installed
    has none, and says so rather than guessing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("strands-durable")
    except PackageNotFoundError:
        return "0+unknown"
