"""A real Prometheus server for tests and benches, and history for it made from twins.

`PrometheusServer.start()` runs the `prometheus` binary (Debian package `prometheus`, which
also ships `promtool`; scripts/test.sh installs it) on loopback with a temp config and data
dir. Its history can be written beforehand: `history_openmetrics()` renders simulator twins
(or any pages) over virtual time into OpenMetrics with timestamps, labelled as Prometheus
would have labelled its scrapes (`job`, `instance`, `up`, `scrape_duration_seconds`), and
`create_blocks()` turns that into TSDB blocks with `promtool tsdb create-blocks-from
openmetrics`, so an hour of a fleet's past costs seconds, not an hour.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import httpx
import yaml

from vtop.signals.catalog import WIRE
from vtop.signals.parser import parse_head, split_sample

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
MISSING = (
    None
    if PROMETHEUS and PROMTOOL
    else "the prometheus server and promtool are not installed "
    "(Debian package `prometheus`; scripts/test.sh installs it)"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PrometheusServer:
    proc: subprocess.Popen[bytes]
    url: str
    workdir: Path
    log: Path
    _configs: ClassVar[dict[str, dict[str, Any]]] = {}

    @classmethod
    def start(
        cls,
        workdir: Path,
        *,
        jobs: Mapping[str, Sequence[str]] | None = None,
        scrape_interval: str = "1s",
        evaluation_interval: str = "1s",
        rule_files: Sequence[Path] = (),
        data: Path | None = None,
        timeout_s: float = 30.0,
    ) -> PrometheusServer:
        """Start Prometheus scraping `jobs` (job name -> host:port targets); wait until ready."""
        assert PROMETHEUS is not None, MISSING
        workdir.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {
                "scrape_interval": scrape_interval,
                "scrape_timeout": scrape_interval,
                "evaluation_interval": evaluation_interval,
            },
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": list(targets)}]}
                for job, targets in (jobs or {}).items()
            ],
        }
        cfg = workdir / "prometheus.yml"
        cfg.write_text(yaml.safe_dump(config))
        cls._configs[str(workdir)] = config
        data_dir = data or workdir / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        log = workdir / "prometheus.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={cfg}",
                    f"--storage.tsdb.path={data_dir}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--storage.tsdb.retention.time=30d",
                    "--log.level=warn",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        server = cls(proc, f"http://127.0.0.1:{port}", workdir, log)
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(server.url + "/-/ready", timeout=1).status_code == 200:
                    return server
            if time.monotonic() > deadline:
                server.close()
                raise RuntimeError("prometheus did not become ready")
            time.sleep(0.1)

    def scrape(self, jobs: Mapping[str, Sequence[str]]) -> None:
        """Scrape these jobs from now on (rewrite the config, reload with SIGHUP)."""
        config = dict(self._configs[str(self.workdir)])
        config["scrape_configs"] = [
            {"job_name": job, "static_configs": [{"targets": list(targets)}]}
            for job, targets in jobs.items()
        ]
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        os.kill(self.proc.pid, signal.SIGHUP)

    def query(self, expr: str, t: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr} | ({"time": str(t)} if t is not None else {})
        data = httpx.get(self.url + "/api/v1/query", params=params, timeout=30).json()
        assert data["status"] == "success", data
        result: list[dict[str, Any]] = data["data"]["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        data = httpx.get(self.url + "/api/v1/alerts", timeout=10).json()
        assert data["status"] == "success", data
        alerts: list[dict[str, Any]] = data["data"]["alerts"]
        return alerts

    def rule_health(self) -> list[tuple[str, str, str]]:
        """(rule name, health, last error) of every loaded rule."""
        data = httpx.get(self.url + "/api/v1/rules", timeout=10).json()
        out = []
        for group in data["data"]["groups"]:
            for rule in group["rules"]:
                out.append((rule["name"], rule["health"], rule.get("lastError", "")))
        return out

    def wait_for(self, what: Callable[[], bool], timeout_s: float, step_s: float = 0.5) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if what():
                return True
            time.sleep(step_s)
        return what()

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)

    def __enter__(self) -> PrometheusServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- history ----------------------------------------------------------------------------------


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def page_lines(page: str, target: Mapping[str, str], t: float) -> Iterator[str]:
    """The catalog's series of one page as OpenMetrics sample lines with target labels and
    timestamp `t` (other series are left out: the history is what vtop reads)."""
    extra = [f'{k}="{_escape(v)}"' for k, v in target.items()]
    for raw in page.splitlines():
        if not raw or raw[0] == "#":
            continue
        head, value = split_sample(raw, 0)
        name, labels = parse_head(head, 0)
        if name not in WIRE:
            continue
        pairs = [f'{k}="{_escape(v)}"' for k, v in labels] + extra
        yield f"{name}{{{','.join(pairs)}}} {value} {t:.3f}"


@dataclass(frozen=True, slots=True)
class Scraped:
    """One scrape as Prometheus would have stored it."""

    t: float
    page: str
    duration_s: float = 0.01


def history_openmetrics(targets: Mapping[tuple[str, str], Iterable[Scraped]], out: Path) -> int:
    """Write the scrapes of every (job, instance) to `out` as OpenMetrics; returns samples.

    Scrapes are written in time order across targets (promtool wants each series in order).
    """
    streams = {key: iter(scrapes) for key, scrapes in targets.items()}
    heads: dict[tuple[str, str], Scraped | None] = {k: next(s, None) for k, s in streams.items()}
    n = 0
    with out.open("w") as f:
        while True:
            live = [(s.t, k) for k, s in heads.items() if s is not None]
            if not live:
                break
            _, key = min(live)
            scraped = heads[key]
            assert scraped is not None
            job, instance = key
            labels = {"job": job, "instance": instance}
            lines = list(page_lines(scraped.page, labels, scraped.t))
            tl = f'job="{job}",instance="{instance}"'
            lines.append(f"up{{{tl}}} 1 {scraped.t:.3f}")
            lines.append(f"scrape_duration_seconds{{{tl}}} {scraped.duration_s} {scraped.t:.3f}")
            f.write("\n".join(lines) + "\n")
            n += len(lines)
            heads[key] = next(streams[key], None)
        f.write("# EOF\n")
    return n


def create_blocks(openmetrics: Path, data_dir: Path) -> None:
    """`promtool tsdb create-blocks-from openmetrics FILE DATA_DIR`."""
    assert PROMTOOL is not None, MISSING
    data_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), tmp],
            check=True,
            capture_output=True,
            timeout=600,
        )
        for block in Path(tmp).iterdir():
            shutil.move(str(block), data_dir / block.name)


def twin_scrapes(
    scenario: str, *, seed: int, start: float, end: float, step_s: float
) -> Iterator[Scraped]:
    """A simulated server's pages every `step_s` from wall time `start` to `end`.

    The twin runs its scenario's warm-up before `start`, so the symptom is there from the
    first scrape; its epoch is set so that its virtual clock reads wall time.
    """
    from vtop.sim.twin import Twin

    yield from (
        s
        for s, _ in twin_history(
            Twin(scenario, seed=seed, epoch=0.0), start=start, end=end, step_s=step_s
        )
    )


def twin_history(
    twin: Any, *, start: float, end: float, step_s: float
) -> Iterator[tuple[Scraped, Any]]:
    """(scrape, the twin just after it) every `step_s` of wall time from `start` to `end`.

    The twin runs its scenario's warm-up first and its epoch is set so that its virtual clock
    reads wall time. Each scrape takes as long as the twin's API server needs to answer it
    (`Twin.scrape`), recorded as `scrape_duration_seconds`, as `SimSource` reads it.
    """
    twin.warm_up()
    twin.epoch = start - twin.now
    t = start
    while t <= end:
        twin.advance(max(0.0, t - (twin.epoch + twin.now)))
        delay, page = twin.scrape()
        yield Scraped(t, page.decode(), max(delay, 0.001)), twin
        t += step_s


class DataParallel:
    """Several twins as the engines of one data-parallel server (engine i is twin i).

    vLLM's data-parallel page carries each engine's series with its `engine` label and the rest
    once; this renders the twins' pages that way (twin i's `engine="0"` series relabelled to
    engine i, next to twin 0's of the same family), so a server whose engines carry different
    loads can be served and scraped. It offers what `SimServer` and `twin_history` use of a
    `Twin`."""

    def __init__(self, twins: Sequence[Any]) -> None:
        self.twins = list(twins)
        self.scenario = self.twins[0].scenario
        self._asked: dict[int, tuple[float, bytes]] = {}
        self._tickets = itertools.count()

    @property
    def epoch(self) -> float:
        return float(self.twins[0].epoch)

    @epoch.setter
    def epoch(self, value: float) -> None:
        for t in self.twins:
            t.epoch = value

    @property
    def now(self) -> float:
        return float(self.twins[0].now)

    def warm_up(self) -> None:
        for t in self.twins:
            t.warm_up()
        latest = max(t.now for t in self.twins)
        for t in self.twins:
            t.advance(latest - t.now)

    def advance(self, dt: float) -> None:
        for t in self.twins:
            t.advance(dt)

    def scrape_delay(self) -> float:
        return float(self.twins[0].scrape_delay())

    # What `SimServer.metrics_page` asks of a twin: here a page is answered at once (no
    # engine of these is frontend-bound), at the time it was asked for.
    def request_metrics(self, dialect: str | None = None) -> int:
        ticket = next(self._tickets)
        self._asked[ticket] = (self.now, self.metrics_text(dialect))
        return ticket

    def answer(self, ticket: int) -> tuple[float, bytes] | None:
        return self._asked.pop(ticket, None)

    def answer_eta(self, ticket: int) -> float:
        return self.now

    def forget(self, ticket: int) -> None:
        self._asked.pop(ticket, None)

    def scrape(self, dialect: str | None = None) -> tuple[float, bytes]:
        """As `Twin.scrape`, timed by engine 0's API server (the engines share none)."""
        delay = self.scrape_delay()
        if delay:
            self.advance(delay)
        return delay, self.metrics_text(dialect)

    def metrics_text(self, dialect: str | None = None) -> bytes:
        pages = [t.metrics_text(dialect).decode() for t in self.twins]
        model = f'model_name="{self.twins[0].endpoint_info().models[0]}"'
        extra: dict[str, list[str]] = {}
        for i, page in enumerate(pages[1:], 1):
            own = f'model_name="{self.twins[i].endpoint_info().models[0]}"'
            family = ""
            for line in page.splitlines():
                if line.startswith("# TYPE "):
                    family = line.split()[2]
                elif 'engine="0"' in line and not line.startswith("#"):
                    line = line.replace('engine="0"', f'engine="{i}"').replace(own, model)
                    extra.setdefault(family, []).append(line)
        out: list[str] = []
        family = ""
        for line in pages[0].splitlines():
            if line.startswith("# HELP ") and family:
                out.extend(extra.pop(family, []))
                family = ""
            if line.startswith("# TYPE "):
                family = line.split()[2]
            out.append(line)
        out.extend(extra.pop(family, []))
        return ("\n".join(out) + "\n").encode()

    def endpoint_info(self) -> Any:
        return self.twins[0].endpoint_info()

    def note_http(self, *args: Any) -> None:
        self.twins[0].note_http(*args)

    @property
    def knobs(self) -> Any:
        return self.twins[0].knobs

    def gpu_status(self) -> Any:
        return self.twins[0].gpu_status()
