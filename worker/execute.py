"""Run one step: build the Strands agent for it and call it, or a no-op in bench mode."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from strands_durable.errors import StepFailed
from strands_durable.models import StepJob
from strands_durable.scheduler.spec.model import Spec
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store
from strands_durable.worker.agent_call import call_agent
from strands_durable.worker.providers import ModelConfig, build_model


@dataclass(frozen=True)
class StepOutput:
    response: str
    input_tokens: int = 0
    output_tokens: int = 0
    new_messages: list[dict[str, Any]] = field(default_factory=list)
    duration_ms: float = 0.0


def model_config(spec: Spec, agent_id: str) -> ModelConfig:
    """The agent's model settings: its own overrides, else the runtime's."""
    runtime = spec.runtime
    agent = spec.agents[agent_id]
    inference = agent.inference
    return ModelConfig(
        provider=agent.provider or runtime.provider,
        agent_id=agent_id,
        model_id=agent.model_id or runtime.model_id,
        host=runtime.host,
        region=runtime.region,
        temperature=(inference.temperature if inference and inference.temperature is not None
                     else runtime.temperature),
        top_p=inference.top_p if inference and inference.top_p is not None else runtime.top_p,
        max_tokens=(inference.max_tokens if inference and inference.max_tokens is not None
                    else runtime.max_tokens),
        script=runtime.script,
    )


class StepExecutor:
    def __init__(self, settings: DurableSettings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self._models: dict[ModelConfig, Any] = {}

    def _model(self, cfg: ModelConfig) -> Any:
        # Provider clients hold connection pools: build one per distinct config.
        model = self._models.get(cfg)
        if model is None:
            model = self._models[cfg] = build_model(cfg)
        return model

    async def run(self, spec: Spec, variables: dict[str, Any], job: StepJob) -> StepOutput:
        started = time.perf_counter()
        if self.settings.bench_noop:
            return StepOutput(response="ok")
        if job.agent not in spec.agents:
            raise StepFailed(job.session_id, job.key, f"unknown agent {job.agent!r}",
                             retryable=False)
        model = self._model(model_config(spec, job.agent))
        history = await self.store.conversation(job.session_id, job.conversation_lane,
                                                self.settings.conversation_window)
        reply = await call_agent(model, system_prompt=job.system_prompt or None, history=history,
                                 prompt=job.input,
                                 timeout_s=self.settings.model_timeout_s or None)
        return StepOutput(
            response=reply.text,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            new_messages=reply.messages[len(history):],
            duration_ms=(time.perf_counter() - started) * 1000,
        )
