"""The config file (`vtop.cli.config`): its values are the flags' defaults, a flag wins, its
endpoints are watched when the command line names none, and every mistake in it is one line
naming the file, the line and the key. Run as a user runs vtop: `python -m vtop`, against a
real HTTP server serving a page captured from vLLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pageserver import Answer, PageServer, Script
from vtop.cli import config
from vtop.cli.monitor import build_parser

ROOT = Path(__file__).resolve().parents[2]
IDLE = (ROOT / "tests/fixtures/metrics/vllm-0.32/idle.txt").read_bytes()


def vtop(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(home)}
    env.pop("VTOP_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
        env=env,
    )


def write(home: Path, text: str) -> Path:
    path = home / "vtop" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def parsed(home: Path, *words: str) -> tuple[object, ...]:
    parser = build_parser()
    found = config.load(
        config.named_path(words) or config.default_path({"XDG_CONFIG_HOME": str(home)}),
        required=config.named_path(words) is not None,
    )
    if found is not None:
        parser.set_defaults(**found.defaults, config_endpoints=found.endpoints)
    args = parser.parse_args(list(words))
    return args.interval, args.header, args.max_itl_ms, args.allow_preemption, args.rules


def test_the_files_values_are_defaults_and_a_flag_wins(tmp_path: Path) -> None:
    write(
        tmp_path,
        'interval = 2\nheaders = ["X-Team: infer"]\nrules = ["/r"]\n'
        "[goals]\nmax_itl_ms = 60\nallow_preemption = true\n",
    )
    assert parsed(tmp_path) == (2.0, ["X-Team: infer"], 60.0, True, ["/r"])
    interval, headers, itl, allow, _ = parsed(
        tmp_path, "--interval", "5", "--header", "A: b", "--max-itl-ms", "30"
    )
    assert (interval, itl, allow) == (5.0, 30.0, True)
    assert headers == ["X-Team: infer", "A: b"]  # repeatable flags add to the file's


def test_without_a_file_nothing_changes(tmp_path: Path) -> None:
    assert config.load(tmp_path / "absent.toml", required=False) is None
    assert parsed(tmp_path) == (1.0, [], None, None, [])


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "interval = 2\nintervall = 3\n",
            "config.toml:2: intervall: unknown key; known: interval, headers, ca_cert, rules",
        ),
        (
            "[goals]\nmax_itl_ms = -4\n",
            "config.toml:2: goals.max_itl_ms: -4 is not a number above 0 to 60000 ms",
        ),
        (
            "[goals]\nallow_preemption = 1\n",
            "config.toml:2: goals.allow_preemption: expected true or false",
        ),
        ('headers = "X: y"\n', "config.toml:1: headers: expected a list of strings"),
        (
            '[[endpoint]]\nurl = "http://a:8000"\n[[endpoint]]\nurl = "http://[::1"\n',
            "config.toml:4: endpoint.url: URL 'http://[::1' has a bad IPv6 address (write it as "
            "http://[::1]:8000)",
        ),
        (
            '[[endpoint]]\nurl = "http://a:8000"\nport = 3\n',
            "config.toml:3: endpoint.port: unknown key; known: url, labels",
        ),
        ("interval = [\n", "config.toml"),
    ],
)
def test_a_mistake_is_one_line_naming_file_line_and_key(
    tmp_path: Path, text: str, said: str
) -> None:
    path = write(tmp_path, text)
    result = vtop("--demo", "--once", home=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    line = result.stderr
    assert line.count("\n") == 1 and line.startswith(f"vtop: {path.parent}/") and said in line


def test_a_config_named_on_the_command_line_must_exist(tmp_path: Path) -> None:
    result = vtop("--config", str(tmp_path / "nope.toml"), "--demo", "--once", home=tmp_path)
    assert (result.returncode, result.stderr) == (2, f"vtop: {tmp_path}/nope.toml: no such file\n")


def test_the_files_endpoints_are_watched_when_no_url_is_given(tmp_path: Path) -> None:
    with PageServer(Script({"/metrics": Answer(IDLE)})) as srv:
        write(tmp_path, f'[[endpoint]]\nurl = "{srv.url}"\nlabels = {{ max_num_seqs = 48 }}\n')
        result = vtop("--once", home=tmp_path)
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        (endpoint,) = doc["endpoints"]
        assert endpoint["url"] == srv.url
        knob = endpoint["config"]["max_num_seqs"]
        assert knob["value"] == 48 and "config.toml:2" in knob["detail"], knob
        # A --url on the command line replaces the file's endpoints.
        other = vtop("--url", "http://127.0.0.1:1", "--once", home=tmp_path)
        assert srv.url not in other.stdout
