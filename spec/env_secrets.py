"""A spec's `env` section, as strands-cli acts on it.

strands-cli's `env.secrets` name where a `${NAME}` placeholder of an HTTP executor's
headers is read from: the secret whose `name` (else `key`) is NAME is read from the
environment variable `key`; a placeholder no secret names is read from the variable of
its own name. Only `source: env` works there (its capability check refuses the others),
and so here. The mapping is applied when the spec is loaded: each `${NAME}` in HTTP
executor headers and MCP server `env` and `headers` becomes `${KEY}`, so the fleet's
check (DURABLE_TOOL_SECRETS) and the worker both see the variable that is actually read.

`env.mounts` is parsed by strands-cli and used by nothing. Here the file tools reach
only the operator's DURABLE_TOOL_FILES_DIR, so a spec's mounts are refused, saying so,
rather than silently given nothing.

Pure: works on the spec's data after the schema check, before the models.
"""

from __future__ import annotations

from typing import Any

from strands_durable.errors import SpecError
from strands_durable.spec.tools import ENV_REFERENCE

__all__ = ["apply_env_secrets"]


def apply_env_secrets(data: dict[str, Any], source: str) -> None:
    env = data.get("env")
    if not isinstance(env, dict):
        return
    if env.get("mounts"):
        raise SpecError(source, "env.mounts", "mounts give a spec's tools no files here: "
                        "the file tools read and write only the directory the operator "
                        "sets (DURABLE_TOOL_FILES_DIR); remove env.mounts")
    secrets = env.get("secrets") or []
    names: dict[str, str] = {}
    for i, secret in enumerate(secrets):
        if secret.get("source") != "env":
            raise SpecError(source, f"env.secrets[{i}].source",
                            f"secret source {secret.get('source')!r} is not supported "
                            "(strands-cli refuses it too); use source: env")
        names[secret.get("name") or secret["key"]] = secret["key"]
    if not names:
        return
    tools = data.get("tools")
    if not isinstance(tools, dict):
        return
    for executor in tools.get("http_executors") or []:
        _rename(executor.get("headers"), names)
    for server in tools.get("mcp") or []:
        _rename(server.get("env"), names)
        _rename(server.get("headers"), names)


def _rename(values: Any, names: dict[str, str]) -> None:
    if not isinstance(values, dict):
        return
    for field, value in values.items():
        if isinstance(value, str):
            values[field] = ENV_REFERENCE.sub(
                lambda match: "${" + names.get(match.group(1), match.group(1)) + "}", value)
