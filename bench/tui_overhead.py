"""What the live TUI costs: CPU, memory and bytes sent to the terminal, beside the peer.

Runs `vtop --url URL --interval 1` in a detached tmux pane (160×50 by default) for 60 s after
a warm-up, and prints vtop's CPU (from /proc/PID/stat, in % of one core), its RSS (VmRSS, and
the peak VmHWM) and the bytes it wrote to the terminal per second (counted by
`tmux pipe-pane`, which sees exactly what the program writes to its pty). The same is done,
in the same run and against the same endpoint, for the peer `vllmstat` (PyPI), installed in
its own virtual environment when it can be; when it cannot, the bench says why and prints
vtop's figures alone.

The endpoint is, by default, the simulator served over HTTP in its own process (`vtop sim
--scenario memory-ceiling`: a busy server whose every panel moves every second, the costly
case for a dashboard). `--pages` serves changing vLLM 0.32-shaped pages instead
(`tests/ui/pages.py`: ~34 KB, the series, labels and bucket bounds of a real server, with
keep-alive and gzip as vLLM's own server offers them); `--url` points both tools at another
server (a real vLLM). Both apps get
the same terminal settings (`TERM` of tmux, `COLORTERM=truecolor` unless `--colors 256`):
these decide how long each escape code is.

`--against REV` runs, beside the working tree's vtop, the vtop of git revision REV (from a
temporary worktree) on the same endpoint and prints how their CPU compares: on a shared machine
whose speed moves by a quarter from hour to hour, two runs side by side are how a change's
saving is judged, not two runs an hour apart.

Targets for vtop on this machine: ≤ 1% of one core, ≤ 5 KB/s to the terminal, RSS ≤ 120 MB.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import venv
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SOCKET = "vtop-bench"
TICKS = os.sysconf("SC_CLK_TCK")
TARGETS = {"cpu": 1.0, "kbps": 5.0, "rss": 120.0}


@dataclass
class Figures:
    name: str
    cpu_pct: float | None = None
    rss_mb: float | None = None
    peak_mb: float | None = None
    kbps: float | None = None
    note: str = ""


def tmux(*args: str, check: bool = True) -> str:
    out = subprocess.run(["tmux", "-L", SOCKET, "-f", os.devnull, *args], capture_output=True,
                         text=True, check=check)  # fmt: skip
    return out.stdout.strip()


def serve_pages() -> tuple[str, ThreadingHTTPServer]:
    """Serve changing vLLM 0.32-shaped pages on loopback, as vLLM's server does: HTTP/1.1
    keep-alive, and gzip when the client asks for it (prometheus_client's exposition does).
    Each GET of /metrics is the next poll's page."""
    from tests.ui.pages import MODEL, PageMaker

    maker = PageMaker()
    lock = threading.Lock()
    models = f'{{"data": [{{"id": "{MODEL}", "max_model_len": 8192}}]}}'.encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            encoding = None
            if path == "/metrics":
                with lock:
                    body = maker.page().encode()
                if "gzip" in self.headers.get("Accept-Encoding", ""):
                    body, encoding = gzip.compress(body, compresslevel=1), "gzip"
            elif path == "/version":
                body = b'{"version": "0.32.0"}'
            elif path == "/v1/models":
                body = models
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            if encoding:
                self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


def serve_sim(scenario: str, speed: float = 1.0) -> tuple[str, subprocess.Popen[str]]:
    """`vtop sim` on a free loopback port, in its own process (its CPU is not vtop's), `speed`
    virtual seconds per wall second."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "vtop", "sim", "--scenario", scenario, "--port", "0",
         "--speed", f"{speed:g}"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r" on (http://\S+)", line)
    if not found:
        proc.kill()
        raise SystemExit(f"tui_overhead: vtop sim did not start: {line.strip()!r}")
    return found.group(1), proc


def peer_python(cache: Path) -> tuple[Path | None, str]:
    """A venv with vllmstat in it (made once, kept in `cache`); None and why when it fails."""
    env_dir = cache / "vllmstat-venv"
    python = env_dir / "bin" / "python"
    if not python.exists():
        venv.create(env_dir, with_pip=True, clear=True)
    probe = subprocess.run([str(python), "-c", "import vllmstat; print(vllmstat.__version__)"],
                           capture_output=True, text=True, check=False)  # fmt: skip
    if probe.returncode != 0:
        pip = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "vllmstat"],
            capture_output=True, text=True, check=False, timeout=600,
        )  # fmt: skip
        if pip.returncode != 0:
            lines = (pip.stderr or pip.stdout).strip().splitlines()
            return None, f"pip install vllmstat failed: {lines[-1] if lines else 'no output'}"
        probe = subprocess.run([str(python), "-c",
                                "import vllmstat; print(vllmstat.__version__)"],
                               capture_output=True, text=True, check=False)  # fmt: skip
    return python, f"vllmstat {probe.stdout.strip()}"


def start(name: str, argv: list[str], size: tuple[int, int], log: Path, env: dict[str, str],
          cwd: Path = ROOT) -> int:  # fmt: skip
    """Run argv in a new tmux session; returns the pane's pid (the program itself: exec)."""
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    command = f"cd {shlex.quote(str(cwd))} && exec env {exports} {shlex.join(argv)}"
    tmux("new-session", "-d", "-s", name, "-x", str(size[0]), "-y", str(size[1]), command)
    tmux("pipe-pane", "-t", name, "-o", f"cat > {shlex.quote(str(log))}")
    return int(tmux("list-panes", "-t", name, "-F", "#{pane_pid}"))


def cpu_seconds(pid: int) -> float:
    """CPU time of all the process's threads: nanoseconds on a CPU from schedstat where the
    kernel keeps it, else utime + stime in clock ticks (10 ms steps: 2% of a minute at 1%)."""
    tasks = list(Path(f"/proc/{pid}/task").glob("*/schedstat"))
    try:
        return sum(int(t.read_text().split()[0]) for t in tasks) / 1e9
    except (OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def mem_mb(pid: int) -> tuple[float, float]:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text()
                  .splitlines() if ":" in line)  # fmt: skip
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def measure(url: str, *, seconds: float, warmup: float, size: tuple[int, int],
            env: dict[str, str], peer: bool, cache: Path,
            against: tuple[str, Path] | None = None) -> list[Figures]:  # fmt: skip
    """vtop's figures (and the peer's, when `peer`; another revision's, `against`: its name
    and checkout) watching `url` side by side in tmux."""
    cache.mkdir(parents=True, exist_ok=True)
    runs: list[tuple[Figures, int, Path]] = []
    tmux("kill-server", check=False)
    work = Path(tempfile.mkdtemp(prefix="vtop-bench-"))
    argv = [sys.executable, "-m", "vtop", "--url", url, "--interval", "1"]
    try:
        vtop_log = work / "vtop.out"
        pid = start("vtop", argv, size, vtop_log, env)
        runs.append((Figures("vtop"), pid, vtop_log))
        if against is not None:
            rev, checkout = against
            log = work / "against.out"  # `python -m` imports vtop from its working directory
            pid = start("against", argv, size, log, env, cwd=checkout)
            runs.append((Figures(f"vtop @ {rev}"), pid, log))
        if peer:
            python, label = peer_python(cache)
            if python is None:
                print(f"peer: {label}")
            else:
                log = work / "peer.out"
                argv = [str(python), "-m", "vllmstat", "--url", url, "--interval", "1"]
                pid = start("peer", argv, size, log, env)
                runs.append((Figures(label), pid, log))
        time.sleep(warmup)
        start_marks = []
        for _, pid, log in runs:
            start_marks.append((cpu_seconds(pid), log.stat().st_size if log.exists() else 0))
        t0 = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - t0
        for (fig, pid, log), (cpu0, size0) in zip(runs, start_marks, strict=True):
            try:
                fig.cpu_pct = 100.0 * (cpu_seconds(pid) - cpu0) / elapsed
                fig.rss_mb, fig.peak_mb = mem_mb(pid)
            except FileNotFoundError:
                fig.note = "exited before the end"
            fig.kbps = (log.stat().st_size - size0) / 1024 / elapsed
    finally:
        tmux("kill-server", check=False)
        shutil.rmtree(work, ignore_errors=True)
    return [fig for fig, _, _ in runs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="endpoint to watch (default: the simulator)")
    ap.add_argument("--scenario", default="memory-ceiling", help="simulator scenario")
    ap.add_argument("--pages", action="store_true", help="serve scripted pages, not the sim")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--size", default="160x50")
    ap.add_argument("--colors", choices=("truecolor", "256"), default="truecolor")
    ap.add_argument("--no-peer", action="store_true", help="do not run vllmstat")
    ap.add_argument("--against", metavar="REV",
                    help="also run the vtop of this git revision, side by side")  # fmt: skip
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "vtop-bench",
                    help="where the peer's venv is kept between runs")  # fmt: skip
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        print("tui_overhead: tmux is not installed", file=sys.stderr)
        return 2
    w, h = (int(x) for x in args.size.split("x"))
    server: ThreadingHTTPServer | None = None
    sim: subprocess.Popen[str] | None = None
    url = args.url
    if url is not None:
        where = url
    elif args.pages:
        url, server = serve_pages()
        where = "built-in page server (vLLM 0.32-shaped pages, ~34 KB, keep-alive, gzip)"
    else:
        url, sim = serve_sim(args.scenario)
        where = f"vtop sim --scenario {args.scenario} ({url}, its own process)"
    env = {"COLORTERM": "truecolor"} if args.colors == "truecolor" else {"COLORTERM": ""}
    checkout = Path(tempfile.mkdtemp(prefix="vtop-against-")) / "vtop" if args.against else None
    try:
        if checkout is not None:
            subprocess.run(["git", "worktree", "add", "--detach", "-q", str(checkout),
                            args.against], cwd=ROOT, check=True)  # fmt: skip
        runs = measure(url, seconds=args.seconds, warmup=args.warmup, size=(w, h), env=env,
                       peer=not args.no_peer, cache=args.cache,
                       against=(args.against, checkout) if checkout else None)  # fmt: skip
    finally:
        if checkout is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(checkout)], cwd=ROOT,
                           check=False)  # fmt: skip
            shutil.rmtree(checkout.parent, ignore_errors=True)
        if server is not None:
            server.shutdown()
        if sim is not None:
            sim.terminate()
            sim.wait(timeout=10)

    print(f"tui_overhead: {w}×{h} in tmux, 1 s polls, {args.seconds:.0f} s measured after "
          f"{args.warmup:.0f} s warm-up, COLORTERM={env['COLORTERM'] or 'unset'}")  # fmt: skip
    print(f"endpoint: {where}")
    print(f"{'':18}{'CPU % of a core':>16}{'RSS MB':>9}{'peak MB':>9}{'KB/s to tty':>13}")
    for fig in runs:

        def f(v: float | None, spec: str) -> str:
            return format(v, spec) if v is not None else "–"

        print(f"{fig.name:18}{f(fig.cpu_pct, '16.2f')}{f(fig.rss_mb, '9.1f')}"
              f"{f(fig.peak_mb, '9.1f')}{f(fig.kbps, '13.2f')}  {fig.note}")  # fmt: skip
    print(f"{'targets (vtop)':18}{'≤ 1.00':>16}{'≤ 120':>9}{'':9}{'≤ 5.00':>13}")
    vtop = runs[0]
    if args.against and vtop.cpu_pct and runs[1].cpu_pct:
        print(f"CPU, this tree / {args.against}: {vtop.cpu_pct / runs[1].cpu_pct:.3f}")
    ok = (
        vtop.cpu_pct is not None
        and vtop.cpu_pct <= TARGETS["cpu"]
        and (vtop.kbps or 0) <= TARGETS["kbps"]
        and (vtop.rss_mb or 0) <= TARGETS["rss"]
    )
    print("vtop within targets" if ok else "vtop OVER a target")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
