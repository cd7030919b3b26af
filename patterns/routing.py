"""routing: a router agent picks one route; the route's `then` steps run as a chain.

Steps (keys), one at a time:
  router, router:retry:<n>   the router; retries after a malformed reply (n <= max_retries)
  router:review              optional `router.review_router` HITL gate
  route:<name>:<i>           step i of the chosen route

strands-cli behaviours matched (exec/routing.py, exec/chain.py @929836b):
- The router's input is `router.input` rendered with the variables, plus
  '\\n\\nRespond with valid JSON: {"route": "<route_name>"}'; each retry re-sends the
  input with 'Previous response was malformed. Respond with ONLY valid JSON: ...'.
  The router's conversation continues across retries (one lane, `routing:router`,
  kept apart from the route steps' lanes: strands-cli runs the route with a fresh
  agent cache, so even the router's own agent starts a new conversation there).
- A reply that is not JSON {"route": "<string>"} (parsed tolerantly: code fences and
  prose around it are fine), or that names an UNKNOWN route, is retried up to
  `router.max_retries` times, then the session fails naming the step, the reply and
  (for an unknown route) the valid routes. An unknown route's retry says which routes
  exist. (strands-cli fails at once on an unknown route; issue 3 asks for the retry: a
  model that misnames a route usually gets it right when told the names.)
- review_router: "approved" keeps the choice, "route:<name>" overrides it (an unknown
  name fails), anything else fails.
- Route steps see the variables, `router` {chosen_route, response}, `steps` (this
  route's history: index, agent, response, tokens and strands-cli's tokens_estimated;
  HITL steps add type/prompt),
  `hitl_response` (latest HITL step), `last_response` and the step's `vars`;
  `chosen_route`, `router_response`, `router_agent` are aliases the loader allows.
- A route with no steps fails ("Route '<name>' has no steps to execute").
- Artifacts see the variables, `router`, `steps`, `last_response`, `chosen_route`,
  `router_agent` (strands-cli's RunResult.variables + execution_context).

pattern_state (stored, state.RoutingState): {"phase": "router" | "review" | "route" | "done",
  "router_attempts": n, "router_key": key of the accepted router reply | None,
  "router_choice": name | None, "current_step": i (next route step),
  "routed_agent_completed": bool}
pattern_state (view): + "step_history" of the route, "router_response",
  "final_response" (once the route completed).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from pydantic import Field

from strands_durable.errors import SpecError
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
    indexed,
    name_set,
    optional,
)
from strands_durable.patterns.json_reply import extract_json
from strands_durable.patterns.shapes import Shape
from strands_durable.patterns.state import RoutingState
from strands_durable.spec.steps import AgentStep, HitlStep, PatternConfig, SpecModel, Step


class RouterConfig(SpecModel):
    """The routing pattern's router: the agent that picks a route (asked again up to
    `max_retries`)."""

    agent: str
    input: str | None = None
    max_retries: int = 2
    review_router: Step | None = None


class Route(SpecModel):
    """One routing choice: the steps that run when the router picks it."""

    then: list[Step] = Field(default_factory=list)


class RoutingConfig(PatternConfig):
    """The routing pattern: a router agent picks one of the routes, whose steps then run."""

    router: RouterConfig
    routes: dict[str, Route]

ROUTER_KEY = "router"
REVIEW_KEY = "router:review"
ROUTER_LANE = "routing:router"
ROUTE_FORMAT = 'Respond with valid JSON: {"route": "<route_name>"}'
RETRY_NOTE = ('Previous response was malformed. '
              'Respond with ONLY valid JSON: {"route": "<route_name>"}')
UNKNOWN_ROUTE_NOTE = ("Previous response chose the unknown route {route!r}. Valid routes: "
                      '{valid}. Respond with ONLY valid JSON: {{"route": "<route_name>"}}')


def router_key(attempt: int) -> str:
    """Attempt 0 is `router`, attempt n is `router:retry:<n>`."""
    return ROUTER_KEY if attempt == 0 else f"{ROUTER_KEY}:retry:{attempt}"


def route_key(route: str, index: int) -> str:
    return f"route:{route}:{index}"


def _config(ctx: PlanContext) -> RoutingConfig:
    config = ctx.spec.pattern.config
    assert isinstance(config, RoutingConfig)
    return config



def parse_route(reply: str) -> str | None:
    """The route a router reply names, or None when it is not {"route": "<str>"}."""
    try:
        data = extract_json(reply, kind=dict)
    except ValueError:
        return None
    route = data.get("route")
    return route if isinstance(route, str) else None



def route_history(ctx: PlanContext, route: str | None, extra: StepResult | None = None
                  ) -> list[dict[str, Any]]:
    """The chosen route's step records (chain shape), by index."""
    if not route:
        return []
    prefix = f"route:{route}:"
    steps = _config(ctx).routes[route].then
    records = []
    for result in with_result(ctx, extra).values():
        if not result.key.startswith(prefix):
            continue
        index = int(result.key[len(prefix):])
        step = steps[index] if index < len(steps) else None
        record: dict[str, Any] = {"index": index, "agent": result.agent,
                                  "response": result.response, "tokens": result.tokens,
                                  "tokens_estimated": result.tokens}
        if isinstance(step, HitlStep):
            record.update(type="hitl", prompt=step.prompt, tokens_estimated=0)
        records.append(record)
    return sorted(records, key=lambda r: r["index"])


def _router_context(route: str, response: str) -> dict[str, Any]:
    return {"chosen_route": route, "response": response}


def _route_context(ctx: PlanContext, route: str, router_response: str,
                   steps: list[dict[str, Any]], step_vars: Mapping[str, Any]) -> dict[str, Any]:
    context: dict[str, Any] = {
        **ctx.variables,
        "router": _router_context(route, router_response),
        "chosen_route": route, "router_response": router_response,
        "router_agent": _config(ctx).router.agent,
        "steps": steps, "last_response": steps[-1]["response"] if steps else "",
    }
    for record in reversed(steps):
        if record.get("type") == "hitl":
            context["hitl_response"] = record["response"]
            break
    return {**context, **step_vars}


def _valid_routes(ctx: PlanContext) -> str:
    return ", ".join(f"'{r}'" for r in _config(ctx).routes)


def _router_job(ctx: PlanContext, attempt: int, unknown: str | None = None) -> StepJob:
    """Attempt `attempt` of the router; a retry after an unknown route names the routes."""
    router = _config(ctx).router
    job = agent_job(ctx, key=router_key(attempt), agent=router.agent,
                    input_template=router.input, context=dict(ctx.variables),
                    where="pattern.config.router.input", lane=ROUTER_LANE,
                    meta={"attempt": attempt})
    # The format note is appended to the rendered text, never to template source.
    if attempt == 0:
        note = ROUTE_FORMAT
    elif unknown is not None:
        note = UNKNOWN_ROUTE_NOTE.format(route=unknown, valid=_valid_routes(ctx))
    else:
        note = RETRY_NOTE
    return replace(job, input=f"{job.input}\n\n{note}")


def _route_job(ctx: PlanContext, route: str, index: int, router_response: str,
               steps: list[dict[str, Any]]) -> StepJob:
    step = _config(ctx).routes[route].then[index]
    where = f"pattern.config.routes.{route}.then[{index}]"
    key = route_key(route, index)
    meta = {"route": route, "index": index}
    if isinstance(step, HitlStep):
        context = _route_context(ctx, route, router_response, steps, {})
        return hitl_job(ctx, key=key, step=step, context=context, where=where, meta=meta)
    assert isinstance(step, AgentStep)
    context = _route_context(ctx, route, router_response, steps, step.vars or {})
    return agent_job(ctx, key=key, agent=step.agent, input_template=step.input,
                     context=context, where=f"{where}.input", meta=meta)


class RoutingPlanner:
    def start(self, ctx: PlanContext) -> Decision:
        state = RoutingState(phase="router", router_attempts=1, router_key=None,
                             router_choice=None, current_step=0, routed_agent_completed=False)
        return Decision(state=state.dump(), schedule=(_router_job(ctx, 0),))

    def advance(self, ctx: PlanContext, result: StepResult) -> Decision:
        state = RoutingState.load(ctx.state)
        if result.key == ROUTER_KEY or result.key.startswith(f"{ROUTER_KEY}:retry:"):
            return self._after_router(ctx, state, result)
        if result.key == REVIEW_KEY:
            return self._after_review(ctx, state, result)
        if result.key.startswith("route:"):
            return self._after_route_step(ctx, state, result)
        raise ValueError(f"routing: unexpected step {result.key!r}")

    # --- router -----------------------------------------------------------------

    def _after_router(self, ctx: PlanContext, state: RoutingState, result: StepResult
                      ) -> Decision:
        config = _config(ctx)
        attempt = 0 if result.key == ROUTER_KEY else int(result.key.rsplit(":", 1)[1])
        route = parse_route(result.response)
        unknown = route if route is not None and route not in config.routes else None
        if route is None or unknown is not None:
            if attempt < config.router.max_retries:
                state.phase, state.router_attempts = "router", attempt + 2
                return Decision(state=state.dump(),
                                schedule=(_router_job(ctx, attempt + 1, unknown),))
            state.phase = "done"
            attempts = config.router.max_retries + 1
            if unknown is None:
                problem = (f"router failed to produce valid JSON after {attempts} attempts; "
                           'expected {"route": "<route_name>"}')
            else:
                problem = (f"invalid route '{unknown}' selected by router after {attempts} "
                           f"attempts. Valid routes: {_valid_routes(ctx)}")
            return Decision(state=state.dump(), status=SessionStatus.FAILED,
                            reason=(f"routing: step {result.key!r}: {problem}; "
                                    f"last reply: {excerpt(result.response)!r}"))
        state.router_key, state.router_choice = result.key, route
        review = config.router.review_router
        if review is not None:
            if not isinstance(review, HitlStep):
                raise SpecError("<spec>", "pattern.config.router.review_router",
                                "review_router must be a HITL step (type: hitl)")
            state.phase = "review"
            context = {**ctx.variables, "router": _router_context(route, result.response)}
            job = hitl_job(ctx, key=REVIEW_KEY, step=review, context=context,
                           where="pattern.config.router.review_router",
                           meta={"chosen_route": route})
            return Decision(state=state.dump(), schedule=(job,))
        return self._enter_route(ctx, state, route, result.response)

    def _after_review(self, ctx: PlanContext, state: RoutingState, result: StepResult
                      ) -> Decision:
        config = _config(ctx)
        answer = result.response.strip()
        original = str(state.router_choice)
        router_response = ctx.results[str(state.router_key)].response
        if answer.lower() == "approved":
            route = original
        elif answer.lower().startswith("route:"):
            wanted = answer[len("route:"):].strip()
            matches = [r for r in config.routes if r == wanted] or [
                r for r in config.routes if r.lower() == wanted.lower()]
            if not matches:
                valid = ", ".join(f"'{r}'" for r in config.routes)
                state.phase = "done"
                return Decision(
                    state=state.dump(), status=SessionStatus.FAILED,
                    reason=(f"routing: step {REVIEW_KEY!r}: invalid route '{wanted}' in the "
                            f"review response. Valid routes: {valid}"))
            route = matches[0]
        else:
            state.phase = "done"
            return Decision(
                state=state.dump(), status=SessionStatus.FAILED,
                reason=(f"routing: step {REVIEW_KEY!r}: invalid router review response "
                        f"{excerpt(answer)!r}; expected 'approved' or 'route:<route_name>'"))
        state.router_choice = route
        return self._enter_route(ctx, state, route, router_response)

    def _enter_route(self, ctx: PlanContext, state: RoutingState, route: str,
                     router_response: str) -> Decision:
        if not _config(ctx).routes[route].then:
            state.phase = "done"
            return Decision(state=state.dump(), status=SessionStatus.FAILED,
                            reason=f"routing: Route '{route}' has no steps to execute")
        state.phase, state.current_step = "route", 0
        return Decision(state=state.dump(),
                        schedule=(_route_job(ctx, route, 0, router_response, []),))

    # --- route ------------------------------------------------------------------

    def _after_route_step(self, ctx: PlanContext, state: RoutingState, result: StepResult
                          ) -> Decision:
        route = str(state.router_choice)
        router_response = ctx.results[str(state.router_key)].response
        steps = route_history(ctx, route, result)
        done = int(result.key.rsplit(":", 1)[1])
        nxt = done + 1
        state.current_step = nxt
        if nxt < len(_config(ctx).routes[route].then):
            return Decision(state=state.dump(),
                            schedule=(_route_job(ctx, route, nxt, router_response, steps),))
        state.phase, state.routed_agent_completed = "done", True
        artifact_context = {
            **ctx.variables,
            "router": _router_context(route, router_response),
            "steps": steps, "last_response": result.response,
            "chosen_route": route, "router_agent": _config(ctx).router.agent,
            "router_response": router_response,
        }
        return Decision(state=state.dump(), status=SessionStatus.COMPLETED,
                        final_response=result.response, artifact_context=artifact_context)

    # --- view -------------------------------------------------------------------

    def view(self, ctx: PlanContext) -> dict[str, Any]:
        state = RoutingState.load(ctx.state)
        key = state.router_key
        history = route_history(ctx, state.router_choice)
        view: dict[str, Any] = {
            "phase": state.phase,
            "router_choice": state.router_choice,
            "routed_agent_completed": state.routed_agent_completed,
            "router_attempts": state.router_attempts,
            "router_response": (ctx.results[key].response
                                if key is not None and key in ctx.results else None),
            "current_step": state.current_step,
            # The seed's shape: templates' strands-cli alias `tokens_estimated` left out.
            "step_history": [{k: v for k, v in r.items() if k != "tokens_estimated"}
                             for r in history],
        }
        if view["routed_agent_completed"] and history:
            view["final_response"] = history[-1]["response"]
        return view


class RoutingPattern(PatternDefinition[RoutingConfig]):
    pattern_type = "routing"
    parts_field = "routes"
    config_model = RoutingConfig
    schema_def = "routingConfig"
    context_names = name_set("router steps router_response chosen_route router_agent")
    planner = RoutingPlanner()
    state_model = RoutingState

    def steps(self, config: RoutingConfig) -> Iterator[StepSite]:
        base = "pattern.config"
        yield from optional(f"{base}.router.review_router", config.router.review_router)
        for name, route in config.routes.items():
            yield from indexed(f"{base}.routes.{name}.then", route.then)

    def own_agent_refs(self, config: RoutingConfig) -> Iterator[AgentRef]:
        yield "pattern.config.router.agent", config.router.agent

    def template_fields(self, config: RoutingConfig) -> Iterator[TemplateField]:
        if config.router.input is not None:
            yield TemplateField("pattern.config.router.input", config.router.input)
        yield from super().template_fields(config)

    def check(self, config: RoutingConfig, source: str) -> None:
        if not config.routes:
            raise SpecError(source, "pattern.config.routes", "needs at least one route")

    def shape(self, view: Mapping[str, Any]) -> Shape:
        return shapes.routing(view)


PATTERN = RoutingPattern()
