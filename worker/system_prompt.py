"""An agent's system prompt, composed as strands-cli's `build_system_prompt` composes it:
the agent's prompt as written (with the notes of earlier steps, "# Previous Workflow
Steps", which the planner put into the job's prompt: planning/notes.py), then
how to use skills and the "Available Skills" list, then a reference of the spec's HTTP
executors (so the model knows their base URLs and endpoints), then the runtime banner
(workflow, its description and tags, the agent's id, the budgets the spec sets). Pure:
the same spec and agent always give the same text."""

from __future__ import annotations

from strands_durable.spec.model import Spec

__all__ = ["system_prompt"]


def system_prompt(spec: Spec, agent_id: str, prompt: str) -> str:
    sections = [prompt]
    if spec.skills:
        sections += [_skills_instructions(), _skills_list(spec)]
    if spec.tools is not None and spec.tools.http_executors:
        sections.append(_http_reference(spec))
    sections.append(_banner(spec, agent_id))
    return "\n\n".join(sections)


def _skills_instructions() -> str:
    return "\n".join([
        "",
        "# How to Use Skills",
        "",
        "When a user's request might be solved by a specialized skill, call the Skill "
        "tool to load it.",
        'To use a skill, call: `Skill("skill_id")`',
        "",
        "Only use skills from the Available Skills list below.",
        "Do not invoke a skill that's already been loaded.",
        "",
    ])


def _skills_list(spec: Spec) -> str:
    # Every skill is listed, `preload_metadata` or not: strands-cli gives it no other effect.
    lines = ["# Available Skills", ""]
    for skill in spec.skills:
        line = f"- **{skill.id}**"
        if skill.path:
            line += f" (path: `{skill.path}`)"
        if skill.description:
            line += f": {skill.description}"
        lines.append(line)
    return "\n".join(lines)


def _http_reference(spec: Spec) -> str:
    lines = ["", "# HTTP Tools Reference", ""]
    for executor in spec.tools.http_executors if spec.tools else []:
        lines.append(f"## Tool: `{executor.id}`")
        if executor.description:
            lines.append(f"**Description**: {executor.description}")
        lines.append(f"**Base URL**: `{executor.base_url}`")
        if executor.common_endpoints:
            lines.append("**Common Endpoints**:")
            for endpoint in executor.common_endpoints:
                lines.append(f"- `{endpoint.get('path', 'N/A')}` - "
                             f"{endpoint.get('description', 'No description')}")
        if executor.authentication_info:
            lines.append(f"**Authentication**: {executor.authentication_info}")
        lines.append("")
    return "\n".join(lines)


def _banner(spec: Spec, agent_id: str) -> str:
    lines = ["", "# Runtime Context", "", f"- **Workflow:** {spec.name}"]
    if spec.description:
        lines.append(f"- **Description:** {spec.description}")
    tags = (spec.model_extra or {}).get("tags")
    if isinstance(tags, list) and tags:
        lines.append(f"- **Tags:** {', '.join(str(tag) for tag in tags)}")
    lines.append(f"- **Agent ID:** {agent_id}")
    budgets = spec.runtime.budgets
    if budgets is not None and budgets.model_fields_set:
        lines.append("- **Budgets:**")
        lines += [f"  - {key}: {getattr(budgets, key)}"
                  for key in type(budgets).model_fields if key in budgets.model_fields_set]
    return "\n".join(lines)
