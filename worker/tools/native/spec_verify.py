"""spec_verify: validate a workflow spec (YAML or JSON text) and report, as strands-cli's
tool does, with this project's own loader: schema, models, references, templates and
the fleet's tool policy, under the same size and shape limits as any submitted spec."""

from __future__ import annotations

import json
from typing import Any

from strands.types.tools import ToolResult, ToolUse

from strands_durable.errors import DurableError
from strands_durable.settings import current_limits
from strands_durable.spec.loader import load_spec_data
from strands_durable.spec.reading import check_spec_size, parse_yaml
from strands_durable.worker.tools.native._common import ok, run_tool, str_arg

TOOL_SPEC = {
    "name": "spec_verify",
    "description": "Validate a workflow spec and return structured validation report",
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "spec_content": {
                    "type": "string",
                    "description": "YAML or JSON workflow spec content to validate",
                },
                "check_capability": {
                    "type": "boolean",
                    "default": True,
                    "description": "Also check MVP capability compatibility (default: true)",
                },
            },
            "required": ["spec_content"],
        }
    },
}


def _verify(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    text = str_arg(args, "spec_content")
    limits = current_limits()
    try:
        check_spec_size(len(text.encode("utf-8")), "spec_content", limits)
        data = parse_yaml(text, "spec_content", limits)  # bounded: no alias bombs
        loaded = load_spec_data(data, "spec_content", _placeholders(data))
    except DurableError as exc:
        return _report(tool, {"schema_valid": False, "pydantic_valid": False,
                              "capability_supported": False,
                              "errors": [{"message": exc.public_message()}], "issues": []})
    spec = loaded.spec
    return _report(tool, {
        "schema_valid": True, "pydantic_valid": True, "capability_supported": True,
        "errors": [], "issues": [],
        "spec_info": {"name": spec.name, "version": spec.version,
                      "pattern_type": spec.pattern.type, "provider": spec.runtime.provider,
                      "agent_count": len(spec.agents)},
    })


def _placeholders(data: Any) -> dict[str, str]:
    """A value for every required input (the caller's to give when it runs), so a spec
    is judged on its own shape."""
    inputs = data.get("inputs") if isinstance(data, dict) else None
    required = inputs.get("required") if isinstance(inputs, dict) else None
    return {str(name): "x" for name in required} if isinstance(required, dict) else {}


def _report(tool: ToolUse, report: dict[str, Any]) -> ToolResult:
    return ok(tool, json.dumps(report, indent=2, default=str))


def spec_verify(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """Validate a workflow spec and report."""
    return run_tool(tool, _verify)
