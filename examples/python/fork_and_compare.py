"""Run a workflow, fork it from a checkpoint with a different input, and compare.

The spec is built in Python (no YAML file): a researcher, then a writer whose tone is an
input. The fork starts from checkpoint 1 (the research committed), so only the writer
runs again, with the new tone; the research is reused, not paid for twice.

    DURABLE_API_URL=http://127.0.0.1:8080 python examples/python/fork_and_compare.py
    python examples/python/fork_and_compare.py --redis redis://127.0.0.1:6379/0
    python examples/python/fork_and_compare.py --print-spec   # the spec as YAML
"""

from __future__ import annotations

import argparse
import os
import sys

from strands_durable import (
    AgentSpec,
    AgentStep,
    ChainConfig,
    Client,
    Inputs,
    InputVarSpec,
    Pattern,
    Runtime,
    ScriptConfig,
    ScriptRule,
    Spec,
    dump_spec,
    validate_spec,
)


def build_spec() -> Spec:
    """Two steps; the offline `scripted` provider answers by rule, the writer by tone."""
    script = ScriptConfig(rules=(
        ScriptRule(agent="researcher", reply="Tides rise and fall twice a day."),
        ScriptRule(agent="writer", contains="formal",
                   reply="The tides rise and fall twice daily."),
        ScriptRule(agent="writer", contains="playful",
                   reply="Twice a day the sea pops in and wanders off again!"),
    ))
    return Spec(
        version=0, name="fork-and-compare",
        runtime=Runtime(provider="scripted", script=script),
        inputs=Inputs(required={"tone": InputVarSpec(type="string")}),
        agents={"researcher": AgentSpec(prompt="You collect facts."),
                "writer": AgentSpec(prompt="You write one sentence.")},
        pattern=Pattern(type="chain", config=ChainConfig(steps=[
            AgentStep(agent="researcher", input="Facts about tides."),
            AgentStep(agent="writer",
                      input="In a {{ tone }} tone, write up: {{ steps[0].response }}"),
        ])))


def connect(redis: str | None) -> Client:
    """An HTTP client from the environment, or one on Redis when --redis was given."""
    if redis is not None:
        return Client.connect_redis(redis or None)
    url = os.environ.get("DURABLE_API_URL", "http://127.0.0.1:8080")
    return Client(url, token=os.environ.get("DURABLE_API_TOKEN"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", nargs="?", const="", metavar="URL")
    parser.add_argument("--print-spec", action="store_true")
    args = parser.parse_args()
    spec = build_spec()
    if args.print_spec:
        print(dump_spec(spec), end="")  # YAML that `durable run` accepts
        return 0
    # The checks `durable validate` runs, here and before anything is sent.
    problems = validate_spec(spec, variables={"tone": "formal"})
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2

    with connect(args.redis) as client:
        first = client.submit(spec, variables={"tone": "formal"}).session_id
        original = client.wait(first, timeout=120)
        # Checkpoint n is the session after its n-th committed step.
        forked = client.fork(first, 1, variables={"tone": "playful"}).session_id
        fork = client.wait(forked, timeout=120)
        rerun = [e.step for e in client.events(forked, follow=False)
                 if e.type == "step_completed"]
        print(f"original {first}: {original.status}")
        print(f"  {original.final_response}")
        print(f"fork {forked} from checkpoint 1: {fork.status}, ran again: {rerun}")
        print(f"  {fork.final_response}")
        same = original.final_response == fork.final_response
        print("the answers are " + ("the same" if same else "different"))
    return 0 if original.status == fork.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
