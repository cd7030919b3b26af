"""The chain specs the benchmark runs: N steps of one agent on the `scripted` provider."""

from __future__ import annotations

from functools import cache

from strands_durable.settings import current_limits
from strands_durable.spec.loader import LoadedSpec, load_spec_text

CHAIN = """\
version: 0
name: bench-chain-{steps}
runtime:
  provider: scripted
  model_id: scripted-1
  script:
    delay_s: {delay}
    rules:
      - reply: "ok"
agents:
  a:
    prompt: "You are bench agent a."
pattern:
  type: chain
  config:
    steps:
{body}
"""


def chain_text(steps: int, delay_s: float = 0.0) -> str:
    body = "\n".join(f'      - agent: a\n        input: "step {i}"' for i in range(steps))
    return CHAIN.format(steps=steps, delay=delay_s, body=body)


@cache
def chain_spec(steps: int, delay_s: float = 0.0) -> LoadedSpec:
    text = chain_text(steps, delay_s)
    # A 5,000-step chain is past the default spec limits (nodes, bytes): raised here for
    # the bench's own specs only, never for the workers or the API.
    base = current_limits()
    limits = base.model_copy(update={
        "max_spec_nodes": max(base.max_spec_nodes, 6 * steps + 100),
        "max_spec_bytes": max(base.max_spec_bytes, 2 * len(text)),
        "max_spec_expanded_bytes": max(base.max_spec_expanded_bytes, 4 * len(text))})
    return load_spec_text(text, f"<bench chain {steps}>", limits=limits)
