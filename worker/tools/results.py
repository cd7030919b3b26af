"""What a tool call hands back to the model when it cannot do its work: one error
result, built the same way by the native tools, the MCP pool and the journal wrapper."""

from __future__ import annotations

from strands.types.tools import ToolResult, ToolUse

__all__ = ["error_result"]


def error_result(tool_use: ToolUse, text: str) -> ToolResult:
    return {"toolUseId": str(tool_use.get("toolUseId", "")), "status": "error",
            "content": [{"text": text}]}
