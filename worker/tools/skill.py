"""The `Skill` tool every agent of a spec with skills gets, as strands-cli's skill loader
(`tools/skill_loader.py`): `Skill("id")` answers the skill's SKILL.md (else README.md),
`Skill("id/module")` its `module.md`, with strands-cli's headers and error texts.

It serves from the files the loader read and carried in the spec (spec/
skills.py): it never touches this worker's disk, so `..` or an absolute module name
finds nothing. "Already loaded" is decided by the agent's own conversation (a success
of the same `Skill` call in it), so a re-run after a crash answers as the first run
did; strands-cli keeps one set per run shared by every agent, which tells an agent that
never saw a skill that it is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strands.tools.tools import PythonAgentTool
from strands.types.tools import AgentTool, ToolResult, ToolSpec, ToolUse

from strands_durable.spec.model import Spec
from strands_durable.spec.sections import Skill
from strands_durable.spec.security import SKILL_TOOL, tool_allowed
from strands_durable.spec.skills import SkillFiles, skill_library
from strands_durable.worker.tools.results import error_result

__all__ = ["SKILL_TOOL", "TOOL_SPEC", "answer", "skill_tool", "skills_allowed"]

LOADED_HEADER = "# Loaded Skill"  # both headers start so: a success that loaded content

TOOL_SPEC: ToolSpec = {
    "name": SKILL_TOOL,
    "description": (
        "Load detailed instructions for a specific skill or skill module. "
        "Use this when you need specialized capabilities from an available skill. "
        "Supports nested module loading via paths like 'skill-id/module' "
        "(e.g., 'strands-spec/patterns' loads patterns.md from the strands-spec skill)."
    ),
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "skill_id": {
                    "type": "string",
                    "description": (
                        "ID of the skill to load (from Available Skills list), "
                        "or skill-id/module to load a specific module "
                        "(e.g., 'strands-spec/patterns' loads patterns.md)"
                    ),
                }
            },
            "required": ["skill_id"],
        }
    },
}


def skill_tool(spec: Spec) -> AgentTool:
    """The `Skill` tool over `spec`'s skills and the files carried with them."""
    skills = {skill.id: skill for skill in spec.skills}
    library = skill_library(spec).skills

    def load(tool: ToolUse, **state: Any) -> ToolResult:
        return answer(tool, skills, library, _messages(state.get("agent")))

    return PythonAgentTool(SKILL_TOOL, TOOL_SPEC, load)


def skills_allowed(spec: Spec) -> bool:
    """Whether the agents get `Skill`: the spec has skills, and its guardrails'
    `allow_tools` (the loader refuses a spec whose list leaves it out) has it."""
    guardrails = spec.security.guardrails if spec.security else None
    allowed = guardrails.allow_tools if guardrails else None
    return bool(spec.skills) and tool_allowed(allowed, SKILL_TOOL)


def answer(tool: ToolUse, skills: Mapping[str, Skill], library: Mapping[str, SkillFiles],
           messages: list[dict[str, Any]]) -> ToolResult:
    args = tool.get("input")
    wanted = args.get("skill_id", "") if isinstance(args, dict) else ""
    if not isinstance(wanted, str) or not wanted:
        return error_result(tool, "Error: skill_id parameter is required")
    base, _, module = wanted.partition("/")
    if _loaded_before(wanted, str(tool.get("toolUseId", "")), messages):
        return _ok(tool, f"Skill '{wanted}' is already loaded. No need to reload it.")
    skill = skills.get(base)
    if skill is None:
        available = ", ".join(skills) or "none"
        return error_result(tool, f"Error: Skill '{base}' not found in workflow "
                                  f"specification.\nAvailable skills: {available}")
    files = library.get(base, SkillFiles(found=False)).files
    if module:
        content = files.get(f"{module}.md")
        if content is None:
            modules = [name[:-3] for name in files
                       if "/" not in name and name not in ("SKILL.md", "README.md")]
            return error_result(tool, f"Error: Module '{module}' not found in skill "
                                      f"'{base}'.\nExpected file: {skill.path}/{module}.md\n"
                                      f"Available modules: {', '.join(modules) or 'none'}")
        return _ok(tool, f"# Loaded Skill Module: {base}/{module}\n\n---\n\n{content}")
    content = files.get("SKILL.md", files.get("README.md"))
    if content is None:
        return error_result(tool, f"Error: Skill '{base}' has no SKILL.md or README.md "
                                  f"file at path: {skill.path}")
    lines = [f"# Loaded Skill: {wanted}"]
    if skill.description:
        lines.append(f"\n**Description**: {skill.description}")
    lines += ["\n---\n", content]
    return _ok(tool, "\n".join(lines))


def _ok(tool: ToolUse, text: str) -> ToolResult:
    return {"toolUseId": tool.get("toolUseId", ""), "status": "success",
            "content": [{"text": text}]}


def _messages(agent: object) -> list[dict[str, Any]]:
    messages = getattr(agent, "messages", None)
    return messages if isinstance(messages, list) else []


def _loaded_before(wanted: str, this_call: str, messages: list[dict[str, Any]]) -> bool:
    """Whether the conversation holds an earlier `Skill(wanted)` that loaded content."""
    calls: set[str] = set()
    for message in messages:
        for block in message.get("content") or []:
            use = block.get("toolUse") if isinstance(block, dict) else None
            if (use and use.get("name") == SKILL_TOOL and use.get("toolUseId") != this_call
                    and isinstance(use.get("input"), dict)
                    and use["input"].get("skill_id") == wanted):
                calls.add(str(use.get("toolUseId")))
            result = block.get("toolResult") if isinstance(block, dict) else None
            if result and result.get("toolUseId") in calls and result.get("status") == "success":
                texts = [item.get("text", "") for item in result.get("content") or []]
                if any(text.startswith(LOADED_HEADER) for text in texts):
                    return True
    return False
