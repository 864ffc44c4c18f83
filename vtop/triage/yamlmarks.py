"""YAML with line numbers: every mapping remembers where it and each of its keys came from.

Rule errors must say file:line and rule id in one line. PyYAML's composer knows every node's
mark; this loader keeps the line of each mapping and of each key on a `dict` subclass, so the
rule loader can point at the exact key that is wrong. Duplicate keys are errors (plain PyYAML
silently keeps the last one, which hides typos in hand-written rules).

Rule files come from strangers, so the loader is bounded (`vtop.triage.cost`): a document
nests at most `MAX_YAML_DEPTH` collections and holds at most `MAX_YAML_NODES` nodes once its
aliases are expanded (an alias bomb — nine anchors, each nine times the one before — is a
1 KB file that expands to a billion nodes; it is refused before anything walks it, and so is an
alias that contains itself). Mapping keys are text or numbers, never collections. An error
quotes at most a few dozen characters of what it found.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import AliasEvent

from vtop.triage.cost import (
    MAX_YAML_DEPTH,
    MAX_YAML_FLOW_DEPTH,
    MAX_YAML_NODES,
    one_line,
    quote,
)


class LineDict(dict[str, Any]):
    """A YAML mapping with `line` (of the mapping) and `lines[key]` (of each key), 1-based."""

    line: int = 0

    def __init__(self) -> None:
        super().__init__()
        self.lines: dict[str, int] = {}

    def line_of(self, key: str) -> int:
        return self.lines.get(key, self.line)


class YamlError(ValueError):
    """`line`: where the parser found the problem; `start`: where the construct it was
    parsing began (a bracket left open), which is often where the mistake is."""

    def __init__(self, line: int, message: str, start: int | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.start = line if start is None else start


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, composing at most `MAX_YAML_DEPTH` deep and refusing a document
    whose expanded size passes `MAX_YAML_NODES` (aliases count for what they stand for)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._composed = 0

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        if self.flow_level >= MAX_YAML_FLOW_DEPTH:
            line = self.get_mark().line + 1
            raise YamlError(line, f"[…] and {{…}} nest more than {MAX_YAML_FLOW_DEPTH} deep")
        super().fetch_flow_collection_start(TokenClass)

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(AliasEvent):
            return super().compose_node(parent, index)
        self._composed += 1
        if self._composed > MAX_YAML_NODES:  # counted as they come: the parse stops here
            line = self.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
            raise YamlError(line, f"more than {MAX_YAML_NODES} YAML nodes in one document")
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise YamlError(mark.line + 1, f"YAML nests more than {MAX_YAML_DEPTH} deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> yaml.Node | None:
        node = super().compose_document()
        if node is not None:
            _expanded_size(node)
        return node


def _expanded_size(root: yaml.Node) -> int:
    """Nodes in the document once every alias is expanded; YamlError past `MAX_YAML_NODES`
    or on an alias inside its own anchor. Shared nodes are sized once (memoised), so this is
    linear in the composed graph, however large its expansion."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    todo: list[tuple[yaml.Node, bool]] = [(root, False)]
    while todo:
        node, done = todo.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            children = _children(node)
            size = 1 + sum(sizes[id(c)] for c in children)
            if size > MAX_YAML_NODES:
                raise YamlError(
                    node.start_mark.line + 1,
                    f"the document expands to more than {MAX_YAML_NODES} YAML nodes "
                    "(aliases count for what they stand for)",
                )
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise YamlError(node.start_mark.line + 1, "an alias refers to a node that holds it")
        on_path.add(key)
        todo.append((node, True))
        for child in _children(node):
            cid = id(child)
            if cid in on_path:
                raise YamlError(
                    child.start_mark.line + 1, "an alias refers to a node that holds it"
                )
            if cid not in sizes:
                todo.append((child, False))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    out = LineDict()
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        k = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if isinstance(k, list | dict | set | tuple):
            raise YamlError(line, f"a key is text, not a collection: {quote(k)}")
        if not isinstance(k, str):
            k = str(k)
        if k in out:
            raise YamlError(line, f"duplicate key {quote(k)}")
        out[k] = loader.construct_object(value_node, deep=True)
        out.lines[k] = line
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load(text: str) -> Any:
    """Parse one YAML document; YamlError carries the line of the problem."""
    try:
        return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass
    except YamlError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 0
        start = min(line, exc.context_mark.line + 1 if exc.context_mark is not None else line)
        where = f" ({exc.context} from line {start})" if exc.context and start < line else ""
        said = one_line(f"{exc.problem or exc}", 160)
        raise YamlError(line, f"invalid YAML: {said}{where}", start) from None
    except yaml.YAMLError as exc:
        raise YamlError(0, f"invalid YAML: {one_line(str(exc), 160)}") from None
    except RecursionError:
        raise YamlError(0, f"YAML nests more than {MAX_YAML_DEPTH} deep") from None
    except (ValueError, OverflowError) as exc:  # a scalar PyYAML cannot build (a 5000-digit int)
        raise YamlError(0, f"invalid YAML: {one_line(str(exc), 160)}") from None
