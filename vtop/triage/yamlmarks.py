"""YAML with line numbers: every mapping remembers where it and each of its keys came from.

Rule errors must say file:line and rule id in one line. PyYAML's composer knows every node's
mark; this loader keeps the line of each mapping and of each key on a `dict` subclass, so the
rule loader can point at the exact key that is wrong. Duplicate keys are errors (plain PyYAML
silently keeps the last one, which hides typos in hand-written rules).
"""

from __future__ import annotations

from typing import Any

import yaml


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
    pass


def _mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    out = LineDict()
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        k = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(k, str):
            k = str(k)
        if k in out:
            raise YamlError(line, f"duplicate key {k!r}")
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
        raise YamlError(line, f"invalid YAML: {exc.problem or exc}{where}", start) from None
    except yaml.YAMLError as exc:
        raise YamlError(0, f"invalid YAML: {exc}") from None
