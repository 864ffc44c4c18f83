"""The Prometheus text exposition format, read fast enough to poll every second for free.

prometheus-client's own parser builds a family object per metric and a dict per sample; on
vLLM's ~50 KB page that costs ~9 ms, ~1% of a core at 1 Hz on parsing alone. A vLLM page is
the same few hundred series every time, so this parser splits each line into its *head*
(`name{labels}`) and its value with string methods, and parses a head's name and labels only
the first time it is seen (`extract.PageReader` caches the result). Everything that is not a
sample (`# HELP`, `# TYPE`, blank lines) is skipped without being looked at.

The one error it raises is `ParseError`, which names the line.
"""

from __future__ import annotations

from collections.abc import Iterator

MAX_LINE = 64 * 1024
"""A longer line is not a metric sample; refuse it rather than parse it."""


class ParseError(ValueError):
    """A page that is not the Prometheus text format; the message names the line."""

    def __init__(self, message: str, lineno: int | None = None) -> None:
        self.lineno = lineno
        super().__init__(f"line {lineno}: {message}" if lineno is not None else message)


Labels = tuple[tuple[str, str], ...]


def _is_name(name: str, first: str, rest: str) -> bool:
    if not name or name[0] not in first:
        return False
    return all(c in rest for c in name[1:])


_ALPHA = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_METRIC_FIRST = _ALPHA + ":"
_METRIC_REST = _METRIC_FIRST + "0123456789"
_LABEL_FIRST = _ALPHA
_LABEL_REST = _ALPHA + "0123456789"
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def parse_head(head: str, lineno: int | None = None) -> tuple[str, Labels]:
    """Split `name{k="v",...}` into the name and its labels, unescaping values."""
    brace = head.find("{")
    if brace < 0:
        name = head.strip()
        if not _is_name(name, _METRIC_FIRST, _METRIC_REST):
            raise ParseError(f"invalid metric name {name[:60]!r}", lineno)
        return name, ()
    name = head[:brace].strip()
    if not _is_name(name, _METRIC_FIRST, _METRIC_REST):
        raise ParseError(f"invalid metric name {name[:60]!r}", lineno)
    if not head.endswith("}"):
        raise ParseError("label set is not closed with '}'", lineno)
    return name, _parse_labels(head, brace + 1, len(head) - 1, lineno)


def _parse_labels(text: str, i: int, end: int, lineno: int | None) -> Labels:
    labels: list[tuple[str, str]] = []
    while True:
        while i < end and text[i] in " \t":
            i += 1
        if i >= end:
            return tuple(labels)
        eq = text.find("=", i, end)
        if eq < 0:
            raise ParseError("label without '='", lineno)
        key = text[i:eq].strip()
        if not _is_name(key, _LABEL_FIRST, _LABEL_REST):
            raise ParseError(f"invalid label name {key[:60]!r}", lineno)
        i = eq + 1
        while i < end and text[i] in " \t":
            i += 1
        if i >= end or text[i] != '"':
            raise ParseError(f"label {key!r} has no quoted value", lineno)
        i += 1
        chars: list[str] = []
        start = i
        while True:
            if i >= end:
                raise ParseError(f"label {key!r} value is not terminated", lineno)
            c = text[i]
            if c == '"':
                break
            if c == "\\" and i + 1 < end:
                chars.append(text[start:i])
                nxt = text[i + 1]
                chars.append(_ESCAPES.get(nxt, "\\" + nxt))
                i += 2
                start = i
                continue
            i += 1
        chars.append(text[start:i])
        labels.append((key, "".join(chars)))
        i += 1
        while i < end and text[i] in " \t":
            i += 1
        if i < end:
            if text[i] != ",":
                raise ParseError(f"expected ',' after label {key!r}", lineno)
            i += 1


def split_sample(line: str, lineno: int) -> tuple[str, str]:
    """Split a sample line into its head and its value text (a timestamp is dropped)."""
    if len(line) > MAX_LINE:
        raise ParseError(f"line longer than {MAX_LINE} characters", lineno)
    brace = line.rfind("}")
    if brace >= 0:
        head, rest = line[: brace + 1], line[brace + 1 :].split()
    else:
        parts = line.split()
        head, rest = parts[0], parts[1:]
    if not 1 <= len(rest) <= 2:
        raise ParseError(f"expected a value after {head[:60]!r}", lineno)
    return head, rest[0]


def parse_value(text: str, lineno: int) -> float:
    """A sample value: a float, `NaN`, `+Inf` or `-Inf`."""
    try:
        if "_" in text:  # Python's float() accepts 1_000; the format does not
            raise ValueError
        return float(text)
    except ValueError:
        raise ParseError(f"invalid sample value {text[:40]!r}", lineno) from None


def sample_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) for every line that may hold a sample."""
    if text.lstrip()[:1] == "<":
        raise ParseError("not the Prometheus text format (the page looks like HTML)", 1)
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line or line[0] == "#":
            continue
        if line[-1] == "\r":
            line = line[:-1]
        if line.isspace() or not line:
            continue
        yield lineno, line


def iter_samples(text: str) -> Iterator[tuple[str, Labels, float]]:
    """Every sample of a page as (name, labels, value). The slow, general path, for tools."""
    for lineno, line in sample_lines(text):
        head, value = split_sample(line, lineno)
        name, labels = parse_head(head, lineno)
        yield name, labels, parse_value(value, lineno)
