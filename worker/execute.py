"""Run one step: build the Strands agent for it (model, tools, journal) and call it, or a
no-op in bench mode.

An agent with tools runs turn by turn through the step's journal (worker/journal.py):
each model turn and tool result is journaled as it happens and replayed when the step
runs again. An agent without tools makes one model call per step whose reply goes
straight into the step's commit: there is nothing to journal.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextvars import Token
from dataclasses import dataclass, field, replace
from typing import Any

from strands.models.model import Model
from strands.types.tools import AgentTool

from strands_durable.errors import StepFailed
from strands_durable.models import Event, EventType, StepJob, now_iso, now_ms
from strands_durable.settings import DurableSettings
from strands_durable.spec.model import Spec
from strands_durable.store.capacity import DeclaredLimits, ProviderKey, SpecScope
from strands_durable.store.records import Compaction
from strands_durable.store.store import Store
from strands_durable.worker.agent_call import call_agent
from strands_durable.worker.capacity import CapacityGate
from strands_durable.worker.capacity_model import CapacityModel
from strands_durable.worker.compaction import (
    SUMMARIZER_AGENT,
    SUMMARIZER_PROMPT,
    SUMMARIZER_TEMPERATURE,
    Compacted,
    compact,
)
from strands_durable.worker.faults import CrashPoints
from strands_durable.worker.journal import JournaledModel, StepJournal
from strands_durable.worker.live import LivePublisher, LiveTurns, attempt_started
from strands_durable.worker.model_wrapper import WATCHING, TurnWatch
from strands_durable.worker.providers import ModelConfig, build_model
from strands_durable.worker.system_prompt import system_prompt
from strands_durable.worker.tools.durable_tool import JournaledTool
from strands_durable.worker.tools.toolbox import Toolbox


@dataclass(frozen=True)
class StepOutput:
    response: str
    input_tokens: int = 0
    output_tokens: int = 0
    new_messages: list[dict[str, Any]] = field(default_factory=list)
    duration_ms: float = 0.0
    # The lane's compaction this step commits (worker/compaction.py), if any; its
    # summarizer's tokens are in input_tokens and output_tokens.
    compaction: Compaction | None = None


@dataclass(frozen=True)
class StepRun:
    """Where this run of the step stands: its stream entry (its lease), the worker, the
    spec's digest (the scope of its MCP servers) and the journal the gate read."""

    entry_id: str = ""
    worker: str = ""
    spec_digest: str = ""
    journal: dict[str, str] = field(default_factory=dict)
    # The lane's length and newest page as the gate read them (take.lua), if it did.
    conversation: tuple[int, list[str]] | None = None
    namespace: str = ""  # the session's ('' : default): scopes a spec's own limits


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
    def __init__(self, settings: DurableSettings, store: Store,
                 crash: CrashPoints | None = None) -> None:
        self.settings = settings
        self.store = store
        self._models: dict[ModelConfig, Any] = {}
        self.toolbox = Toolbox(settings)
        self.capacity = CapacityGate(store, settings)
        self.crash = crash or CrashPoints(settings.crash_at)
        self.live = LivePublisher(store, settings.live_flush_ms / 1000, settings.live_max,
                                  settings.live_ttl_s) if settings.live_stream else None

    def _model(self, cfg: ModelConfig) -> Any:
        # Provider clients hold connection pools: build one per distinct config.
        model = self._models.get(cfg)
        if model is None:
            model = self._models[cfg] = build_model(cfg)
        return model

    async def run(self, spec: Spec, variables: dict[str, Any], job: StepJob,
                  run: StepRun | None = None) -> StepOutput:
        started = time.perf_counter()
        if self.settings.bench_noop:
            return StepOutput(response="ok")
        if job.agent not in spec.agents:
            raise StepFailed(job.session_id, job.key, f"unknown agent {job.agent!r}",
                             retryable=False)
        run = run or StepRun()
        config = model_config(spec, job.agent)
        provider_model = self._model(config)
        model: Model = self._limited(provider_model, config, spec, job, run)
        # The attempt opens on the live stream before its tools and history are ready.
        watching = self._watch(provider_model, job, run)
        try:
            tools = await self.toolbox.tools_for(spec, run.spec_digest, job)
            journal = self._journal(job, run) if tools else None
            if journal is not None:
                model = JournaledModel(model, journal)
                tools = [self._journaled(tool, journal, job, run) for tool in tools]
            # The whole committed conversation since its latest compaction, under the
            # operator's ceiling (0: none).
            history = await self.store.conversation(job.session_id, job.conversation_lane,
                                                    self.settings.conversation_window,
                                                    run.conversation)
            prompt = system_prompt(spec, job.agent, job.system_prompt)
            reply = await call_agent(model, system_prompt=prompt, history=history,
                                     prompt=job.input,
                                     timeout_s=self.settings.model_timeout_s or None,
                                     tools=tools,
                                     before_attempt=journal.restart if journal else None)
        finally:
            if watching is not None:
                WATCHING.reset(watching)
        # Compacted after the call, as strands-cli's hook does, with the unjournaled
        # model: the journal's turns are the agent's alone (worker/compaction.py).
        compacted = await self._compact(spec, config, reply.messages,
                                        f"session {job.session_id} step {job.key}: ",
                                        run.namespace)
        extra_in, extra_out = ((compacted.input_tokens, compacted.output_tokens)
                               if compacted else (0, 0))
        return StepOutput(
            response=reply.text,
            input_tokens=reply.input_tokens + extra_in,
            output_tokens=reply.output_tokens + extra_out,
            new_messages=reply.messages[len(history):],
            duration_ms=(time.perf_counter() - started) * 1000,
            compaction=compacted.record if compacted else None,
        )

    def _watch(self, model: Model, job: StepJob, run: StepRun) -> Token[TurnWatch | None] | None:
        """The step's turns shown on its live stream as they stream (worker/live.py), the
        turns its journal replays counted but not shown again."""
        if self.live is None:
            return None
        replayed = sum(1 for name in run.journal if name.startswith("m"))
        attempt_started(self.live, job, replayed, run.worker)
        return WATCHING.set(LiveTurns(model, self.live, job, first_turn=replayed + 1))

    async def _compact(self, spec: Spec, config: ModelConfig, messages: list[dict[str, Any]],
                       where: str, namespace: str = "") -> Compacted | None:
        policy = spec.context_policy.compaction if spec.context_policy else None
        if policy is None or not policy.enabled:
            return None
        summarizer, prompt = config, None
        if policy.summarization_model:  # strands-cli's summarization agent
            summarizer = replace(config, agent_id=SUMMARIZER_AGENT,
                                 model_id=policy.summarization_model,
                                 temperature=SUMMARIZER_TEMPERATURE, top_p=None,
                                 max_tokens=None)
            prompt = SUMMARIZER_PROMPT
        model = self._limited(self._model(summarizer), summarizer, spec,
                              run=StepRun(namespace=namespace))
        return await compact(policy, messages, model, system_prompt=prompt,
                             timeout_s=self.settings.model_timeout_s or None, where=where)

    def _limited(self, model: Model, config: ModelConfig, spec: Spec,
                 job: StepJob | None = None, run: StepRun | None = None) -> Model:
        """`model` taking its turn on the fleet's capacity for its provider key
        (worker/capacity.py), within its spec's own `runtime.capacity` if it declares
        one, below the journal: a replayed turn costs no capacity."""
        if not self.capacity.applies_to(config.provider):
            return model
        key = ProviderKey(config.provider, config.model_id or "", config.host or "")
        own = spec.runtime.capacity
        namespace = run.namespace if run is not None else ""
        scope = SpecScope(own.scope_id(spec.name, namespace), DeclaredLimits(
            own.rpm or 0, own.tpm or 0, own.in_flight or 0)) if own and own.limited else None
        waits_count = own is None or own.wait_counts_toward_duration
        if job is None or run is None or not run.entry_id:
            return CapacityModel(model, self.capacity, key, config.max_tokens, scope=scope)
        if run.worker:  # the fleet's view names the worker whose steps wait
            self.capacity.process = run.worker
        step, entry_id, worker = job, run.entry_id, run.worker

        async def note(kind: EventType, detail: str,
                       excluded_wait_ms: tuple[int, int] = (0, 0)) -> None:
            event = Event(type=kind, step=step.key, attempt=step.attempt, worker=worker,
                          at=now_iso(), detail=detail)
            await self.store.journal(step, entry_id, worker, "", "", [event],
                                     excluded_wait_ms)

        async def on_wait(label: str, reason: str, wait_ms: int) -> None:
            await note(EventType.CAPACITY_WAIT, f"{label}: {reason}, next look in {wait_ms} ms")

        async def on_granted(label: str, waited_s: float) -> None:
            # With the event, atomically: the wait leaves the session's clock when its
            # spec says waiting does not count toward max_duration_s.
            until = now_ms()
            excluded = (0, 0) if waits_count else (until - round(waited_s * 1000), until)
            await note(EventType.CAPACITY_GRANTED, f"{label}: waited {waited_s:.1f}s",
                       excluded)

        return CapacityModel(model, self.capacity, key, config.max_tokens, on_wait,
                             on_granted=on_granted, session=job.session_id, scope=scope)

    def _journal(self, job: StepJob, run: StepRun) -> StepJournal:
        async def write(name: str, value: str, events: Sequence[Event]) -> bool:
            if not run.entry_id:  # not carried by a stream entry: no lease to fence by
                return True
            return await self.store.journal(job, run.entry_id, run.worker, name, value,
                                            events)

        return StepJournal(step=job.key, entries=dict(run.journal), write=write,
                           max_turns=self.settings.max_model_turns,
                           session_id=job.session_id, agent=job.agent)

    def _journaled(self, tool: AgentTool, journal: StepJournal, job: StepJob,
                   run: StepRun) -> JournaledTool:
        return JournaledTool(tool, journal, job, run.worker, self.settings.tool_timeout_s,
                             after_result=lambda: self.crash.reached("after_tool"))

    async def close(self) -> None:
        await self.toolbox.close()
        if self.live is not None:
            await self.live.close()  # what is buffered goes out before the worker does
