"""orchestrator_workers: an orchestrator splits the work into tasks, workers run them
in parallel, optional reduce and writeup steps synthesise the results.

Steps (keys):
  orchestrate:<r>, orchestrate:<r>:retry:<n>   round r's plan; n <= 2 JSON retries
  review:decomposition:<r>                     optional `decomposition_review` HITL gate
  worker:<r>:<i>                               task i of round r (lane = the key)
  review:reduce                                optional `reduce_review` HITL gate
  reduce, writeup                              optional synthesis steps

strands-cli behaviours matched (exec/orchestrator_workers.py @929836b):
- Round 1's orchestrator input is strands-cli's built-in decomposition prompt
  (JSON array of {"task": ...}, [] when nothing is needed, the variables as JSON);
  the orchestrator agent's prompt is its system prompt. Its conversation continues
  across retries and rounds (its own agent lane).
- Reply parsing is tolerant (plain JSON, fenced, embedded). A list is the task
  list; a single object {"task": ...} is one task (strands-cli wraps it). Task text
  is item["task"], else str(item). Extension: {"tasks": [...]} / {"subtasks": [...]}
  are unwrapped (strands-cli would make one task of the whole object), a bare string
  item is its own task, and a reply that is just the word "complete" (or "done")
  means []. A reply that does not parse is retried up to 2 times (3 attempts) with
  strands-cli's clarification prompt, then the session fails naming the step and reply.
- limits.max_workers (and runtime.max_parallel, when the spec sets it) bounds
  CONCURRENCY (strands-cli's semaphore), not the number of tasks: at most max_workers
  workers of a round are scheduled at a time, the next task is scheduled as one
  completes. Worker input is the task text; each worker has its own conversation
  lane; worker_template.tools travels in job meta.
- Rounds: strands-cli runs exactly one (it rejects max_rounds != 1). Extension:
  with limits.max_rounds = R > 1, once every worker of round r has completed and
  r < R, the orchestrator is called again (orchestrate:<r+1>) with the previous
  round's tasks and results, and replies [] / "complete" when done. Without
  max_rounds there is one round, as in strands-cli. An empty task list ends the
  rounds (strands-cli: "no work needed" is success).
- reduce / writeup context: workers [{response, status, tokens, task, round,
  index}] (every round, in order), num_workers, worker_count, round_count, tasks,
  rounds, then the variables (they win, as in strands-cli); writeup also sees
  reduce_response; hitl_response after a review gate; last_response.
- decomposition_review (per round with tasks; its answer is only recorded, as in
  strands-cli, and offered to reduce/writeup as hitl_response) sees
  orchestrator_response (the tasks as JSON), subtasks, task_count + variables;
  reduce_review (only when reduce is set) sees workers, worker_count + the reduce
  context.
- Final response: writeup, else reduce, else "Worker <i>: <response>" joined by
  blank lines. Artifacts see the variables, the reduce context, reduce_response,
  writeup_response and last_response.

pattern_state (stored, state.OrchestratorWorkersState): {"phase": "orchestrate"
  | "review_decomposition" | "workers" | "review_reduce" | "reduce" | "writeup" | "done",
  "current_round": r, "orchestrator_attempts": n, "rounds": [{"round", "tasks": [text]}],
  "dispatched": k (workers of the current round scheduled so far),
  "orchestrator_decision": "continue" | "complete", "reduce_completed",
  "writeup_completed"}
pattern_state (view): {"current_round", "phase", "rounds": [{"round", "tasks",
  "worker_outputs": [{"index", "task", "response", "tokens"} | None]}],
  "orchestrator_decision", "reduce_completed", "writeup_completed"}
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from strands_durable.models import SessionStatus, StepJob, StepResult
from strands_durable.patterns import shapes
from strands_durable.patterns.base import (
    Decision,
    PlanContext,
    agent_job,
    excerpt,
    hitl_job,
    with_result,
)
from strands_durable.patterns.definition import (
    AgentRef,
    PatternDefinition,
    StepSite,
    name_set,
    optional,
)
from strands_durable.patterns.orchestrator_context import (
    REDUCE_KEY,
    REDUCE_REVIEW_KEY,
    WRITEUP_KEY,
    decomposition_review_key,
    next_round_prompt,
    orchestrate_key,
    orchestrator_prompt,
    parse_tasks,
    retry_prompt,
    round_workers,
    synthesis_context,
    worker_key,
)
from strands_durable.patterns.shapes import Shape
from strands_durable.patterns.state import OrchestratorWorkersState, RoundRecord
from strands_durable.spec.steps import (
    AgentStep,
    HitlGate,
    HitlStep,
    PatternConfig,
    SpecModel,
    Step,
)


class OrchestratorLimits(SpecModel):
    max_workers: int | None = None
    max_rounds: int | None = None


class OrchestratorConfig(SpecModel):
    """orchestrator_workers' orchestrator: the agent that splits the task, and its limits."""

    agent: str
    limits: OrchestratorLimits | None = None


class WorkerTemplate(SpecModel):
    """orchestrator_workers' worker: the agent (and its tools) each subtask runs on."""

    agent: str
    tools: list[str] | None = None


class OrchestratorWorkersConfig(PatternConfig):
    """The orchestrator_workers pattern: an orchestrator plans subtasks, workers run them, a
    reducer and writeup may follow."""

    orchestrator: OrchestratorConfig
    decomposition_review: HitlGate | None = None
    worker_template: WorkerTemplate
    reduce_review: HitlGate | None = None
    reduce: Step | None = None
    writeup: Step | None = None

MAX_JSON_RETRIES = 2  # strands-cli's _invoke_orchestrator_with_retry default
def _config(ctx: PlanContext) -> OrchestratorWorkersConfig:
    config = ctx.spec.pattern.config
    assert isinstance(config, OrchestratorWorkersConfig)
    return config


def _limits(ctx: PlanContext) -> tuple[int | None, int]:
    """(the workers that may run at once, None for unlimited; max_rounds with
    strands-cli's default 1). A `runtime.max_parallel` the spec writes also bounds the
    workers (the schema says it covers orchestrator workers); its default does not, as
    strands-cli's orchestrator runs unbounded without max_workers."""
    limits = _config(ctx).orchestrator.limits
    max_workers = limits.max_workers if limits and limits.max_workers else None
    runtime = ctx.spec.runtime
    if "max_parallel" in runtime.model_fields_set:
        max_workers = min(max_workers or runtime.max_parallel, runtime.max_parallel)
    max_rounds = limits.max_rounds if limits and limits.max_rounds else 1
    return max_workers, max(max_rounds, 1)


def _step_job(ctx: PlanContext, key: str, step: Step, context: Mapping[str, Any],
              where: str) -> StepJob:
    if isinstance(step, HitlStep):
        return hitl_job(ctx, key=key, step=step, context=context, where=where)
    assert isinstance(step, AgentStep)
    return agent_job(ctx, key=key, agent=step.agent, input_template=step.input,
                     context={**context, **(step.vars or {})}, where=f"{where}.input")


class OrchestratorWorkersPlanner:
    def start(self, ctx: PlanContext) -> Decision:
        state = OrchestratorWorkersState(
            phase="orchestrate", current_round=1, orchestrator_attempts=1, rounds=[],
            dispatched=0, orchestrator_decision="continue", reduce_completed=False,
            writeup_completed=False)
        return Decision(state=state.dump(), schedule=(self._orchestrator_job(ctx, 1, 0, ""),))

    def _orchestrator_job(self, ctx: PlanContext, round_: int, attempt: int, text: str
                          ) -> StepJob:
        agent = _config(ctx).orchestrator.agent
        job = agent_job(ctx, key=orchestrate_key(round_, attempt), agent=agent,
                        input_template=None, context=dict(ctx.variables),
                        where="pattern.config.orchestrator", meta={"round": round_,
                                                                   "attempt": attempt})
        if round_ == 1 and attempt == 0:
            text = orchestrator_prompt(ctx.variables)
        return replace(job, input=text)  # literal text: replies may hold template syntax

    def _worker_job(self, ctx: PlanContext, round_: int, index: int, task: str) -> StepJob:
        template = _config(ctx).worker_template
        key = worker_key(round_, index)
        job = agent_job(ctx, key=key, agent=template.agent, input_template=None,
                        context=dict(ctx.variables), where="pattern.config.worker_template",
                        lane=key, meta={"round": round_, "index": index,
                                        "tool_overrides": template.tools})
        return replace(job, input=task)

    def advance(self, ctx: PlanContext, result: StepResult) -> Decision:
        state = OrchestratorWorkersState.load(ctx.state)
        key = result.key
        if key.startswith("orchestrate:"):
            return self._after_orchestrator(ctx, state, result)
        if key.startswith("review:decomposition:"):
            return self._start_workers(ctx, state, int(key.rsplit(":", 1)[1]))
        if key.startswith("worker:"):
            return self._after_worker(ctx, state, result)
        if key == REDUCE_REVIEW_KEY:
            return self._reduce(ctx, state, result)
        if key == REDUCE_KEY:
            state.reduce_completed = True
            return self._writeup(ctx, state, result)
        if key == WRITEUP_KEY:
            state.writeup_completed = True
            return self._complete(ctx, state, result)
        raise ValueError(f"orchestrator_workers: unexpected step {key!r}")

    # --- orchestrator -----------------------------------------------------------

    def _after_orchestrator(self, ctx: PlanContext, state: OrchestratorWorkersState,
                            result: StepResult) -> Decision:
        parts = result.key.split(":")
        round_ = int(parts[1])
        attempt = int(parts[3]) if len(parts) == 4 else 0
        try:
            tasks = parse_tasks(result.response)
        except ValueError as error:
            if attempt < MAX_JSON_RETRIES:
                state.orchestrator_attempts = attempt + 2
                job = self._orchestrator_job(ctx, round_, attempt + 1,
                                             retry_prompt(result.response))
                return Decision(state=state.dump(), schedule=(job,))
            state.phase = "done"
            return Decision(
                state=state.dump(), status=SessionStatus.FAILED,
                reason=(f"orchestrator_workers: step {result.key!r}: failed to parse the "
                        f"orchestrator response as valid JSON after {MAX_JSON_RETRIES + 1} "
                        f"attempts ({error}); expected [{{\"task\": \"description\"}}, ...], "
                        f"last reply: {excerpt(result.response)!r}"))
        state.rounds = [*state.rounds, RoundRecord(round=round_, tasks=tasks)]
        state.current_round, state.dispatched = round_, 0
        if not tasks:
            state.orchestrator_decision = "complete"
            return self._finish_rounds(ctx, state, result)
        state.orchestrator_decision = "continue"
        review = _config(ctx).decomposition_review
        if review is not None:
            state.phase = "review_decomposition"
            context = {"orchestrator_response": json.dumps([{"task": t} for t in tasks],
                                                           indent=2),
                       "subtasks": [{"task": t} for t in tasks], "task_count": len(tasks),
                       **ctx.variables}
            job = hitl_job(ctx, key=decomposition_review_key(round_), step=review,
                           context=context, where="pattern.config.decomposition_review",
                           meta={"round": round_})
            return Decision(state=state.dump(), schedule=(job,))
        return self._start_workers(ctx, state, round_)

    # --- workers ----------------------------------------------------------------

    def _tasks(self, state: OrchestratorWorkersState, round_: int) -> list[str]:
        for entry in state.rounds:
            if entry.round == round_:
                return entry.tasks
        raise ValueError(f"orchestrator_workers: no tasks recorded for round {round_}")

    def _start_workers(self, ctx: PlanContext, state: OrchestratorWorkersState, round_: int
                       ) -> Decision:
        tasks = self._tasks(state, round_)
        max_workers, _ = _limits(ctx)
        first = len(tasks) if max_workers is None else min(len(tasks), max_workers)
        state.phase, state.dispatched = "workers", first
        jobs = tuple(self._worker_job(ctx, round_, i, tasks[i]) for i in range(first))
        return Decision(state=state.dump(), schedule=jobs)

    def _after_worker(self, ctx: PlanContext, state: OrchestratorWorkersState, result: StepResult
                      ) -> Decision:
        round_ = int(result.key.split(":")[1])
        tasks = self._tasks(state, round_)
        results = with_result(ctx, result)
        done = sum(1 for i in range(len(tasks)) if worker_key(round_, i) in results)
        max_workers, max_rounds = _limits(ctx)
        # Derived from committed results alone, so any completion order gives the same
        # schedule: workers [0, min(n, max_workers + done)) have been scheduled.
        before = state.dispatched
        after = len(tasks) if max_workers is None else min(len(tasks), max_workers + done)
        after = max(after, before)
        state.dispatched = after
        if done < len(tasks):
            jobs = tuple(self._worker_job(ctx, round_, i, tasks[i]) for i in range(before, after))
            return Decision(state=state.dump(), schedule=jobs)
        if round_ < max_rounds:
            state.phase, state.current_round = "orchestrate", round_ + 1
            state.orchestrator_attempts = 1
            workers = [w for w in round_workers(results, round_, tasks) if w is not None]
            job = self._orchestrator_job(ctx, round_ + 1, 0,
                                         next_round_prompt(round_ + 1, max_rounds, workers))
            return Decision(state=state.dump(), schedule=(job,))
        return self._finish_rounds(ctx, state, result)

    # --- reduce / writeup -------------------------------------------------------

    def _finish_rounds(self, ctx: PlanContext, state: OrchestratorWorkersState, result: StepResult
                       ) -> Decision:
        config = _config(ctx)
        if config.reduce is not None and config.reduce_review is not None:
            state.phase = "review_reduce"
            results = with_result(ctx, result)
            context = synthesis_context(ctx, state, results)
            job = hitl_job(ctx, key=REDUCE_REVIEW_KEY, step=config.reduce_review,
                           context=context, where="pattern.config.reduce_review")
            return Decision(state=state.dump(), schedule=(job,))
        return self._reduce(ctx, state, result)

    def _reduce(self, ctx: PlanContext, state: OrchestratorWorkersState, result: StepResult
                ) -> Decision:
        config = _config(ctx)
        if config.reduce is None:
            return self._writeup(ctx, state, result)
        state.phase = "reduce"
        context = synthesis_context(ctx, state, with_result(ctx, result))
        job = _step_job(ctx, REDUCE_KEY, config.reduce, context, "pattern.config.reduce")
        return Decision(state=state.dump(), schedule=(job,))

    def _writeup(self, ctx: PlanContext, state: OrchestratorWorkersState, result: StepResult
                 ) -> Decision:
        config = _config(ctx)
        if config.writeup is None:
            return self._complete(ctx, state, result)
        state.phase = "writeup"
        context = synthesis_context(ctx, state, with_result(ctx, result))
        job = _step_job(ctx, WRITEUP_KEY, config.writeup, context, "pattern.config.writeup")
        return Decision(state=state.dump(), schedule=(job,))

    def _complete(self, ctx: PlanContext, state: OrchestratorWorkersState, result: StepResult
                  ) -> Decision:
        state.phase = "done"
        results = with_result(ctx, result)
        context = synthesis_context(ctx, state, results)
        if WRITEUP_KEY in results:
            final = results[WRITEUP_KEY].response
        elif REDUCE_KEY in results:
            final = results[REDUCE_KEY].response
        else:
            final = "\n\n".join(f"Worker {i}: {w['response']}"
                                for i, w in enumerate(context["workers"]))
        context["last_response"] = final
        return Decision(state=state.dump(), status=SessionStatus.COMPLETED, final_response=final,
                        artifact_context=context)

    # --- view -------------------------------------------------------------------

    def view(self, ctx: PlanContext) -> dict[str, Any]:
        rounds = []
        state = OrchestratorWorkersState.load(ctx.state)
        for entry in state.rounds:
            round_, tasks = entry.round, entry.tasks
            outputs = [None if w is None else {k: w[k] for k in ("index", "task", "response",
                                                                   "tokens")}
                       for w in round_workers(ctx.results, round_, tasks)]
            rounds.append({"round": round_, "tasks": tasks, "worker_outputs": outputs})
        return {
            "current_round": state.current_round,
            "phase": state.phase,
            "rounds": rounds,
            "dispatched": state.dispatched,
            "orchestrator_decision": state.orchestrator_decision,
            "reduce_completed": state.reduce_completed,
            "writeup_completed": state.writeup_completed,
        }


class OrchestratorWorkersPattern(PatternDefinition[OrchestratorWorkersConfig]):
    pattern_type = "orchestrator_workers"
    notes_name_tools = False
    config_model = OrchestratorWorkersConfig
    schema_def = "orchestratorWorkersConfig"
    context_names = name_set("workers num_workers worker_count round_count tasks subtasks"
                             " task_count orchestrator_response reduce_response writeup_response")
    planner = OrchestratorWorkersPlanner()
    state_model = OrchestratorWorkersState

    def steps(self, config: OrchestratorWorkersConfig) -> Iterator[StepSite]:
        base = "pattern.config"
        yield from optional(f"{base}.decomposition_review", config.decomposition_review)
        yield from optional(f"{base}.reduce_review", config.reduce_review)
        yield from optional(f"{base}.reduce", config.reduce)
        yield from optional(f"{base}.writeup", config.writeup)

    def own_agent_refs(self, config: OrchestratorWorkersConfig) -> Iterator[AgentRef]:
        yield "pattern.config.orchestrator.agent", config.orchestrator.agent
        yield "pattern.config.worker_template.agent", config.worker_template.agent

    def shape(self, view: Mapping[str, Any]) -> Shape:
        return shapes.orchestrator_workers(view)


PATTERN = OrchestratorWorkersPattern()
