"""`vtop completion bash|zsh|fish`: scripts the CLI generates from its own parsers, loaded into
the real shells and asked for completions, and help text on every flag they complete.

bash runs the completion function as bash would on TAB (COMP_WORDS/COMP_CWORD) and fish answers
`complete -C` as on TAB; zsh's completion needs a terminal, so it is checked for syntax and for
registering `_vtop` for `vtop` through compinit, which is how zsh users install it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.host_tools import require
from vtop.cli import build_parser
from vtop.cli.completion import SHELLS, _parsers, command_tree
from vtop.sim.scenarios import SCENARIOS

ROOT = Path(__file__).resolve().parents[2]


def generated(shell: str, tmp_path: Path) -> Path:
    result = subprocess.run(
        [sys.executable, "-m", "vtop", "completion", shell],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    path = tmp_path / f"vtop.{shell}"
    path.write_text(result.stdout)
    return path


def test_every_flag_has_help_text() -> None:
    missing = set()
    for parser in _parsers(command_tree()):
        for action in parser._actions:
            for flag in action.option_strings[-1:]:
                if not action.help:
                    missing.add((parser.prog, flag))
    assert missing == set()


@pytest.mark.parametrize("shell", SHELLS)
def test_the_script_has_every_monitor_flag_and_sub_command(shell: str, tmp_path: Path) -> None:
    text = generated(shell, tmp_path).read_text()
    for action in build_parser()._actions:
        for flag in action.option_strings:
            if flag.startswith("--"):
                assert (flag in text) or (f"-l {flag[2:]}" in text), (shell, flag)
    for word in ("sim", "rules", "export", "trace", "completion", "--emulate-version"):
        assert word in text, (shell, word)


def bash_complete(script: Path, *words: str) -> list[str]:
    """What bash offers for TAB after `words` (the last one is being completed)."""
    bash = require("bash", why="runs the generated completion script")
    words_q = " ".join(f"'{w}'" for w in words)
    program = (
        f"source '{script}'; COMP_WORDS=({words_q}); COMP_CWORD={len(words) - 1}; "
        f'COMP_LINE="{" ".join(words)}"; COMP_POINT=${{#COMP_LINE}}; '
        f"_shtab_vtop vtop '{words[-1]}' '{words[-2]}'; "
        "printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    out = subprocess.run(
        [bash, "--norc", "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def test_bash_completes_flags_sub_commands_and_choices(tmp_path: Path) -> None:
    script = generated("bash", tmp_path)
    assert bash_complete(script, "vtop", "--ca") == ["--ca-cert"]
    assert set(bash_complete(script, "vtop", "--max-num")) == {
        "--max-num-seqs",
        "--max-num-batched-tokens",
    }
    assert set(bash_complete(script, "vtop", "rules", "")) >= {"list", "check", "test", "export"}
    assert set(bash_complete(script, "vtop", "sim", "--scenario", "")) == set(SCENARIOS)
    assert set(bash_complete(script, "vtop", "completion", "")) == set(SHELLS)


def fish_complete(script: Path, line: str) -> list[str]:
    fish = require("fish", why="runs the generated completion script")
    out = subprocess.run(
        [fish, "--no-config", "-c", f"source '{script}'; complete -C '{line}'"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [row.split("\t")[0] for row in out.stdout.splitlines()]


def test_fish_completes_flags_sub_commands_and_choices(tmp_path: Path) -> None:
    script = generated("fish", tmp_path)
    assert fish_complete(script, "vtop --ca") == ["--ca-cert"]
    assert set(fish_complete(script, "vtop rules ")) == {"list", "check", "test", "export"}
    assert set(fish_complete(script, "vtop rules export --f")) == {"--format"}
    assert set(fish_complete(script, "vtop --demo ")) >= set(SCENARIOS)


def test_zsh_loads_the_script_as_compinit_does(tmp_path: Path) -> None:
    zsh = require("zsh", why="checks the generated completion script")
    functions = tmp_path / "functions"
    functions.mkdir()
    script = generated("zsh", tmp_path)
    (functions / "_vtop").write_text(script.read_text())
    subprocess.run([zsh, "-n", str(script)], check=True, timeout=60)
    program = (
        f"fpath=({functions} $fpath); autoload -U compinit; "
        f"compinit -u -d {tmp_path}/zcompdump; print -r -- ${{_comps[vtop]}}"
    )
    out = subprocess.run(
        [zsh, "-f", "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert out.stdout.strip() == "_vtop"
    assert "--ca-cert" in script.read_text() and "_shtab_vtop" in script.read_text()


@pytest.mark.parametrize("argv", [[], ["tcsh"]])
def test_a_shell_vtop_does_not_complete_is_a_usage_error(argv: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vtop", "completion", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("vtop completion: error: ")
    assert len(result.stderr.splitlines()) == 1


def test_the_tree_is_built_on_copies_the_running_parsers_never_see() -> None:
    command_tree()
    demo = next(a for a in build_parser()._actions if "--demo" in a.option_strings)
    assert demo.choices is None  # the monitor still checks --demo itself, with its own message
    assert isinstance(build_parser().parse_args(["--demo"]), argparse.Namespace)
