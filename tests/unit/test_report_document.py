"""The report's TypedDicts (`vtop.report.document`) and its JSON schema say the same thing.

The schema is the contract with consumers, the TypedDicts the same contract for the code (mypy
holds the builder and the renderers to them); if the two drifted, mypy would pass code that
writes a document the schema rejects. So the schema is walked against the types: every object
the schema describes with properties has a TypedDict with exactly those keys, a property the
schema requires a required key and the others `NotRequired` ones; every value has the schema's
kinds (string, number, integer, boolean, null, array, object), an enum or const the same
`Literal` values, an array its items checked alike, a map (`additionalProperties` alone) a
`dict[str, ...]` of its values. `test_a_drift_is_caught` plants drifts, so the walk can fail.

No `from __future__ import annotations`: the planted TypedDicts below must keep their
`NotRequired` at run time, as vtop/report/document.py does (Python 3.11 reads it from the
evaluated annotations only).
"""

import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, get_args, get_origin

import pytest

from vtop.exits import VERDICTS, verdict_code
from vtop.model import Severity
from vtop.report import document

ROOT = Path(__file__).resolve().parents[2]
SCHEMA: dict[str, Any] = json.loads((ROOT / "docs" / "report-schema.json").read_text())
PYTHON_KINDS: dict[object, str] = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


def resolve(node: dict[str, Any]) -> dict[str, Any]:
    """The schema node itself, with a `$ref` (into `$defs`) followed."""
    while "$ref" in node:
        name = node["$ref"].removeprefix("#/$defs/")
        node = SCHEMA["$defs"][name]
    return node


def leaves(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives a node allows (`oneOf` flattened), each resolved."""
    node = resolve(node)
    if "oneOf" in node:
        return [leaf for alt in node["oneOf"] for leaf in leaves(alt)]
    return [node]


def members(hint: object) -> list[object]:
    """The members of a union (`X | None`), or the type alone."""
    if get_origin(hint) in (typing.Union, types.UnionType):
        return [m for arg in get_args(hint) for m in members(arg)]
    return [hint]


def literal_values(hint: object) -> set[object]:
    return {v for m in members(hint) if get_origin(m) is Literal for v in get_args(m)}


def schema_types(leaf: dict[str, Any]) -> set[str]:
    kind = leaf.get("type", [])
    return {kind} if isinstance(kind, str) else set(kind)


def check_value(hint: object, node: dict[str, Any], where: str) -> list[str]:
    """What in `hint` disagrees with the schema `node` (one line each, `where` first)."""
    problems: list[str] = []
    alts = leaves(node)
    # Enums and consts: the same values, as Literals (null apart: it is None below).
    named: list[object] = []
    for leaf in alts:
        named += leaf.get("enum", [])
        named += [leaf["const"]] if "const" in leaf else []
    enum_values = {v for v in named if v is not None}
    if literal_values(hint) != enum_values:
        problems.append(
            f"{where}: Literal values {sorted(map(repr, literal_values(hint)))} but the schema "
            f"names {sorted(map(repr, enum_values))}"
        )
    # Kinds: what JSON types the schema allows, against what the hint's members are.
    wanted: set[str] = set()
    for leaf in alts:
        if "enum" in leaf or "const" in leaf:
            wanted |= {"null"} if None in leaf.get("enum", []) else set()
            continue
        wanted |= schema_types(leaf)
    have: set[str] = set()
    for m in members(hint):
        if get_origin(m) is Literal:
            continue
        if typing.is_typeddict(m) or get_origin(m) is dict:
            have.add("object")
        elif get_origin(m) is list:
            have.add("array")
        elif m in PYTHON_KINDS:
            have.add(PYTHON_KINDS[m])
        else:
            problems.append(f"{where}: {m!r} has no JSON kind")
    if {"integer", "number"} <= have and "integer" not in wanted:
        have -= {"integer"}  # int | float: a JSON number
    if have != wanted:
        problems.append(f"{where}: kinds {sorted(have)} but the schema allows {sorted(wanted)}")
    # Arrays: their items, alike.
    lists = [m for m in members(hint) if get_origin(m) is list]
    arrays = [leaf for leaf in alts if "array" in schema_types(leaf)]
    for m, leaf in zip(lists, arrays, strict=False):
        if "items" in leaf:
            problems += check_value(get_args(m)[0], leaf["items"], f"{where}[]")
    # Objects: a TypedDict for each schema object with properties (or none at all), a dict for
    # a map.
    objects = [leaf for leaf in alts if "object" in schema_types(leaf)]
    dicts = [m for m in members(hint) if isinstance(m, type) and typing.is_typeddict(m)]
    maps = [m for m in members(hint) if get_origin(m) is dict]
    records = [td for td in dicts if typing.get_type_hints(td)]
    shaped = [leaf for leaf in objects if "properties" in leaf or leaf.get("maxProperties") == 0]
    if len(dicts) != len(shaped):
        problems.append(f"{where}: {len(dicts)} TypedDicts for {len(shaped)} records")
    for leaf in objects:
        if leaf.get("maxProperties") == 0:  # an empty object: a TypedDict without keys
            if not any(not typing.get_type_hints(td) for td in dicts):
                problems.append(f"{where}: no empty TypedDict for the empty object")
        elif "properties" in leaf:
            props = set(leaf["properties"])
            same = [td for td in records if set(typing.get_type_hints(td)) == props]
            match = records if len(records) == 1 else same
            if not match:
                problems.append(f"{where}: no TypedDict with the keys {sorted(props)}")
                continue
            problems += check_object(match[0], leaf, where)
        elif "additionalProperties" in leaf:
            if not maps:
                problems.append(f"{where}: the schema's map is no dict[str, ...]")
                continue
            key, value = get_args(maps[0])
            if key is not str:
                problems.append(f"{where}: a map keyed by {key!r}, not str")
            problems += check_value(value, leaf["additionalProperties"], f"{where}{{}}")
    return problems


def check_object(td: type, node: dict[str, Any], where: str) -> list[str]:
    """What in TypedDict `td` disagrees with the schema object `node`: its keys, which of them
    are required, and each value."""
    node = resolve(node)
    hints = typing.get_type_hints(td)
    props: dict[str, Any] = node.get("properties", {})
    required = set(node.get("required", []))
    name = f"{where} ({td.__name__})" if where else td.__name__
    problems = [f"{name}: the schema names no {k!r}" for k in sorted(set(hints) - set(props))]
    problems += [f"{name}: no key {k!r}" for k in sorted(set(props) - set(hints))]
    required_keys: frozenset[str] = td.__required_keys__  # type: ignore[attr-defined]
    optional_keys: frozenset[str] = td.__optional_keys__  # type: ignore[attr-defined]
    for k in sorted(set(props) & set(hints)):
        if (k in required) != (k in required_keys) or (k in required) == (k in optional_keys):
            status = "required" if k in required else "optional"
            problems.append(f"{name}: {k!r} is {status} in the schema, not in the TypedDict")
        problems += check_value(hints[k], props[k], f"{where}.{k}")
    return problems


def test_the_document_types_match_the_schema() -> None:
    assert check_object(document.Document, SCHEMA, "") == []


@pytest.mark.parametrize(
    ("td", "schema"),
    [
        (document.FindingDoc, "finding"),
        (document.RecommendationDoc, "recommendation"),
        (document.EndpointDoc, "endpoint"),
        (document.SignalsDoc, "signals"),
        (document.SignalDoc, "signal"),
        (document.LatencyDoc, "latency"),
        (document.KnobDoc, "knob"),
        (document.StatDoc, "stat"),
        (document.BandDoc, "band"),
        (document.PredictionDoc, "prediction"),
        (document.SearchDoc, "search"),
        (document.AlternativeDoc, "alternative"),
    ],
)
def test_each_record_matches_its_definition(td: type, schema: str) -> None:
    """Each `$defs` record on its own too, so a failure names the record."""
    assert check_object(td, SCHEMA["$defs"][schema], schema) == []


def test_every_definition_has_its_type() -> None:
    """Every record the schema defines is checked above (a new one needs a TypedDict)."""
    typed = {"finding", "recommendation", "endpoint", "signals", "signal", "latency", "knob",
             "stat", "knobs", "band", "prediction", "search", "alternative"}  # fmt: skip
    assert set(SCHEMA["$defs"]) == typed


def test_the_literals_follow_the_code() -> None:
    """The names the document writes are the schema's: severities, statuses and exit codes."""
    assert [document.severity_name(s) for s in Severity] == [s.name for s in Severity]
    assert set(get_args(document.SeverityName)) == {s.name for s in Severity}
    assert set(get_args(document.Status)) == set(VERDICTS)
    assert set(get_args(document.VerdictCode)) == {verdict_code(v) for v in VERDICTS}


class _Source(TypedDict):
    kind: Literal["live", "replay"]
    name: str


class _Event(TypedDict):
    t: float
    time: NotRequired[str]
    kind: Literal["restart", "disconnect", "reconnect", "config", "note"]
    endpoint: str | None
    extra: str


class _Server(TypedDict):
    version: str | None
    models: list[int]
    max_model_len: float | None


def test_a_drift_is_caught() -> None:
    """A missing enum value, a key made optional, a null the schema forbids, a key the schema
    does not name, a missing key and an array of the wrong items: each is reported."""
    events = SCHEMA["properties"]["events"]["items"]
    server = SCHEMA["$defs"]["endpoint"]["properties"]["server"]
    problems = (
        check_object(_Source, SCHEMA["properties"]["source"], "source")
        + check_object(_Event, events, "events[]")
        + check_object(_Server, server, "server")
    )
    text = "\n".join(problems)
    assert "source.kind: Literal values" in text
    assert "'time' is required in the schema" in text
    assert "events[].endpoint: kinds ['null', 'string']" in text
    assert "the schema names no 'extra'" in text
    assert "no key 'message'" in text
    assert "server.models[]: kinds ['integer']" in text
    assert "server.max_model_len: kinds ['null', 'number']" in text
    assert len(problems) == 7, text
