"""evaluator_optimizer: a producer drafts, an evaluator scores, the producer revises.

Iteration n (1-based) is one draft and its evaluation. Steps (keys), one at a time:
  produce:<n>          the draft (n = 1: the producer's prompt; n > 1: a revision)
  evaluate:<n>         the evaluator's JSON {"score", "issues", "fixes"} for draft n
  evaluate:<n>:retry   the one clarification retry after a reply that does not parse
  review:<n>           optional `review_gate` HITL step before revising draft n

strands-cli behaviours matched (exec/evaluator_optimizer.py @929836b):
- The first draft's input is the producer agent's prompt rendered with the variables.
- The evaluator input is `evaluator.input` rendered with {draft} + variables, or
  "Evaluate the following draft and return JSON with score (0-100), issues, and
  fixes:\\n\\n<draft>" when it is omitted.
- Evaluator reply: tolerant JSON (plain, fenced, embedded); `score` an integer 0-100
  (integral floats and numeric strings accepted, as pydantic does), `issues` and
  `fixes` optional lists. DOCUMENTED CHOICE (strands-cli's): a reply that does not
  parse is retried ONCE (`evaluate:<n>:retry`) with strands-cli's clarification prompt
  ("Your previous response was not valid JSON..."); a second bad reply fails the
  session, naming the step and the reply.
- score >= accept.min_score: completed with that draft.
- Revision input: `revise_prompt` or strands-cli's default revision template, with
  {{ draft }}, {{ evaluation.score / .issues / .fixes }}, {{ iteration }} and the
  variables (plus `hitl_response` after a review gate). {{ iteration }} is n + 1 when
  draft n is revised: strands-cli's main loop counts the first draft as iteration 1
  and evaluates it in iteration 2, the value it passes (its resume-after-review path
  passes one less, an inconsistency not copied).
- Producer and evaluator each keep ONE conversation across iterations (their own
  agent lane), as strands-cli's agent cache does.
- at most accept.max_iters evaluations (so max_iters - 1 revisions).
  DOCUMENTED CHOICE, following strands-cli: when the last evaluation is still below
  min_score the session FAILS ("Max iterations (N) exhausted without reaching
  min_score (M). Final score: S"); the view keeps every draft, `accepted: false`
  and `max_iterations_reached: true`, so the best draft is still readable.
- review_gate (after an evaluation below min_score, before the revision): the
  answer "stop" / "abort" / "end" completes the session early with the current
  draft (early_termination); anything else continues with the revision. Its prompt
  sees iteration_index, iterations, current_draft, current_evaluation + variables.
- Artifacts see the variables, last_response (the final draft) and strands-cli's
  execution context: iterations (a count), final_score, min_score, max_iters,
  history, last_evaluation, cumulative_tokens (+ early_termination,
  termination_reason after a stop).

pattern_state (stored, state.EvaluatorOptimizerState): {"current_iteration": n,
  "phase": "produce" | "evaluate" | "review" | "done", "evaluations": [{"iteration",
  "key", "score"}], "accepted": bool, "early_termination": bool}
pattern_state (view): {"current_iteration", "phase", "iterations": [{"iteration",
  "score", "feedback", "issues", "fixes", "output"}], "accepted",
  "quality_gate_passed", "max_iterations_reached", "final_score", "early_termination"}
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
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
    TemplateField,
    name_set,
    optional,
)
from strands_durable.patterns.json_reply import extract_json
from strands_durable.patterns.shapes import Shape
from strands_durable.patterns.state import EvaluationRecord, EvaluatorOptimizerState
from strands_durable.spec.steps import HitlGate, PatternConfig, SpecModel


class EvaluatorConfig(SpecModel):
    """evaluator_optimizer's evaluator: the agent that scores each draft."""
    agent: str
    input: str | None = None


class AcceptConfig(SpecModel):
    """evaluator_optimizer's `accept`: the score a draft must reach and the most rounds."""
    min_score: int
    max_iters: int = 3


class EvaluatorOptimizerConfig(PatternConfig):
    """The evaluator_optimizer pattern: a producer drafts, an evaluator scores, until accepted."""
    producer: str
    evaluator: EvaluatorConfig
    accept: AcceptConfig
    revise_prompt: str | None = None
    review_gate: HitlGate | None = None

DEFAULT_REVISE_PROMPT = (
    "Revise the following draft based on evaluator feedback.\n\n"
    "Draft:\n{{ draft }}\n\n"
    "Evaluation (Score: {{ evaluation.score }}/100):\n"
    "{% if evaluation.issues %}Issues:\n"
    "{% for issue in evaluation.issues %}- {{ issue }}\n{% endfor %}"
    "{% endif %}"
    "{% if evaluation.fixes %}Suggested fixes:\n"
    "{% for fix in evaluation.fixes %}- {{ fix }}\n{% endfor %}"
    "{% endif %}\n"
    "Please provide an improved version."
)
DEFAULT_EVALUATOR_INPUT = ("Evaluate the following draft and return JSON with score (0-100), "
                           "issues, and fixes:\n\n")
CLARIFICATION = (
    "Your previous response was not valid JSON. "
    "Please return only valid JSON in this exact format: "
    '{"score": <0-100>, "issues": ["issue1", ...], "fixes": ["fix1", ...]}\n\n'
    "Evaluate this draft:\n\n"
)
STOP_WORDS = frozenset({"stop", "abort", "end"})


def produce_key(n: int) -> str:
    return f"produce:{n}"


def evaluate_key(n: int, retry: bool = False) -> str:
    return f"evaluate:{n}:retry" if retry else f"evaluate:{n}"


def review_key(n: int) -> str:
    return f"review:{n}"


@dataclass(frozen=True)
class Evaluation:
    score: int
    issues: list[str]
    fixes: list[str]

    def as_context(self) -> dict[str, Any]:
        return {"score": self.score, "issues": list(self.issues), "fixes": list(self.fixes)}


def _score(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        score = value
    elif isinstance(value, float) and value.is_integer():
        score = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        score = int(value.strip())
    else:
        return None
    return score if 0 <= score <= 100 else None


def _strings(value: Any) -> list[str] | None:
    if value is None:
        return []
    if isinstance(value, list):
        return [v if isinstance(v, str) else str(v) for v in value]
    return None


def parse_evaluation(reply: str) -> Evaluation:
    """The evaluator's verdict; ValueError with a short reason when it is not one."""
    data = extract_json(reply, kind=dict)
    score = _score(data.get("score"))
    if score is None:
        raise ValueError(f"'score' must be an integer 0-100, got {data.get('score')!r}")
    issues, fixes = _strings(data.get("issues")), _strings(data.get("fixes"))
    if issues is None or fixes is None:
        raise ValueError("'issues' and 'fixes' must be lists")
    return Evaluation(score, issues, fixes)



def _config(ctx: PlanContext) -> EvaluatorOptimizerConfig:
    config = ctx.spec.pattern.config
    assert isinstance(config, EvaluatorOptimizerConfig)
    return config



def history(ctx: PlanContext, evaluations: list[EvaluationRecord],
            extra: StepResult | None = None) -> list[dict[str, Any]]:
    """One record per evaluated draft (strands-cli's iteration_history shape + output)."""
    results = with_result(ctx, extra)
    records = []
    for entry in evaluations:
        n = entry.iteration
        evaluation = parse_evaluation(results[entry.key].response)
        draft = results[produce_key(n)].response
        feedback = "; ".join(evaluation.issues)
        records.append({
            "iteration": n, "score": evaluation.score, "issues": evaluation.issues,
            "fixes": evaluation.fixes, "feedback": feedback, "draft": draft, "output": draft,
            "draft_preview": draft[:100],
            "evaluation": {**evaluation.as_context(), "feedback": feedback},
        })
    return records


def _producer_job(ctx: PlanContext, n: int, context: Mapping[str, Any],
                  template: str, where: str) -> StepJob:
    return agent_job(ctx, key=produce_key(n), agent=_config(ctx).producer,
                     input_template=template, context=context, where=where,
                     meta={"iteration": n})


def _evaluator_job(ctx: PlanContext, n: int, draft: str, retry: bool) -> StepJob:
    config = _config(ctx)
    context = {"draft": draft, **ctx.variables}
    key = evaluate_key(n, retry)
    meta = {"iteration": n, "retry": retry}
    if retry:
        job = agent_job(ctx, key=key, agent=config.evaluator.agent, input_template=None,
                        context=context, where="pattern.config.evaluator", meta=meta)
        return _with_input(job, CLARIFICATION + draft)
    if config.evaluator.input is not None:
        return agent_job(ctx, key=key, agent=config.evaluator.agent,
                         input_template=config.evaluator.input, context=context,
                         where="pattern.config.evaluator.input", meta=meta)
    job = agent_job(ctx, key=key, agent=config.evaluator.agent, input_template=None,
                    context=context, where="pattern.config.evaluator", meta=meta)
    return _with_input(job, DEFAULT_EVALUATOR_INPUT + draft)


def _with_input(job: StepJob, text: str) -> StepJob:
    # Literal text (the draft may contain template syntax): never rendered.
    return replace(job, input=text)


def _revision_job(ctx: PlanContext, n: int, draft: str, evaluation: Evaluation,
                  hitl_response: str | None) -> StepJob:
    """produce:<n+1>: revise draft n with its evaluation."""
    config = _config(ctx)
    context: dict[str, Any] = {"draft": draft, "iteration": n + 1,
                               "evaluation": evaluation.as_context(), **ctx.variables}
    if hitl_response is not None:
        context["hitl_response"] = hitl_response
    template = config.revise_prompt or DEFAULT_REVISE_PROMPT
    where = "pattern.config.revise_prompt" if config.revise_prompt else "default revise prompt"
    return _producer_job(ctx, n + 1, context, template, where)


class EvaluatorOptimizerPlanner:
    def start(self, ctx: PlanContext) -> Decision:
        producer = _config(ctx).producer
        template = ctx.spec.agents[producer].prompt
        job = _producer_job(ctx, 1, dict(ctx.variables), template, f"agents.{producer}.prompt")
        state = EvaluatorOptimizerState(current_iteration=1, phase="produce", evaluations=[],
                                        accepted=False, early_termination=False)
        return Decision(state=state.dump(), schedule=(job,))

    def advance(self, ctx: PlanContext, result: StepResult) -> Decision:
        state = EvaluatorOptimizerState.load(ctx.state)
        kind, n = result.key.split(":")[0], int(result.key.split(":")[1])
        if kind == "produce":
            state.current_iteration, state.phase = n, "evaluate"
            return Decision(state=state.dump(), schedule=(_evaluator_job(ctx, n, result.response,
                                                                  retry=False),))
        if kind == "evaluate":
            return self._after_evaluation(ctx, state, n, result)
        if kind == "review":
            return self._after_review(ctx, state, n, result)
        raise ValueError(f"evaluator_optimizer: unexpected step {result.key!r}")

    def _after_evaluation(self, ctx: PlanContext, state: EvaluatorOptimizerState, n: int,
                          result: StepResult) -> Decision:
        config = _config(ctx)
        draft = ctx.results[produce_key(n)].response
        retried = result.key.endswith(":retry")
        try:
            evaluation = parse_evaluation(result.response)
        except ValueError as error:
            if not retried:
                return Decision(state=state.dump(),
                                schedule=(_evaluator_job(ctx, n, draft, retry=True),))
            state.phase = "done"
            return Decision(
                state=state.dump(), status=SessionStatus.FAILED,
                reason=(f"evaluator_optimizer: step {result.key!r}: evaluator failed to return "
                        f"valid JSON after 2 attempts on iteration {n} ({error}); "
                        f"last reply: {excerpt(result.response)!r}"))
        state.evaluations = [*state.evaluations, EvaluationRecord(
            iteration=n, key=result.key, score=evaluation.score)]
        if evaluation.score >= config.accept.min_score:
            state.phase, state.accepted = "done", True
            return self._complete(ctx, state, draft, result)
        if n >= config.accept.max_iters:
            state.phase, state.accepted = "done", False
            return Decision(
                state=state.dump(), status=SessionStatus.FAILED,
                reason=(f"evaluator_optimizer: step {result.key!r}: Max iterations "
                        f"({config.accept.max_iters}) exhausted without reaching min_score "
                        f"({config.accept.min_score}). Final score: {evaluation.score}. "
                        f"Scores: {[e.score for e in state.evaluations]}"))
        gate = config.review_gate
        if gate is not None:
            state.phase = "review"
            records = history(ctx, state.evaluations, result)
            context = {"iteration_index": len(records) - 1, "iterations": records,
                       "current_draft": draft, "current_evaluation": evaluation.as_context(),
                       **ctx.variables}
            job = hitl_job(ctx, key=review_key(n), step=gate, context=context,
                           where="pattern.config.review_gate", meta={"iteration": n})
            return Decision(state=state.dump(), schedule=(job,))
        state.current_iteration, state.phase = n + 1, "produce"
        job = _revision_job(ctx, n, draft, evaluation, None)
        return Decision(state=state.dump(), schedule=(job,))

    def _after_review(self, ctx: PlanContext, state: EvaluatorOptimizerState, n: int,
                      result: StepResult) -> Decision:
        draft = ctx.results[produce_key(n)].response
        if result.response.strip().lower() in STOP_WORDS:
            state.phase, state.early_termination = "done", True
            return self._complete(ctx, state, draft, result)
        evaluation = parse_evaluation(ctx.results[state.evaluations[-1].key].response)
        state.current_iteration, state.phase = n + 1, "produce"
        job = _revision_job(ctx, n, draft, evaluation, result.response)
        return Decision(state=state.dump(), schedule=(job,))

    def _complete(self, ctx: PlanContext, state: EvaluatorOptimizerState, draft: str,
                  result: StepResult) -> Decision:
        config = _config(ctx)
        records = history(ctx, state.evaluations, result)
        results = with_result(ctx, result)
        last = records[-1]
        execution_context: dict[str, Any] = {
            "iterations": len(records), "final_score": last["score"],
            "min_score": config.accept.min_score, "max_iters": config.accept.max_iters,
            "history": records, "cumulative_tokens": sum(r.tokens for r in results.values()),
            "last_evaluation": {"score": last["score"], "issues": last["issues"],
                                "fixes": last["fixes"]},
        }
        if state.early_termination:
            execution_context.update(early_termination=True,
                                     termination_reason="user_requested_at_resume")
        return Decision(state=state.dump(), status=SessionStatus.COMPLETED, final_response=draft,
                        artifact_context={**ctx.variables, "last_response": draft,
                                          **execution_context})

    def view(self, ctx: PlanContext) -> dict[str, Any]:
        config = _config(ctx)
        state = EvaluatorOptimizerState.load(ctx.state)
        evaluations = [e for e in state.evaluations
                       if e.key in ctx.results and produce_key(e.iteration) in ctx.results]
        records = history(ctx, evaluations)
        iterations = [{k: r[k] for k in ("iteration", "score", "feedback", "issues", "fixes",
                                          "output")} for r in records]
        accepted = state.accepted
        final_score = records[-1]["score"] if records else None
        return {
            "current_iteration": state.current_iteration,
            "phase": state.phase,
            "iterations": iterations,
            "accepted": accepted,
            "quality_gate_passed": accepted,
            "max_iterations_reached": (not accepted and len(records) >= config.accept.max_iters),
            "final_score": final_score,
            "early_termination": state.early_termination,
        }


class EvaluatorOptimizerPattern(PatternDefinition[EvaluatorOptimizerConfig]):
    pattern_type = "evaluator_optimizer"
    config_model = EvaluatorOptimizerConfig
    schema_def = "evaluatorOptimizerConfig"
    context_names = name_set("draft evaluation iteration iterations iteration_index"
                             " current_draft current_evaluation producer_response")
    planner = EvaluatorOptimizerPlanner()
    state_model = EvaluatorOptimizerState

    def steps(self, config: EvaluatorOptimizerConfig) -> Iterator[StepSite]:
        return optional("pattern.config.review_gate", config.review_gate)

    def own_agent_refs(self, config: EvaluatorOptimizerConfig) -> Iterator[AgentRef]:
        yield "pattern.config.producer", config.producer
        yield "pattern.config.evaluator.agent", config.evaluator.agent

    def prompt_templates(self, config: EvaluatorOptimizerConfig) -> Iterator[str]:
        yield config.producer  # the first draft's input is its prompt, rendered

    def template_fields(self, config: EvaluatorOptimizerConfig) -> Iterator[TemplateField]:
        if config.evaluator.input is not None:
            yield TemplateField("pattern.config.evaluator.input", config.evaluator.input)
        if config.revise_prompt is not None:
            yield TemplateField("pattern.config.revise_prompt", config.revise_prompt)
        yield from super().template_fields(config)

    def shape(self, view: Mapping[str, Any]) -> Shape:
        return shapes.evaluator_optimizer(view)


PATTERN = EvaluatorOptimizerPattern()
