"""One small spec per pattern, run on the `scripted` provider with rules that make its
branching real, for the recovery drills and the chaos mix. Five are strands-cli's own
examples (tests/fixtures/strands-cli, unchanged) with scripted rules; routing and
orchestrator_workers have none there, so they are written here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from helpers import FIXTURES

from strands_durable.spec.loader import LoadedSpec, load_spec_text
from strands_durable.spec.script import ScriptConfig

SHARED = FIXTURES / "strands-cli"

ROUTING = """
version: 0
name: support-router
runtime: {provider: scripted}
agents:
  router: {prompt: "You classify support requests."}
  billing: {prompt: "You handle billing."}
  faq: {prompt: "You answer FAQs."}
pattern:
  type: routing
  config:
    router:
      agent: router
      input: "Classify: {{ query }}"
      max_retries: 2
    routes:
      faq:
        then:
          - {agent: faq, input: "Answer {{ query }}"}
      billing:
        then:
          - {agent: billing, input: "Look up the invoice for {{ query }}"}
          - {agent: billing, input: "Reply to {{ query }} using {{ last_response }}"}
inputs:
  values: {query: "I was charged twice"}
outputs:
  artifacts:
    - path: routed.md
      from: "{{ router.chosen_route }}: {{ last_response }}"
"""

ORCHESTRATOR = """
version: 0
name: two-round-swarm
runtime: {provider: scripted}
agents:
  planner: {prompt: "You plan research on {{ topic }}."}
  worker: {prompt: "You research one subtask."}
  editor: {prompt: "You merge findings."}
pattern:
  type: orchestrator_workers
  config:
    orchestrator:
      agent: planner
      limits: {max_workers: 2, max_rounds: 3}
    worker_template:
      agent: worker
    reduce:
      agent: editor
      input: "Merge {{ num_workers }} findings: {% for w in workers %}{{ w.response }};{% endfor %}"
inputs:
  values: {topic: tides}
outputs:
  artifacts:
    - path: swarm.md
      from: "{{ round_count }} rounds, {{ num_workers }} workers: {{ last_response }}"
"""


@dataclass(frozen=True)
class PatternCase:
    name: str
    text: str
    source: str
    rules: tuple[dict[str, Any], ...] = ()
    from_fixture: bool = False

    def load(self, delay_s: float = 0.0, **variables: str) -> LoadedSpec:
        script = ScriptConfig.model_validate({"delay_s": delay_s, "rules": list(self.rules)})
        return load_spec_text(self.text, self.source, variables or None,
                              provider="scripted", script=script)


def _shared(name: str) -> tuple[str, str]:
    path = SHARED / name
    return path.read_text(), str(path)


CASES: dict[str, PatternCase] = {
    "chain": PatternCase("chain", *_shared("chain-3-step-research.yaml")),
    "workflow": PatternCase("workflow", *_shared("workflow-parallel-research.yaml")),
    "parallel": PatternCase("parallel", *_shared("parallel-with-reduce.yaml")),
    "routing": PatternCase("routing", ROUTING, "routing.yaml", rules=(
        {"agent": "router",
         "reply": 'Looks like money.\n```json\n{"route": "billing"}\n```'},)),
    "evaluator_optimizer": PatternCase(
        "evaluator_optimizer", *_shared("evaluator-optimizer-writing-openai.yaml"), rules=(
            {"agent": "writer", "contains": "Please revise the draft",
             "reply": "Draft two: AI, explained with depth."},
            {"agent": "writer", "reply": "Draft one: AI is big."},
            {"agent": "critic", "contains": "Draft two",
             "reply": '{"score": 91, "issues": [], "fixes": []}'},
            {"agent": "critic",
             "reply": 'Verdict:\n```json\n{"score": 55, "issues": ["thin"], '
                      '"fixes": ["add depth"]}\n```'})),
    "orchestrator_workers": PatternCase(
        "orchestrator_workers", ORCHESTRATOR, "swarm.yaml", rules=(
            {"agent": "planner", "contains": "This is round 3", "reply": "[]"},
            {"agent": "planner", "contains": "This is round 2",
             "reply": '[{"task": "check the moon data"}]'},
            {"agent": "planner",
             "reply": '```json\n[{"task": "find tide tables"}, '
                      '{"task": "find harbour charts"}]\n```'})),
    "graph": PatternCase("graph", *_shared("graph-loop-with-break.yaml")),
}
