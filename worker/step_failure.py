"""What a failed step says of its failure: the problem its `step_failed` event, the
session's error, the logs and webhooks carry.

A provider's error text is the provider's (or a gateway's) to write: some echo the key a
request sent in a 401's body, some answer megabytes of HTML. So the text is bounded, the
credentials this worker holds are masked in it, and a provider error that can never
succeed names the provider and model it came from.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from strands_durable.errors import DurableError, SpecError, StepFailed, TemplateError
from strands_durable.spec.model import Spec
from strands_durable.worker.execute import model_config
from strands_durable.worker.providers.credentials import CREDENTIAL_VARIABLES
from strands_durable.worker.providers.transient import permanent_cause

__all__ = ["MAX_PROBLEM_CHARS", "StepProblem", "step_problem"]

MAX_PROBLEM_CHARS = 2_000
# Besides the providers' keys: what boto3 signs Bedrock's requests with.
_MORE_SECRETS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID",
                 "AWS_BEARER_TOKEN_BEDROCK")
# Shorter values are not masked: a local compatible server takes any key ("x"), and
# masking every "x" of a message would hide the message, not a secret.
_MIN_SECRET_CHARS = 8


@dataclass(frozen=True)
class StepProblem:
    """A failed step's problem as shown, and whether a retry could help."""

    text: str
    retryable: bool


def step_problem(exc: BaseException, spec: Spec, agent: str,
                 environ: Mapping[str, str] | None = None) -> StepProblem:
    permanent = permanent_cause(exc)
    retryable = not isinstance(exc, (TemplateError, SpecError)) and not (
        isinstance(exc, StepFailed) and not exc.retryable) and permanent is None
    problem = exc.problem if isinstance(exc, StepFailed) else _described(exc)
    if permanent is not None:
        problem = f"{_model_of(spec, agent)}: {permanent} ({problem})"
    env = os.environ if environ is None else environ
    return StepProblem(_bounded(masked(problem, _secrets(env))), retryable)


def masked(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "***")
    return text


def _secrets(env: Mapping[str, str]) -> list[str]:
    names = [name for names in CREDENTIAL_VARIABLES.values() for name in names]
    values = {env.get(name, "") for name in (*names, *_MORE_SECRETS)}
    # The longest first: a key that holds another is masked whole.
    return sorted((v for v in values if len(v) >= _MIN_SECRET_CHARS), key=len, reverse=True)


def _described(exc: BaseException) -> str:
    text = str(exc) or exc.__class__.__name__
    return text if isinstance(exc, DurableError) else f"{exc.__class__.__name__}: {text}"


def _model_of(spec: Spec, agent: str) -> str:
    if agent in spec.agents:
        config = model_config(spec, agent)  # as the step built its model
        provider, model = config.provider, config.model_id
    else:  # an unknown agent fails before any model call; the runtime's, as a fallback
        provider, model = spec.runtime.provider, spec.runtime.model_id
    return f"{provider} model {model}" if model else f"{provider} (its default model)"


def _bounded(text: str) -> str:
    if len(text) <= MAX_PROBLEM_CHARS:
        return text
    return f"{text[:MAX_PROBLEM_CHARS]}... ({len(text) - MAX_PROBLEM_CHARS:,} more characters)"
