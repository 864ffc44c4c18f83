"""The report schema keeps its promise: open where a later v1 report may add optional fields,
closed where a change would break a consumer, and shipped with vtop (`vtop --schema`).

A consumer validates today's reports with today's schema; tomorrow's v1 report carries a field
nobody has named yet. Every record of a real report (from a recorded trace, findings and
recommendations included) gets such a field here, and every map a new key of its kind, and the
document must still validate; a wrong enum value, a missing field, a wrong type or a map value
of the wrong shape must not.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import vtop.report as report_package
from vtop.report import SCHEMA_NAME, render, schema_path
from vtop.report.run import replay_document

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "docs" / "report-schema.json").read_text())
MAPS = {
    "knobs",
    "signals",
    "latency",
    "predicted",
    "changes",
    "withheld",
    "observed",
    "twin",
    "errors",
    "families",
    "formula",
}
"""Objects keyed by a name (a knob, a signal, a latency histogram, a predicted figure): open to
new names, each value held to its record's schema."""


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    doc = replay_document(str(ROOT / "tests" / "golden" / "kv-pressure.vtrace"))
    out: dict[str, Any] = json.loads(render(doc, "json"))
    return out


def validate(doc: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)


def with_future_fields(node: Any, key: str = "") -> tuple[Any, int]:
    """A copy of `node` where each record has one more field and each map one more entry;
    and how many were added."""
    added = 0
    if isinstance(node, list):
        items = []
        for item in node:
            new, n = with_future_fields(item, key)
            items.append(new)
            added += n
        return items, added
    if not isinstance(node, dict):
        return node, 0
    out: dict[str, Any] = {}
    for k, v in node.items():
        out[k], n = with_future_fields(v, "" if key in MAPS else k)
        added += n
    if key in MAPS:
        if out:  # an empty map has no entry to copy: its kind stays unknown here
            out["a_future_" + key] = copy.deepcopy(next(iter(out.values())))
    else:
        out["a_future_field"] = {"any": ["shape", 1, None]}
    return out, added + 1


def test_the_report_under_test_covers_every_kind_of_record(report: dict[str, Any]) -> None:
    assert report["findings"] and report["gpus"] and report["endpoints"] and report["timeline"]
    assert any(f["evidence"] for f in report["findings"])
    assert report["knobs"] and report["signals"] and report["latency"]
    validate(report)


def test_no_object_is_closed() -> None:
    closed: list[str] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if node.get("additionalProperties") is False or "unevaluatedProperties" in node:
                closed.append(where or "/")
            for k, v in node.items():
                walk(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}/{i}")

    walk(SCHEMA, "")
    assert closed == []


def test_a_report_with_new_optional_fields_everywhere_validates(report: dict[str, Any]) -> None:
    future, added = with_future_fields(report)
    assert added > 40  # records at every depth: findings, evidence, gpus, endpoints, server...
    assert "a_future_field" in future["findings"][0]["evidence"][0]
    assert "a_future_knobs" in future["endpoints"][0]["knobs"]
    validate(future)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda d: d.update(status="MAYBE"),
        lambda d: d.update(report_version=2),
        lambda d: d.pop("findings"),
        lambda d: d["window"].update(polls="many"),
        lambda d: d["findings"][0].update(state="ringing"),
        lambda d: d["knobs"].update(new_knob="not a knob record"),
        lambda d: d["signals"].update(new_signal={"avg": "high"}),
    ],
    ids=[
        "status enum",
        "version const",
        "required",
        "type",
        "state enum",
        "knob map",
        "signal map",
    ],
)
def test_what_would_break_a_consumer_is_still_refused(report: dict[str, Any], spoil: Any) -> None:
    doc, _ = with_future_fields(report)
    spoil(doc)
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


def test_vtop_prints_the_schema_it_ships() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vtop", "--schema"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    assert json.loads(result.stdout) == SCHEMA
    assert schema_path() == ROOT / "docs" / "report-schema.json"  # a checkout reads docs/
    jsonschema.Draft202012Validator.check_schema(json.loads(result.stdout))


PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_schema_id_is_the_url_the_file_is_published_at() -> None:
    """`$id` fetches this very file: the raw file on the main branch of the project's
    repository (pyproject's Homepage), at the path it has in the checkout."""
    home = PYPROJECT["project"]["urls"]["Homepage"]
    assert home.startswith("https://github.com/")
    repo = home.removeprefix("https://github.com/").rstrip("/")
    path = schema_path().relative_to(ROOT).as_posix()
    assert SCHEMA["$id"] == f"https://raw.githubusercontent.com/{repo}/main/{path}"
    assert path == f"docs/{SCHEMA_NAME}"


def test_the_wheel_ships_this_file_not_a_second_copy() -> None:
    """The checkout holds one schema; the wheel maps docs/ into vtop/report/, where
    `schema_path` looks first: the packaged copy is this file, `$id` and all, and cannot drift
    (scripts/check_wheel.sh prints it from the installed wheel)."""
    wheel = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert f"docs/{SCHEMA_NAME}" in wheel["only-include"]
    assert wheel["sources"]["docs"] == "vtop/report"
    beside = Path(report_package.__file__).resolve().parent  # where schema_path looks first
    assert Path(wheel["sources"]["docs"]) == beside.relative_to(ROOT)
    assert not (ROOT / "vtop" / "report" / SCHEMA_NAME).exists()  # no copy to drift in a checkout
