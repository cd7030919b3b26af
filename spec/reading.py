"""Reading a spec's text and parsing it (YAML or JSON) within the spec limits.

Before anything else, a spec's size is bounded (settings.py `Limits`): its text, its
nesting depth, and its nodes and characters once YAML aliases are expanded, so a small
alias bomb or a deeply nested document is refused while it is being read, not after it
has been expanded (or has overflowed the stack). YAML duplicate keys are refused too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from strands_durable.errors import SpecError
from strands_durable.settings import Limits
from strands_durable.spec.problems import join_path

__all__ = ["check_data_shape", "check_spec_size", "parse_yaml", "read_text", "utf8"]


def utf8(text: str, source: str, where: str) -> bytes:
    """`text` as UTF-8; a lone surrogate (JSON can carry one as \\ud800) is refused."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise SpecError(source, where, f"not valid Unicode text: {error.reason} at "
                        f"character {error.start}") from None


def check_spec_size(size: int, source: str, limits: Limits) -> None:
    if size > limits.max_spec_bytes:
        raise SpecError(source, "", f"the spec is {size:,} bytes; the limit is "
                        f"{limits.max_spec_bytes:,} (DURABLE_MAX_SPEC_BYTES)")


def check_data_shape(data: Any, source: str, path: str, limits: Limits) -> None:
    """Nesting depth, node count and characters of parsed data (a spec, variables),
    walked without recursion so any depth gets an answer, not a RecursionError."""
    nodes = chars = 0
    stack: list[tuple[Any, int, str]] = [(data, 0, path)]
    while stack:
        value, depth, where = stack.pop()
        nodes += 1
        if isinstance(value, str):
            chars += len(value)
            if not value.isascii():
                utf8(value, source, where)
        elif isinstance(value, Mapping | list | tuple):
            if depth >= limits.max_spec_depth:
                raise SpecError(source, where, f"nested deeper than {limits.max_spec_depth} "
                                "levels (DURABLE_MAX_SPEC_DEPTH)")
            items = value.items() if isinstance(value, Mapping) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    chars += len(key)
                    if not key.isascii():
                        utf8(key, source, where)
                part = f"[{key}]" if isinstance(key, int) else str(key)
                stack.append((item, depth + 1, join_path(where, part)))
        if nodes > limits.max_spec_nodes:
            raise SpecError(source, path, f"more than {limits.max_spec_nodes:,} values "
                            "(DURABLE_MAX_SPEC_NODES)")
        if chars > limits.max_spec_expanded_bytes:
            raise SpecError(source, path, f"more than {limits.max_spec_expanded_bytes:,} "
                            "characters of text (DURABLE_MAX_SPEC_EXPANDED_BYTES)")


def read_text(path: Path, source: str, limits: Limits) -> str:
    try:
        size = path.stat().st_size
    except OSError as error:
        raise SpecError(source, "", f"cannot read file: {error.strerror or error}") from error
    if path.is_file():  # a pipe or a device has no size to check before reading
        check_spec_size(size, source, limits)
    try:
        with path.open("rb") as handle:  # bounded: a pipe or /dev/zero may never end
            data = handle.read(limits.max_spec_bytes + 1)
        check_spec_size(len(data), source, limits)
        # Universal newlines, as Path.read_text gave (the spec's hash is of this text).
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as error:
        raise SpecError(source, "", f"not UTF-8 text: {error}") from error
    except OSError as error:
        raise SpecError(source, "", f"cannot read file: {error.strerror or error}") from error


class _TooLarge(yaml.MarkedYAMLError):
    """The document is over one of the spec limits (reported without 'invalid YAML')."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys (PyYAML silently keeps the last one) and
    bounds the document while composing it: nesting depth, and nodes and characters
    counted with every alias expanded (an alias bomb is a few hundred bytes that
    expand to billions of nodes), and no alias inside the node it names."""

    def __init__(self, stream: str, limits: Limits) -> None:
        super().__init__(stream)
        self.limits = limits
        self._depth = 0
        self._nodes = 0
        self._chars = 0
        self._sizes: dict[int, tuple[int, int]] = {}  # id(node) -> expanded size

    def compose_node(self, parent: Any, index: Any) -> Any:
        event: Any = self.peek_event()
        mark: Any = event.start_mark
        if isinstance(event, yaml.AliasEvent):
            node = self.anchors.get(event.anchor)
            if node is not None:
                size = self._sizes.get(id(node))
                if size is None:
                    raise _TooLarge(None, None, f"alias *{event.anchor} is inside the node "
                                    "it refers to (a recursive alias)", mark)
                self._count(*size, mark)
            return super().compose_node(parent, index)
        nested = isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent)
        if nested:
            self._depth += 1
            if self._depth > self.limits.max_spec_depth:
                raise _TooLarge(None, None, f"nested deeper than {self.limits.max_spec_depth}"
                                " levels (DURABLE_MAX_SPEC_DEPTH)", event.start_mark)
        nodes, chars = self._nodes, self._chars
        text = event.value if isinstance(event, yaml.ScalarEvent) else ""
        self._count(1, len(text), event.start_mark)
        node = super().compose_node(parent, index)
        self._sizes[id(node)] = (self._nodes - nodes, self._chars - chars)
        if nested:
            self._depth -= 1
        return node

    def _count(self, nodes: int, chars: int, mark: Any) -> None:
        self._nodes += nodes
        self._chars += chars
        if self._nodes > self.limits.max_spec_nodes:
            raise _TooLarge(None, None, f"more than {self.limits.max_spec_nodes:,} values "
                            "with aliases expanded (DURABLE_MAX_SPEC_NODES)", mark)
        if self._chars > self.limits.max_spec_expanded_bytes:
            raise _TooLarge(None, None, f"more than {self.limits.max_spec_expanded_bytes:,} "
                            "characters of text with aliases expanded "
                            "(DURABLE_MAX_SPEC_EXPANDED_BYTES)", mark)


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool):
            continue  # complex keys: leave them to the schema
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"duplicate key {key!r}",
                key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, source: str, limits: Limits) -> Any:
    """YAML (JSON text is parsed as JSON: YAML rejects the tabs JSON may indent with)."""
    if text.lstrip().startswith("{"):
        data = _parse_json(text, source, limits)
        check_data_shape(data, source, "", limits)
        return data
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text, limits)  # its reader checks the characters already
        data = loader.get_single_data()
    except _TooLarge as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SpecError(source, where, str(error.problem)) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        context = f" ({error.context})" if error.context else ""
        raise SpecError(source, where, f"invalid YAML: {error.problem}{context}") from error
    except yaml.YAMLError as error:
        raise SpecError(source, "", f"invalid YAML: {error}") from error
    finally:
        if loader is not None:
            loader.dispose()
    # Composing bounded the expanded size; this also refuses text that is not valid
    # Unicode (a "\\ud800" escape decodes to a lone surrogate).
    check_data_shape(data, source, "", limits)
    return data



_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _json_depth_problem(text: str, limits: Limits) -> tuple[int, int] | None:
    """(line, column) where JSON text nests deeper than the limit, else None (checked
    before parsing: the JSON parser recurses, and 5,000 levels overflow it)."""
    # Strings blanked to same-length filler keep every offset where it was.
    bare = _JSON_STRING.sub(lambda m: "_" * len(m.group()), text)
    depth = 0
    for match in _JSON_BRACKET.finditer(bare):
        depth += 1 if match.group() in "[{" else -1
        if depth > limits.max_spec_depth:
            at = match.start()
            line = text.count("\n", 0, at) + 1
            return line, at - (text.rfind("\n", 0, at) + 1) + 1
    return None


def _parse_json(text: str, source: str, limits: Limits) -> Any:
    deep = _json_depth_problem(text, limits)
    if deep is not None:
        raise SpecError(source, f"line {deep[0]}, column {deep[1]}",
                        f"nested deeper than {limits.max_spec_depth} levels "
                        "(DURABLE_MAX_SPEC_DEPTH)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        raise SpecError(source, where, f"invalid JSON: {error.msg}") from error


