"""A URL vtop cannot use is one line that never shows its password (issue 26, points 6, 11).

Every way a URL reaches vtop (`--url`, `--prometheus`, a line of a `--targets` file, `vtop
whatif --url`, the environment's proxy settings) and every way it can be wrong (a bad port, a
bad host, another scheme, whitespace, an unclosed IPv6 bracket) ends in one line on stderr
that redacts the credentials, with the usage exit code: 3 (UNKNOWN) under `--report`, 2
otherwise (README, "Reports for scripts and CI"). The ones that used to crash are run through
the real `python -m vtop` too, where a traceback would show. A base URL with a query string is
scraped with the path before the query.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pageserver import Answer, PageServer, Script
from tests.prom import free_port
from vtop.cli import main as vtop_main
from vtop.sources.urls import check_url, redact_url

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "Pw-7f3e-secret"
BAD = {
    "bad port": f"http://u:{PASSWORD}@127.0.0.1:99999/",
    "bad host": f"http://u:{PASSWORD}@a..b:8000/",
    "bad scheme": f"ftp://u:{PASSWORD}@127.0.0.1:8000/",
    "whitespace": f"http://u:{PASSWORD}@127.0.0.1:8000/ x",
    "unclosed IPv6": f"http://u:{PASSWORD}@[::1",
    "no IPv6 in brackets": f"http://u:{PASSWORD}@[zz]:8000/",
    "a password with a slash": f"http://u:{PASSWORD}/x@127.0.0.1:8000/",
    "text after an IPv6 address": f"http://u:{PASSWORD}@[::1]x",  # urlsplit's yes, httpx's no
    "a control character": f"http://u:{PASSWORD}@127.0.0.1:8000/\x7f",
}
PAGE = b'vllm:num_requests_running{engine="0",model_name="m"} 3\n'


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert PASSWORD not in out + err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vtop: "), err
    return lines[0]


@pytest.mark.parametrize("url", BAD.values(), ids=BAD.keys())
@pytest.mark.parametrize(
    ("mode", "code"), [(["--report"], 3), (["--once"], 2), ([], 2)], ids=["report", "once", "tui"]
)
def test_url_flag(url: str, mode: list[str], code: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert vtop_main(["--url", url, *mode]) == code
    assert one_line(capsys).startswith("vtop: --url: URL ")


@pytest.mark.parametrize("url", BAD.values(), ids=BAD.keys())
@pytest.mark.parametrize(("mode", "code"), [(["--report"], 3), ([], 2)], ids=["report", "tui"])
def test_prometheus_flag(
    url: str, mode: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert vtop_main(["--prometheus", url, *mode]) == code
    assert one_line(capsys).startswith("vtop: --prometheus: URL ")


@pytest.mark.parametrize(
    "url",
    [u for k, u in BAD.items() if k != "whitespace"],
    ids=[k for k in BAD if k != "whitespace"],
)
@pytest.mark.parametrize(("mode", "code"), [(["--report"], 3), (["--once"], 2)], ids=["r", "o"])
def test_targets_file_line(
    url: str, mode: list[str], code: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = tmp_path / "fleet.txt"
    fleet.write_text(f"# replicas\nhttp://127.0.0.1:8000 name=a\n{url}  name=b\n")
    assert vtop_main(["--targets", str(fleet), *mode]) == code
    assert one_line(capsys).startswith(f"vtop: {fleet}:3: URL ")


@pytest.mark.parametrize("url", BAD.values(), ids=BAD.keys())
def test_whatif_url(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert vtop_main(["whatif", "--url", url, "--set", "max_num_seqs=8"]) == 2
    assert one_line(capsys).startswith("vtop: --url: URL ")


def test_the_message_says_what_is_wrong_with_the_password_hidden() -> None:
    assert check_url(BAD["bad port"]) == "URL 'http://***@127.0.0.1:99999/' has a bad port"
    assert check_url(BAD["unclosed IPv6"]) == (
        "URL 'http://***@[::1' has a bad IPv6 address (write it as http://[::1]:8000)"
    )
    assert check_url(BAD["bad host"]) == "URL 'http://a..b:8000/' has a bad host name"
    assert check_url(BAD["bad scheme"]) == "URL 'ftp://127.0.0.1:8000/' is not http:// or https://"
    assert check_url("http://[::1]:8000") is None
    assert check_url(BAD["text after an IPv6 address"]) == "URL 'http://***@[::1]x' has a bad port"
    assert check_url(BAD["a control character"]) == (
        "URL 'http://***@127.0.0.1:8000/\\x7f' contains a control character"  # repr's escape
    )
    assert redact_url(f"u:{PASSWORD}@host:99999?key=v") == "***@host:99999?key=…"


def test_an_unreachable_url_with_credentials_is_reported_without_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()
    url = f"http://u:{PASSWORD}@127.0.0.1:{port}/"
    assert vtop_main(["--url", url, "--report", "--duration", "1"]) == 3
    out, err = capsys.readouterr()
    assert PASSWORD not in out + err
    assert f"cannot connect to http://127.0.0.1:{port}/metrics: connection refused" in out
    assert err == f"vtop: nothing listens at http://127.0.0.1:{port}: connection refused\n"


def vtop(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("VTOP_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
        env=env,
    )


def test_an_unclosed_ipv6_bracket_is_one_line_in_every_mode_of_the_real_program(
    tmp_path: Path,
) -> None:
    (tmp_path / "fleet.txt").write_text("http://[::1\n")
    runs = {
        ("--url", "http://[::1", "--report"): 3,
        ("--url", "http://[::1", "--once"): 2,
        ("--targets", "fleet.txt", "--report"): 3,
        ("whatif", "--url", "http://[::1", "--set", "max_num_seqs=8"): 2,
    }
    for args, code in runs.items():
        result = vtop(*args, cwd=tmp_path)
        assert result.returncode == code, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and "bad IPv6 address" in result.stderr, args


@pytest.mark.parametrize("given", ["/?key=abc", "/metrics?key=abc", "?key=abc"])
def test_a_base_url_with_a_query_is_scraped_with_the_path_before_it(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    script = Script({"/metrics": Answer(PAGE)})
    with PageServer(script) as srv:
        assert vtop_main(["--url", srv.url + given, "--once"]) == 0
    assert script.targets[0] == "/metrics?key=abc"
    assert {t.split("?")[1] for t in script.targets} == {"key=abc"}  # /version, /v1/models too
    assert "abc" not in capsys.readouterr().out  # the endpoint is named without the value


@pytest.mark.parametrize(
    "url",
    [u for k, u in BAD.items() if k != "bad scheme"],
    ids=[k for k in BAD if k != "bad scheme"],
)
@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--url", "http://10.1.2.3:8000", "--once"], 2),
        (["--prometheus", "http://10.1.2.3:9090", "--report"], 3),
        (["whatif", "--url", "http://10.1.2.3:8000", "--set", "max_num_seqs=8"], 2),
    ],
    ids=["url", "prometheus", "whatif"],
)
def test_a_proxy_setting_that_is_no_url_is_one_line_without_its_password(
    url: str,
    args: list[str],
    code: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The proxy's URL comes from the environment and carries credentials as often as not."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("http_proxy", url)
    assert vtop_main(args) == code
    assert one_line(capsys).startswith("vtop: the http_proxy/all_proxy setting: URL ")
