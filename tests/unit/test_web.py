"""`vtop --web`: the token check, the flag, and the command lines it refuses, without a browser.

tests/ui/test_web.py serves the dashboard to a real Chromium; here are the parts that decide
who is served (`token_matches`), where (`address`), what each session runs (`child_words`), and
the one-line errors: a mode a browser cannot hold, a bad source, a port already taken.
"""

from __future__ import annotations

import hmac
import signal
import socket
import string
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vtop.cli import main
from vtop.cli.monitor import build_parser
from vtop.cli.screens import replay_screen_wanted
from vtop.cli.web import SHORTEST, Address, address, child_words
from vtop.ui.web import TOKEN_BYTES, new_token, token_matches

TOKEN = "T0k3n-_abcdefghijklmnopqrstuvwxy"


@pytest.mark.parametrize(
    "path", [f"/{TOKEN}/", f"/{TOKEN}", f"/{TOKEN}/ws", f"/{TOKEN}/static/js/textual.js"]
)
def test_the_token_opens_every_path_under_it(path: str) -> None:
    assert token_matches(path, TOKEN)


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "",
        "/ws",
        "/static/js/textual.js",
        f"/{TOKEN[:-1]}/",  # all but its last character
        f"/{TOKEN}x/",  # one too many
        f"/{TOKEN.upper()}/",
        f"//{TOKEN}/",
        f"{TOKEN}/",  # not a path
        f"/static/{TOKEN}/",  # the token, not first
        "/é/",  # not ASCII: refused, not an exception
        "/\udcff/",  # a byte that is not UTF-8, as the server may decode it
    ],
)
def test_a_missing_or_wrong_token_is_refused(path: str) -> None:
    assert not token_matches(path, TOKEN)


def test_an_empty_token_matches_nothing() -> None:
    assert not token_matches("/", "")
    assert not token_matches("//", "")


def test_the_comparison_is_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The path is compared with `hmac.compare_digest`, whose time does not depend on how
    many leading characters are right; `==` would stop at the first wrong one."""
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert not token_matches(f"/{TOKEN[:5]}wrong/", TOKEN)
    assert compared == [(f"{TOKEN[:5]}wrong".encode(), TOKEN.encode())]


def test_tokens_are_long_random_and_url_safe() -> None:
    tokens = {new_token() for _ in range(50)}
    assert len(tokens) == 50
    safe = set(string.ascii_letters + string.digits + "-_")
    for token in tokens:
        assert len(token) == 4 * TOKEN_BYTES // 3 == 32
        assert set(token) <= safe


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("6006", Address("127.0.0.1", 6006)),
        ("0.0.0.0:6006", Address("0.0.0.0", 6006)),
        ("localhost:8080", Address("localhost", 8080)),
        ("[::1]:6006", Address("::1", 6006)),
        ("[::]:6006", Address("::", 6006)),
        ("0", Address("127.0.0.1", 0)),
    ],
)
def test_the_address_a_bare_port_is_loopback(text: str, expected: Address) -> None:
    assert address(text) == expected


def test_an_ipv6_address_is_shown_in_brackets() -> None:
    assert Address("::1", 0).shown(6006) == "[::1]:6006"
    assert Address("127.0.0.1", 6006).shown() == "127.0.0.1:6006"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--web", "65536"], "'65536' is not [HOST:]PORT"),
        (["--web", "http"], "'http' is not [HOST:]PORT"),
        (["--web", "host:"], "'host:' is not [HOST:]PORT"),
        (["--web", ":6006"], "give PORT or HOST:PORT"),
        (["--web", "::1:6006"], "write an IPv6 address in brackets"),
        (["--web", "-1"], "'-1' is not [HOST:]PORT"),
    ],
)
def test_a_bad_address_is_one_usage_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--demo", *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.count("\n") == 1 and says in err and err.startswith("vtop: error: argument --web")


@pytest.mark.parametrize(
    ("words", "kept"),
    [
        (["--demo", "--web", "6006"], ["--demo"]),
        (["--web=0.0.0.0:6006", "--url", "http://a:8000"], ["--url", "http://a:8000"]),
        (["--we", "6006", "--theme", "light"], ["--theme", "light"]),
        (
            ["--demo", "budget-too-small", "--web", "6006", "--speed", "2"],
            ["--demo", "budget-too-small", "--speed", "2"],
        ),
        (["--web", "6006", "--", "--web"], ["--", "--web"]),
        (["--wait-for", "5s"], ["--wait-for", "5s"]),
    ],
)
def test_each_session_runs_the_same_words_without_web(words: list[str], kept: list[str]) -> None:
    assert child_words(words) == kept


def test_the_shortest_abbreviation_is_the_parsers() -> None:
    """argparse takes any unambiguous prefix of a flag: every prefix of --web from SHORTEST on
    is --web's alone, and the one before it is someone else's too."""
    options = [o for action in build_parser()._actions for o in action.option_strings]
    for n in range(len(SHORTEST), len("--web") + 1):
        assert [o for o in options if o.startswith("--web"[:n])] == ["--web"]
    assert len([o for o in options if o.startswith(SHORTEST[:-1])]) > 1


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        (["--report"], 3),  # under --report a usage error is UNKNOWN (vtop/cli/exits.py)
        (["--once"], 2),
        (["--record", "x.vtrace"], 2),
        (["--record", "x.vtrace", "--headless"], 2),
    ],
)
def test_web_does_not_go_with_a_mode_without_a_screen(
    extra: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--demo", "--web", "0", *extra]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("vtop: --web serves the dashboard") and "--report, --once" in err


def test_a_bad_source_is_said_here_not_in_each_browser(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", "http://[::1", "--web", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "http://[::1" in err


def test_a_missing_trace_is_said_here(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--replay", "no-such-trace", "--web", "0"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no trace no-such-trace" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--demo", "--train"], "--train, --from and --to go with --replay FILE"),
        (["--demo", "--from", "+1m"], "--train, --from and --to go with --replay FILE"),
        (["--replay", "memory-ceiling", "--from", "soon"], "soon"),
        (["--replay", "memory-ceiling", "--demo"], "give one of --url, --demo or --replay"),
    ],
)
def test_what_a_session_would_refuse_is_refused_here(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--web", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_port_in_use_is_one_line(taken_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--demo", "--web", f"127.0.0.1:{taken_port}"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no URL: nothing listens
    assert err == f"vtop: cannot listen on 127.0.0.1:{taken_port}: Address already in use\n"


def test_a_browser_sessions_replay_is_a_screen(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a session's app stdout is textual-serve's pipe; TEXTUAL_DRIVER (which textual-serve
    sets) still asks for the replay screen, not the headless quiz."""
    args = build_parser().parse_args(["--replay", "memory-ceiling"])
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    assert not replay_screen_wanted(args)  # pytest's stdout is no terminal
    monkeypatch.setenv("TEXTUAL_DRIVER", "textual.drivers.web_driver:WebDriver")
    assert replay_screen_wanted(args)


ROOT = Path(__file__).resolve().parents[2]


def start_server(preexec: Callable[[], object] | None = None) -> tuple[subprocess.Popen[str], str]:
    """`vtop --demo --web 127.0.0.1:0` as a process of its own, and the URL it printed."""
    process = subprocess.Popen(
        [sys.executable, "-m", "vtop", "--demo", "--web", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=preexec,  # noqa: PLW1509 (one signal() call)
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("vtop: dashboard at http://127.0.0.1:"), process.communicate()
    return process, line.split()[3]


def test_a_hangup_stops_the_server_but_not_under_nohup() -> None:
    process, _ = start_server()
    process.send_signal(signal.SIGHUP)  # the terminal it was started from closed
    assert process.wait(timeout=30) == 0

    def nohup() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    process, url = start_server(nohup)
    try:
        process.send_signal(signal.SIGHUP)
        time.sleep(1.0)  # what a hangup would do is done in well under a second
        assert process.poll() is None
        with urllib.request.urlopen(url, timeout=10) as page:  # still serving
            assert page.status == 200
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
