"""The chain specs the benchmark runs: N steps of one agent on the `scripted` provider."""

from __future__ import annotations

from functools import cache

from strands_durable.scheduler.spec.loader import LoadedSpec, load_spec_text

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
    return load_spec_text(chain_text(steps, delay_s), f"<bench chain {steps}>")
