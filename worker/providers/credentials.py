"""Provider credentials the SDK reads from the environment, checked before a run starts
where the process that submits is the one that runs the steps (`durable run`): an
absent key is refused at once, naming agent, provider and variable, instead of failing
the first step. Only where the SDK can tell: Bedrock's credential chain (profiles,
instance roles) cannot be judged without asking AWS, local servers need none."""

from __future__ import annotations

import os
from collections.abc import Mapping

from strands_durable.errors import SpecError
from strands_durable.spec.model import Spec

__all__ = ["CREDENTIAL_VARIABLES", "check_credentials"]

# provider -> the variables its SDK reads the key from, any one suffices (any value for
# a local compatible server).
CREDENTIAL_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
}


def check_credentials(spec: Spec, source: str,
                      environ: Mapping[str, str] | None = None) -> None:
    env = os.environ if environ is None else environ
    runtime = spec.runtime.provider
    for agent_id, agent in spec.agents.items():
        provider = agent.provider or runtime
        variables = CREDENTIAL_VARIABLES.get(provider, ())
        if variables and not any(env.get(name) for name in variables):
            path = f"agents.{agent_id}.provider" if agent.provider else "runtime.provider"
            raise SpecError(source, path, f"agent {agent_id!r}: provider {provider!r} needs "
                            f"{' or '.join(variables)} in the environment (any value for a "
                            f"local {provider}-compatible server)")
