"""Fuzzed rule files (issue 26): `vtop rules check` and a short `--demo --report --rules DIR`
never print a traceback, never run past a time bound or a memory bound, and exit 0, 1, 2 or 3.

A seeded mutator starts from the shipped rules (`rules/*.yaml`) and changes them the way a
careless author or an attacker would: a leaf replaced by a hostile value (`round(1, -10**9)`,
`'a' * 10**9`, a `{x:999999999}` width, nan, a 400-digit number, a megabyte of text, nested
lists), a key dropped or renamed, a subtree copied elsewhere, and, on the text, YAML aliases
and alias bombs, deep nesting, truncation and stray bytes. Each mutant is loaded in-process
under a per-file time bound, and every one that loads runs for twenty polls of a recorded
trace; then whole directories of mutants go through the real command line in a child process
whose address space is capped, so a runaway allocation fails as MemoryError, i.e. as a
traceback, which the test refuses. The seeds are fixed: a failure reproduces exactly.
The whole file takes well under a minute.
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing
import os
import random
import resource
import string
import subprocess
import sys
import time
import traceback
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from vtop.monitor import Monitor
from vtop.trace.reader import TraceReader
from vtop.triage import cost
from vtop.triage.engine import Engine
from vtop.triage.loader import load_text
from vtop.triage.ruletest import TestFileError as RuleTestError
from vtop.triage.ruletest import run_file

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "rules").glob("*.yaml"))
TRACE = ROOT / "traces" / "memory-ceiling.vtrace"
MUTANTS = 160
LOAD_BOUND_S = 2.0
"""One mutant's load (and twenty polls of its rules), in CPU seconds of the child, so other work
on a shared CI machine does not count: the bombs must be refused, not expanded."""
CHILD_BOUND_S = 60.0
CHILD_MEMORY = 1536 * 2**20
"""Address space of a child vtop: a Python process with its imports needs a few hundred MiB."""

EXPRESSIONS = [
    "round(1, -999999999)",
    "'%0999999999d' % 1",
    "'a' * 1000000000",
    "+".join(["1"] * 500),
    "-" * 300 + "1",
    "min(" * 40 + "1" + ")" * 40,
    "10 ** 10 ** 10",
    "99999999999999999999999 * max_num_seqs",
    "kv_cache_dtype * 1000000000",
    "round(max_num_seqs, 0 - max_num_seqs * 1000000)",
    "round(kv_fit, max_num_seqs)",
    "ceil_to(max_num_seqs, 1e-300) * 1e300",
    "x.__class__",
    "__import__('os')",
    "1 / 0",
]
"""Where an expression belongs (a threshold, a value, a recommendation's formula)."""
TEMPLATES = [
    "{max_num_seqs:999999999}",
    "{max_num_seqs:.999999999f}",
    "{kv_fit:>99999}",
    "{max_num_seqs:,.40f}",
    "{nope}",
    "{",
    "{max_num_seqs!r}",
    "{max_num_seqs}" * 1000,
]
"""Where a text template belongs (a summary, an evidence row, a trade-off)."""
HOSTILE: list[object] = [
    *EXPRESSIONS,
    *TEMPLATES,
    "1e308m",
    "99999999d",
    "-5s",
    ".nan",
    float("nan"),
    float("inf"),
    -1,
    0,
    10**400,
    True,
    None,
    "",
    "x" * 100_000,
    [[[[["deep"]]]]],
    {"all": []},
    {"any": [{"last": "running", "at_least": "1/0"}]},
    {"not": {"knob": "max_num_seqs", "equals": [1, 2]}},
    ["a"] * 50,
]
"""Anywhere at all."""
EXPRESSION_KEYS = frozenset(
    {
        "expr",
        "value",
        "min",
        "max",
        "if",
        "above",
        "at_least",
        "below",
        "at_most",
        "equals",
        "clear_below",
        "clear_above",
    }
)
TEMPLATE_KEYS = frozenset({"summary", "tradeoff", "withheld"})


def leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every value in a parsed YAML tree (mappings and lists included)."""
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out += leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += leaves(v, (*path, i))
    return out


def get(node: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        node = node[p]
    return node


def put(node: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    get(node, path[:-1])[path[-1]] = value
    return node


def mutate_tree(rng: random.Random, doc: Any) -> Any:
    """One to three structural changes: a hostile value, a dropped or renamed key, a copied
    subtree, a list where a mapping was."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = leaves(doc)
        path = rng.choice(paths)
        kind = rng.random()
        aimed = [
            p
            for p in paths
            if p
            and (
                p[-1] in EXPRESSION_KEYS
                or p[-1] in TEMPLATE_KEYS
                or (len(p) > 1 and p[-2] == "evidence")
            )
        ]
        if kind < 0.3 and aimed:  # a hostile expression or template where one belongs
            path = rng.choice(aimed)
            pool = EXPRESSIONS if path[-1] in EXPRESSION_KEYS else TEMPLATES
            doc = put(doc, path, rng.choice(pool))
        elif kind < 0.55:
            doc = put(doc, path, copy.deepcopy(rng.choice(HOSTILE)))
        elif kind < 0.7 and path and isinstance(get(doc, path[:-1]), dict):
            parent = get(doc, path[:-1])
            value = parent.pop(path[-1])
            if rng.random() < 0.5:
                parent[rng.choice(["id", "when", "values", "summary", "windw", "for", "q"])] = value
        elif kind < 0.85:
            doc = put(doc, path, copy.deepcopy(get(doc, rng.choice(paths))))
        else:
            doc = put(doc, path, [get(doc, path)] * rng.randint(1, 4))
    return doc


BOMB = "\n".join(
    ['b0: &b0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"b{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 9) + "]" for i in range(1, 9)]
)


def mutate_text(rng: random.Random, text: str) -> str:
    """A change a tree cannot make: aliases, bombs, nesting, cut files, stray bytes."""
    kind = rng.randrange(6)
    if kind == 0:
        return BOMB + "\n" + text.replace("title:", "title: *b8\nx_title:", 1)
    if kind == 1:
        return text.replace("when:", "when: &w", 1).replace("summary:", "decisive: *w\nsummary:", 1)
    if kind == 2:
        return text + "\nextra: " + "[" * rng.randint(50, 5000) + "]" * rng.randint(0, 5000)
    if kind == 3:
        return text[: rng.randrange(len(text))]
    if kind == 4:
        chars = list(text)
        for _ in range(rng.randint(1, 20)):
            chars[rng.randrange(len(chars))] = rng.choice(string.printable + "\x00\x1b\u202e")
        return "".join(chars)
    return text.replace("summary: ", "summary: &s ", 1) + "\nrecursive: &r [*r]\n"


def mutants(seed: int, n: int) -> list[str]:
    """`n` mutated rule files from the shipped ones, each with an id of its own."""
    rng = random.Random(seed)
    docs = [(p, yaml.safe_load(p.read_text())) for p in SHIPPED]
    out = []
    for i in range(n):
        path, doc = rng.choice(docs)
        if rng.random() < 0.7:
            tree = mutate_tree(rng, doc)
            if isinstance(tree, dict) and rng.random() < 0.8:
                tree["id"] = f"fuzz-{seed}-{i}"
            try:
                text = yaml.safe_dump(tree, allow_unicode=True, sort_keys=False, width=200)
            except (yaml.YAMLError, ValueError, OverflowError, RecursionError):
                text = path.read_text()
        else:
            text = path.read_text().replace(f"id: {path.stem}", f"id: fuzz-{seed}-{i}", 1)
            text = mutate_text(rng, text)
        out.append(text)
    return out


@pytest.fixture(scope="module")
def frames() -> list[Any]:
    with TraceReader(str(TRACE)) as reader:
        return [f for f, _ in zip(reader.frames(), range(20), strict=False)]


def in_child(work: Callable[[Any], None], bound_s: float) -> None:
    """Run `work(progress)` in a forked child under `CHILD_MEMORY` of address space; fail with
    what it raised, or with the mutant it was on when it ran past `bound_s`. A hang in C
    (`10 ** 999999999`) cannot be interrupted in-process: only a child can be killed."""
    ctx = multiprocessing.get_context("fork")
    progress = ctx.Value("i", -1)
    receive, send = ctx.Pipe(duplex=False)

    def child() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
        try:
            work(progress)
        except BaseException:  # everything, MemoryError included, goes back to the parent
            send.send(traceback.format_exc()[-3000:])
            os._exit(1)
        send.send("")
        os._exit(0)

    proc = ctx.Process(target=child)
    proc.start()
    proc.join(bound_s)
    if proc.is_alive():
        proc.kill()
        proc.join()
        pytest.fail(f"ran past {bound_s:.0f} s, at mutant {progress.value}")
    said = receive.recv() if receive.poll(5) else f"died with exit code {proc.exitcode}"
    assert not said, said


def test_a_fuzzed_rule_loads_or_says_why_in_one_line_and_runs_without_harm(
    frames: list[Any],
) -> None:
    def work(progress: Any) -> None:
        loaded_rules = 0
        for i, text in enumerate(mutants(seed=26, n=MUTANTS)):
            progress.value = i
            tracemalloc.start()
            began = time.process_time()
            loaded = load_text(text, f"m{i}.yaml")  # must not raise, whatever the text
            took = time.process_time() - began
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert took < LOAD_BOUND_S, f"mutant {i}: {took:.1f} s to load"
            assert peak < 64 * 2**20, f"mutant {i}: {peak / 2**20:.0f} MiB to load"
            for err in loaded.errors:
                line = str(err)
                assert "\n" not in line and len(line) <= cost.MAX_ERROR_CHARS, (i, line[:200])
                assert line.startswith(f"m{i}.yaml:"), line
            for rule in loaded.rules.values():
                loaded_rules += 1
                engine = Engine([rule])
                monitor = Monitor(capacity=64, engine=engine)
                began = time.process_time()
                for frame in frames:
                    monitor.feed(frame)  # a rule that fails is stopped, never raised
                took = time.process_time() - began
                assert took < LOAD_BOUND_S, f"mutant {i}: {took:.1f} s to evaluate"
                for err in engine.errors:
                    assert "\n" not in str(err) and len(str(err)) <= cost.MAX_ERROR_CHARS
        # The mutator also leaves rules that load: they must run too. How many depends on the
        # shipped rules' text (an edit to one reshuffles the seeded mutants: 9 to 12 so far).
        assert loaded_rules >= 5

    in_child(work, CHILD_BOUND_S)


HOSTILE_TEST: list[object] = [
    "1x99999999999",
    "_x99999999",
    "0+1e308x10",
    "1e999",
    "x",
    0,
    "1ns",
    "2m..1m",
    "7d",
    "99999999d..1s",
    float("nan"),
    [float("nan")],
    ["/dev/zero"],
    ["../../../../etc/passwd"],
    {"value": [1, 2]},
    [[[1]]],
    "rule-test",
    None,
    True,
    -1,
    10**400,
    {"a": {"b": {"c": 1}}},
]
"""Values a rule test file may hold where a number, a duration, samples or paths belong."""


def test_a_fuzzed_rule_test_file_runs_or_says_why_in_one_line(tmp_path: Path) -> None:
    """`vtop rules test` notation that divided by zero or hung: each mutant of a shipped test
    (its evaluation times shortened to a minute, so the run is quick) runs within a bound,
    or is one `TestFileError` line."""
    rng = random.Random(2626)
    base = yaml.safe_load((ROOT / "tests" / "rules" / "healthy.test.yaml").read_text())
    for group in base["tests"]:
        for check in group["finding_tests"]:
            check["eval_time"] = "0s..60s"
    (tmp_path / "r.yaml").write_text(SHIPPED[0].read_text())

    def work(progress: Any) -> None:
        for i in range(12):
            progress.value = i
            one(i)

    def one(i: int) -> None:
        doc = copy.deepcopy(base)
        for _ in range(rng.randint(1, 3)):
            path = rng.choice(leaves(doc))
            doc = put(doc, path, copy.deepcopy(rng.choice(HOSTILE_TEST)))
        if rng.random() < 0.3 and isinstance(doc, dict):
            doc["rule_files"] = copy.deepcopy(rng.choice([["r.yaml"], ["/dev/zero"], ["nope"]]))
        target = tmp_path / f"m{i}.test.yaml"
        target.write_text(yaml.safe_dump(doc, sort_keys=False, width=200))
        began = time.monotonic()
        try:
            outcomes = run_file(target)
        except RuleTestError as exc:
            line = str(exc)
            assert line.startswith(f"{target}:") and "\n" not in line, line
        else:
            assert all(o.file == str(target) for o in outcomes)
        assert time.monotonic() - began < 30, f"mutant {i} ran {time.monotonic() - began:.0f} s"

    in_child(work, CHILD_BOUND_S)


def run_capped(*args: str) -> subprocess.CompletedProcess[str]:
    """vtop in a child whose address space is capped at `CHILD_MEMORY` and whose run is
    bounded by `CHILD_BOUND_S`."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "vtop", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    with contextlib.suppress(psutil.NoSuchProcess):  # gone already: it used no memory
        psutil.Process(proc.pid).rlimit(psutil.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
    try:
        out, err = proc.communicate(timeout=CHILD_BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"vtop {' '.join(args)} ran past {CHILD_BOUND_S:.0f} s")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize(("seed", "scenario"), [(1, "memory-ceiling"), (2, "budget-too-small")])
def test_rules_check_and_a_demo_report_over_fuzzed_rules_exit_cleanly(
    tmp_path: Path, seed: int, scenario: str
) -> None:
    for i, text in enumerate(mutants(seed=seed, n=24)):
        (tmp_path / f"m{i:02d}.yaml").write_text(text, encoding="utf-8", errors="replace")
    checked = run_capped("rules", "check", str(tmp_path))
    assert checked.returncode in (0, 1), checked.stderr[-2000:]
    assert "Traceback" not in checked.stderr
    lines = checked.stderr.splitlines()
    assert all(len(line) <= cost.MAX_ERROR_CHARS for line in lines), max(lines, key=len)[:300]
    report = run_capped(
        "--demo", scenario, "--report", "--duration", "30s", "--rules", str(tmp_path)
    )
    assert report.returncode in (0, 1, 2, 3), report.stderr[-2000:]
    assert "Traceback" not in report.stderr, report.stderr[-2000:]
    assert report.stdout.startswith("vtop report: "), report.stdout[:300]
