"""The public surface, `strands_durable/__init__.py` (core/__init__.py): exactly the names
users import, each resolving to its one definition and documented, all imported on first
use so that `import strands_durable` (every worker process does it) costs nothing."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

import strands_durable

# The list users may rely on. Adding a name is a decision: add it here too.
PUBLIC = [
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
    "load_spec", "validate_spec",
]


def _in_fresh_python(code: str) -> dict[str, object]:
    """What `code` prints as JSON, run in a new interpreter (this one has imported all)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_all_is_pinned_and_sorted() -> None:
    assert strands_durable.__all__ == PUBLIC
    assert sorted(PUBLIC) == PUBLIC


def test_each_name_comes_from_the_module_that_defines_it() -> None:
    exports: dict[str, str] = strands_durable._EXPORTS
    assert sorted([*exports, "__version__"]) == PUBLIC
    for name, module in exports.items():
        value = getattr(strands_durable, name)
        assert value.__module__ == module, name  # the definition, not a re-export
        assert value.__name__ == name


def test_every_public_name_resolves_and_is_listed_by_dir() -> None:
    for name in PUBLIC:
        assert getattr(strands_durable, name) is not None, name
    assert set(PUBLIC) <= set(dir(strands_durable))
    with pytest.raises(AttributeError, match="no attribute 'Clinet'"):
        strands_durable.Clinet  # noqa: B018


def test_version_is_the_installed_distribution() -> None:
    from importlib.metadata import version

    assert strands_durable.__version__ == version("strands-durable")


def test_importing_the_package_imports_nothing_else() -> None:
    found = _in_fresh_python(
        "import json, sys; import strands_durable; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.startswith(('strands_durable', 'httpx', 'pydantic', 'redis', 'strands')))))")
    assert found == ["strands_durable"]


def test_building_specs_imports_no_client_worker_or_network_library() -> None:
    found = _in_fresh_python(
        "import json, sys; from strands_durable import Spec, dump_spec, validate_spec; "
        "print(json.dumps(sorted({m.split('.')[0] if not m.startswith('strands_durable.') "
        "else m.split('.')[1] for m in sys.modules})))")
    assert isinstance(found, list)
    assert {"client", "worker", "api", "httpx", "redis", "strands"}.isdisjoint(found)
    assert {"spec", "patterns"} <= set(found)


def test_every_public_name_has_its_own_docstring() -> None:
    missing = set()
    for name in PUBLIC:
        if name == "__version__":
            continue
        value = getattr(strands_durable, name)
        # Its own: inspect.getdoc would hand a class its base class's text.
        if not (value.__doc__ or "").strip():
            missing.add(name)
    assert not missing, sorted(missing)
    assert inspect.getdoc(strands_durable)


def test_the_python_reference_documents_every_public_name() -> None:
    # docs/reference/generate.py writes it; test_docs_site.py checks it is up to date.
    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "python.md")
    headings = {line.split("`")[1].split("(")[0] for line in page.read_text().splitlines()
                if line.startswith("### `")}
    assert headings == set(PUBLIC) - {"__version__"}
