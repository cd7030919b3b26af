"""The arq reference for a step that calls a model: an arq job that builds a Strands
`Agent` on the same `scripted` model our bench chain uses, restores the same
conversation our step would restore (its lane up to that step, read from Redis),
calls it with the same prompt and stores the reply. No durability: no fence, no
journal, no commit of the new messages, no planning of the next step.

`seed` writes the conversations and returns the job arguments; `agent_step` is the job.
With BENCH_ARQ_LEAN=1 the job's Strands gets the same trims as our worker's
(worker/lean_strands.py: no JSON for spans that record nothing, plain-data copies,
plugin discovery remembered per class): both sides given the same optimizations.
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

from strands import Agent
from strands.agent.conversation_manager import NullConversationManager
from strands.models.model import Model

from bench.specs import chain_spec
from strands_durable.worker import lean_strands
from strands_durable.worker.execute import model_config
from strands_durable.worker.providers import build_model
from strands_durable.worker.system_prompt import system_prompt

AGENT = "a"


@cache
def _model_and_prompt(steps: int) -> tuple[Model, str]:
    spec = chain_spec(steps).spec
    model: Model = build_model(model_config(spec, AGENT))
    return model, system_prompt(spec, AGENT, spec.agents[AGENT].prompt)


def message(role: str, text: str) -> str:
    return json.dumps({"role": role, "content": [{"text": text}]})


def seed_lane(steps: int) -> list[str]:
    """A whole chain's lane as our steps leave it: prompt and reply per step."""
    return [m for k in range(steps) for m in (message("user", f"step {k}"),
                                              message("assistant", "ok"))]


LEAN = os.environ.get("BENCH_ARQ_LEAN") == "1"


async def agent_step(ctx: dict[str, Any], lane: str, upto: int, prompt: str, steps: int,
                     results: str, field: str) -> str:
    if LEAN:
        lean_strands.install()  # as our worker does before every agent call
    redis = ctx["redis"]
    raw = await redis.lrange(lane, 0, upto - 1) if upto else []
    model, instructions = _model_and_prompt(steps)
    agent = Agent(model=model, system_prompt=instructions,
                  messages=[json.loads(m) for m in raw],
                  # The same conversation as ours (Strands' default window would trim it).
                  conversation_manager=NullConversationManager(), callback_handler=None)
    reply = str(await agent.invoke_async(prompt)).strip()
    await redis.hset(results, field, reply)
    return reply
