"""CPU of one model turn through a real provider's SDK (the OpenAI one), in process: a
model built as a worker builds it, `--turns` turns of `call_agent` against
bench.limited_llm (an OpenAI-compatible server on loopback, no limits in the way, no
delay), CPU time (`time.process_time`, this process only: the fake server's threads
count too, the same for every run) divided by the turns. What it depends on: the reply's
size (a few words here) and the SDK's version; the server's share is a constant beside
the client's.

    python -m bench.provider_turn [--turns 50]

Measured here (2 cores, load ~1.5): 50-75 ms a turn when the SDK made a client per
request, 10-14 ms with one client per model and event loop (worker/providers/openai.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from bench.limited_llm import limited_llm
from strands_durable.provider_policy import current_provider_policy
from strands_durable.worker.agent_call import call_agent
from strands_durable.worker.providers import ModelConfig, build_model


async def cpu_ms_per_turn(host: str, turns: int) -> float:
    model = build_model(ModelConfig(provider="openai", agent_id="bench", host=host,
                                    model_id="gpt-bench"))
    await call_agent(model, system_prompt=None, history=[], prompt="warm up")
    started = time.process_time()
    for n in range(turns):
        await call_agent(model, system_prompt=None, history=[], prompt=f"turn {n}")
    return (time.process_time() - started) / turns * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.provider_turn", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=50)
    args = parser.parse_args(argv)
    with limited_llm(per_second=100_000, at_once=1_000, delay_s=0.0) as server:
        host = server.url("/v1")
        os.environ.setdefault("OPENAI_API_KEY", "bench")
        os.environ["DURABLE_OPENAI_HOSTS"] = host  # the operator lists the fake
        current_provider_policy.cache_clear()
        ms = asyncio.run(cpu_ms_per_turn(host, args.turns))
    print(f"openai provider: {ms:.1f} ms of CPU per model turn ({args.turns} turns, "
          "in process, against bench.limited_llm on loopback)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
