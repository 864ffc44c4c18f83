"""`man vtop`: the committed page is what the parsers make, and it lists every option.

The page (man/vtop.1) is generated (`vtop.cli.manpage`), committed, and installed by the wheel;
these tests regenerate it and fail when it is stale, walk every parser the dispatcher runs and
look for each of its flags in that parser's own section, and render it with man-db at 80
columns as a user reads it (no roff escape leaking, no line past 80, no text lost).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.host_tools import require
from vtop.cli import manpage, roff
from vtop.cli.dispatch import COMMANDS
from vtop.cli.examples import EXAMPLES
from vtop.exits import ExitCode

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / manpage.OUTPUT
REQUESTS = {".TH", ".SH", ".SS", ".TP", ".PP", ".RS", ".RE", ".nf", ".fi", ".br", ".nh", ".ad"}
"""The man macros and requests the page may use; any other line starting `.` or `'` would be
text roff swallowed as an unknown request."""
ESCAPES = re.compile(r"\\(?:-|e|&|fB|fI|fR|\(dq)")


@pytest.fixture(scope="module")
def page() -> str:
    return manpage.page()


def roff_text(text: str) -> str:
    """`text` as the page writes it mid-line (a line's first word may have a `\\&` guard)."""
    return roff.escape(text).removeprefix("\\&")


def chunk(page: str, start: str, stop: re.Pattern[str]) -> str:
    """The lines of `page` from the line `start` to the next line matching `stop`."""
    lines = page.splitlines()
    assert start in lines, f"no {start!r} in the page"
    begin = lines.index(start)
    end = next((i for i in range(begin + 1, len(lines)) if stop.match(lines[i])), len(lines))
    return "\n".join(lines[begin:end])


def section_of(page: str, node: manpage.Node, level: int) -> str:
    """The part of the page that documents `node` alone: the root's OPTIONS, a command's
    `.SH "VTOP X"` up to its first sub-command, a sub-command's `.SS "vtop x y"`."""
    if level == 0:
        return chunk(page, ".SH OPTIONS", re.compile(r"\.SH "))
    if level == 1:
        return chunk(page, f'.SH "{roff_text(node.prog.upper())}"', re.compile(r'\.SH |\.SS "vtop'))
    return chunk(page, f'.SS "{roff_text(node.prog)}"', re.compile(r"\.SH |\.SS "))


def levels(node: manpage.Node, level: int = 0) -> list[tuple[manpage.Node, int]]:
    out = [(node, level)]
    for child in node.children:
        out += levels(child, level + 1)
    return out


def test_the_committed_page_is_the_generated_one(page: str) -> None:
    committed = PAGE.read_text(encoding="utf-8") if PAGE.is_file() else ""
    assert committed == page, (
        f"{manpage.OUTPUT} is stale (a flag, a help text, an example or an exit code changed): "
        f"run `{manpage.REFRESH}` and commit it"
    )


def test_it_walks_every_command() -> None:
    progs = [node.prog for node in manpage.tree().walk()]
    assert progs[0] == "vtop"
    assert {f"vtop {name}" for name in COMMANDS} <= set(progs)
    assert {"vtop rules list", "vtop rules export", "vtop trace info"} <= set(progs)


def test_every_option_of_every_parser_is_in_its_own_section(page: str) -> None:
    checked = 0
    for node, level in levels(manpage.tree()):
        text = section_of(page, node, level)
        for action in node.parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
                continue
            if level and "--help" in action.option_strings:
                continue  # said once, at the root: every command takes it
            if not action.option_strings:
                shown = action.metavar if isinstance(action.metavar, str) else action.dest
                assert roff_text(shown) in text, f"{node.prog}: argument {shown} not in its section"
            for flag in action.option_strings:
                assert f"\\fB{roff_text(flag)}\\fR" in text, (
                    f"{node.prog}: {flag} not in its section"
                )
                checked += 1
            if action.help:
                words = " ".join(action.help.split()).split()
                assert roff_text(words[-1]) in text, f"{node.prog}: {action.dest}'s help is cut"
    assert checked > 60


def test_the_section_check_would_catch_a_missing_flag(page: str) -> None:
    root = manpage.tree()
    whatif = next(n for n in root.walk() if n.prog == "vtop whatif")
    # --set is a flag of `vtop whatif`, not of the monitor: not in OPTIONS, in its own section
    assert "\\fB\\-\\-set\\fR" not in section_of(page, root, 0)
    assert "\\fB\\-\\-set\\fR" in section_of(page, whatif, 1)


def test_the_sections_a_man_page_has_in_order(page: str) -> None:
    heads = [line for line in page.splitlines() if line.startswith(".SH ")]
    names = [h.removeprefix(".SH ").strip('"') for h in heads]
    commands = [n for n in names if n.startswith("VTOP ")]
    assert commands == [f"VTOP {name.upper()}" for name in COMMANDS]
    assert [n for n in names if not n.startswith("VTOP ")] == [
        "NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS",
        "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO",
    ]  # fmt: skip
    assert names.index("OPTIONS") < names.index("VTOP SIM") < names.index("EXIT STATUS")
    for group in ("What to watch", "Output", "Record, replay, report"):
        assert f'.SS "{group}"' in chunk(page, ".SH OPTIONS", re.compile(r"\.SH "))


def test_every_exit_code_is_listed_with_its_meaning(page: str) -> None:
    text = chunk(page, ".SH EXIT STATUS", re.compile(r"\.SH "))
    for name, code in ExitCode.__members__.items():
        assert f"\\fB{int(code)}\\fR {name}\n" in text, name
    rows = manpage.exit_codes()
    assert ("FAILED" in {name for _, name, _ in rows}) and all(meaning for *_, meaning in rows)


def test_the_readme_exit_table_agrees_with_the_page(page: str) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| ([A-Z]+) \|", readme, flags=re.MULTILINE)
    assert len(rows) >= 8
    text = chunk(page, ".SH EXIT STATUS", re.compile(r"\.SH "))
    for code, name in rows:
        assert f"\\fB{code}\\fR {name}\n" in text, f"README's exit code {code} {name}"


def test_every_vtop_variable_the_code_reads_is_in_environment(page: str) -> None:
    text = chunk(page, ".SH ENVIRONMENT", re.compile(r"\.SH "))
    found = set()
    for path in (ROOT / "vtop").rglob("*.py"):
        found |= set(re.findall(r"\bVTOP_[A-Z][A-Z_]*\b", path.read_text(encoding="utf-8")))
    assert "VTOP_API_KEY" in found
    for name in sorted(found):
        assert f"\\fB{roff_text(name)}\\fR" in text, f"{name} is read by vtop, not in ENVIRONMENT"
    for name in ("https_proxy", "no_proxy", "SSL_CERT_FILE", "XDG_CONFIG_HOME"):
        assert name in text


def test_every_example_is_in_examples(page: str) -> None:
    text = chunk(page, ".SH EXAMPLES", re.compile(r"\.SH "))
    plain = re.sub(r" \\e\n\\fB {2}", " ", text)  # a long command's continuation
    plain = plain.replace("\\fB", "").replace("\\fR", "").replace("\\-", "-")
    for lines in EXAMPLES.values():
        for line in lines:
            command = line.split("  #", 1)[0].strip()
            assert f"\n{command}\n" in plain, command


def test_text_is_escaped_for_roff(page: str) -> None:
    for number, line in enumerate(page.splitlines(), 1):
        if line.startswith('.\\"'):
            continue  # a comment
        if line[:1] in (".", "'"):
            assert line.split(" ", 1)[0] in REQUESTS, f"line {number}: {line!r}"
        bare = ESCAPES.sub("", line)
        assert "\\" not in bare, f"line {number}: an escape roff would read: {line!r}"
        assert "-" not in bare, f"line {number}: a hyphen not written \\-: {line!r}"


def test_escape() -> None:
    assert roff.escape("--max-num-seqs") == "\\-\\-max\\-num\\-seqs"
    assert roff.escape("'{job=\"vllm\"}'") == "\\&'{job=\"vllm\"}'"
    assert roff.escape(".vtrace files") == "\\&.vtrace files"
    assert roff.escape("a\\b") == "a\\eb"


def render(source: str, tmp_path: Path) -> tuple[str, str]:
    """`source` as `man -l` prints it at 80 columns: (text, groff's warnings)."""
    man = require("man", why="renders the manual page as `man vtop` does")
    path = tmp_path / "vtop.1"
    path.write_text(source, encoding="utf-8")
    env = {**os.environ, "MANWIDTH": "80", "MANPAGER": "cat", "PAGER": "cat", "LC_ALL": "C.UTF-8"}
    done = subprocess.run(
        [man, "--warnings", "-l", str(path)], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout, done.stderr


def test_the_page_reads_at_80_columns(page: str, tmp_path: Path) -> None:
    text, warnings = render(page, tmp_path)
    assert warnings == ""
    lines = text.splitlines()
    assert lines[0].startswith("VTOP(1)") and "User Commands" in lines[0]
    wide = [line for line in lines if len(line) > 80]
    assert not wide, wide
    leaked = [line for line in lines if re.search(r"\\[-&efI(]|\\f[BRI]", line)]
    assert not leaked, leaked
    for heading in ("SYNOPSIS", "OPTIONS", "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES"):
        assert heading in lines
    for command in COMMANDS:
        assert f"VTOP {command.upper()}" in lines
        assert any(line.strip().startswith(f"vtop {command}") for line in lines), command
    assert any(line.strip() == "--max-num-batched-tokens N" for line in lines)  # whole, bold
    assert '\'{job="vllm",env="prod"}\'' in text  # argparse-manpage 4.8 lost it (see manpage.py)


def test_roff_keeps_text_that_looks_like_requests(tmp_path: Path) -> None:
    tricky = ["'quoted' first", ".hidden? no", "a \\ backslash", "--flag-with-hyphens"]
    body = "\n.PP\n".join(roff.escape(t) for t in tricky)
    text, _ = render(f".TH T 1\n.SH TEST\n{body}\n", tmp_path)
    for t in tricky:
        assert t in text, t
