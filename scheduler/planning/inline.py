"""Whether a spec's commits may be planned on the worker's event loop.

A worker plans each commit in a thread (worker/step_runner.py) because planning renders
the spec's templates, CPU work a spec controls (bounded by DURABLE_RENDER_TIMEOUT_S per
template), while the loop keeps renewing leases and serving the worker's other steps.
The hop to the thread and back costs more than a small plan itself (about 0.1 ms of
CPU a step, a quarter of a no-op step's).

So a spec whose every template is text and plain lookups (`{{ topic }}`,
`{{ steps[0].response }}`) plans on the loop: such a render looks up as many names as
the template writes and copies what it writes out, which DURABLE_MAX_RENDER_CHARS caps;
it cannot loop, call, filter, compare or compute. Any other template anywhere in the
spec (a filter, an `if`, a `for`, a comparison, arithmetic), notes (rebuilt from every
result each step) or a `{{ TRACE }}` artifact sends every plan of that spec to the
thread, as before: those renders are bounded by DURABLE_RENDER_TIMEOUT_S, which is too
long to hold the loop.
"""

from __future__ import annotations

from collections.abc import Iterator

from jinja2 import TemplateSyntaxError, nodes

from strands_durable.scheduler.patterns import pattern_for
from strands_durable.scheduler.planning.trace import traced
from strands_durable.scheduler.spec.model import Spec
from strands_durable.scheduler.spec.templates import ENV, condition_source

# Text, names, attribute and item lookups, constants.
PLAIN_NODES: tuple[type[nodes.Node], ...] = (
    nodes.Template, nodes.Output, nodes.TemplateData, nodes.Name, nodes.Getattr,
    nodes.Getitem, nodes.Const,
)


def plain_template(text: str) -> bool:
    """Whether rendering `text` only writes out what it looks up."""
    if "{" not in text:
        return True
    try:
        tree = ENV.parse(text)
    except TemplateSyntaxError:
        return False
    return all(isinstance(node, PLAIN_NODES) for node in tree.find_all(nodes.Node))


def spec_templates(spec: Spec) -> Iterator[str]:
    """Every template planning can render for this spec, as rendered."""
    definition = pattern_for(spec.pattern.type)
    for agent_id in definition.prompt_templates(spec.pattern.config):
        if agent_id in spec.agents:
            yield spec.agents[agent_id].prompt
    for field in definition.template_fields(spec.pattern.config):
        yield condition_source(field.text) if field.condition else field.text
    for artifact in spec.outputs.artifacts if spec.outputs else []:
        yield artifact.path
        yield artifact.from_


def plans_inline(spec: Spec) -> bool:
    """Whether every plan of `spec` is small enough for the event loop."""
    if traced(spec) or (spec.context_policy is not None
                        and spec.context_policy.notes is not None):
        return False
    return all(plain_template(text) for text in spec_templates(spec))
