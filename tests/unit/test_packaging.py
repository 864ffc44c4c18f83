"""What a packager reads: the license, the pins CI tests, `--version`, and the data an installed
vtop needs beside its code (the rules' own tests, the report schema).

The wheel itself is built, installed in a fresh venv and run from outside the checkout by
scripts/check_wheel.sh (scripts/test.sh runs it); these tests hold the checkout to the same
promises, fast.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from vtop import __version__
from vtop.about import declared_range, version_text
from vtop.cli.rules import shipped_rule_tests, with_default_rule_tests

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONSTRAINTS = {
    name.lower(): version
    for name, version in re.findall(
        r"^([A-Za-z0-9_.-]+)==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M
    )
}


def vtop(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "vtop", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120, check=False)  # fmt: skip


def test_license_and_metadata() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert f"## {__version__}" in (ROOT / "CHANGELOG.md").read_text()
    assert {"Homepage", "Source", "Issues", "Changelog"} <= set(project["urls"])
    assert "Programming Language :: Python :: 3.11" in project["classifiers"]


def test_textual_is_bounded_and_constraints_pin_inside_every_range() -> None:
    deps = PYPROJECT["project"]["dependencies"]
    named = {re.split(r"[<>=!~\[ ]", d, maxsplit=1)[0].lower(): d for d in deps}
    assert "<" in named["textual"], (
        "Textual needs an upper bound: vtop/ui/driver.py uses its internals"
    )
    assert declared_range("textual") == ">=8.2,<9"
    # vtop/ui/web.py subclasses textual-serve's server and renders its page: its major too.
    assert declared_range("textual-serve") == ">=1.1.3,<2"
    assert CONSTRAINTS["textual-serve"].startswith("1.")
    major, minor = (int(x) for x in CONSTRAINTS["textual"].split(".")[:2])
    assert major == 8 and minor >= 2
    wanted = deps + PYPROJECT["project"]["optional-dependencies"]["test"]
    for dep in wanted:
        name = re.split(r"[<>=!~\[ ]", dep, maxsplit=1)[0].lower()
        assert name.replace("_", "-") in {n.replace("_", "-") for n in CONSTRAINTS}, name


def test_version_names_python_textual_and_the_vllm_dialects() -> None:
    result = vtop("--version")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines == version_text().splitlines()
    assert lines[0] == f"vtop {__version__}"
    assert lines[1].startswith(f"Python {sys.version.split()[0]} (CPython")
    assert lines[2] == f"Textual {CONSTRAINTS['textual']} (vtop supports >=8.2,<9)"
    assert "0.6, 0.10 and 0.32" in lines[3]


def test_version_does_not_load_textual() -> None:
    code = ("import sys\nfrom vtop.cli import main\ntry:\n    main(['--version'])\n"
            "except SystemExit:\n    pass\nprint('textual' in sys.modules)")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, timeout=60, check=True)  # fmt: skip
    assert result.stdout.splitlines()[-1] == "False"


def test_rules_test_defaults_to_the_shipped_rule_tests_outside_a_checkout(
    tmp_path: Path,
) -> None:
    assert shipped_rule_tests() == ROOT / "tests" / "rules"
    assert with_default_rule_tests(["test", "-q"]) == ["test", "-q"]  # cwd has tests/rules
    assert with_default_rule_tests(["test", "mine/"]) == ["test", "mine/"]
    assert with_default_rule_tests(["list"]) == ["list"]
    result = vtop("rules", "test", "-q", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    passed = int(result.stdout.splitlines()[-1].split()[0])
    shipped = sum(len(re.findall(r"^  - name:", p.read_text(), re.M))
                  for p in (ROOT / "tests" / "rules").glob("*.test.yaml"))  # fmt: skip
    assert passed == shipped > 50


def test_the_program_ends_with_its_code_and_its_output_but_no_teardown() -> None:
    # `console` (the `vtop` script, `python -m vtop`) flushes what was written and leaves
    # without the interpreter's teardown: an atexit hook never runs, a pending line still
    # arrives, and the exit code is main's.
    code = ("import atexit, sys\nimport vtop.cli.dispatch as d\n"
            "atexit.register(lambda: print('teardown ran'))\n"
            "d.main = lambda: (sys.stdout.write('pending, unflushed'), 3)[1]\n"
            "d.console()")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, timeout=60, check=False)  # fmt: skip
    assert (result.returncode, result.stdout, result.stderr) == (3, "pending, unflushed", "")
