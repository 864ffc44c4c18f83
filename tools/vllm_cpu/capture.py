"""Captures the real-server /metrics fixtures in tests/fixtures/metrics/vllm-0.32/.

Why a script rather than pages saved by hand: the fixtures are the ground truth the parser,
catalog and store are tested against, so anyone must be able to re-make them (for a new vLLM
release, say) the same way, and know exactly which server arguments and which load made each
page. Every page is saved as the bytes served (after HTTP content decoding); what the script
observed on each (running, waiting, KV usage, counter rates since the previous scrape, scrape
latency and size) goes to `captured.json` beside them, which README.md there summarises.

Run from the repo root after tools/vllm_cpu/setup.sh (takes ~8 minutes on 2 cores):
    .venv/bin/python -m tools.vllm_cpu.capture [OUT_DIR] [--only engine|tiny|no-stats ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tools.vllm_cpu.server import LOG_DIR, REPO_ROOT, VllmServer, start_server

DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "metrics" / "vllm-0.32"

SERIES = {
    "running": "vllm:num_requests_running",
    "waiting": "vllm:num_requests_waiting",
    "kv_usage": "vllm:kv_cache_usage_perc",
    "preemptions": "vllm:num_preemptions_total",
    "generation_tokens": "vllm:generation_tokens_total",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "engine_steps": "vllm:iteration_tokens_total_count",
    "requests_finished": "vllm:request_success_total",
}
COUNTERS = ("preemptions", "generation_tokens", "prompt_tokens", "engine_steps")

# load.py arguments. Within capacity: 6 clients x at most 192 tokens = 9 of the 24 blocks.
WITHIN_CAPACITY = "--concurrency 6 --duration 25 --prompt-tokens 32:64 --max-tokens 64:128"
# Over capacity: 40 clients of up to 528 tokens against 16 seats and 3,072 KV tokens.
KV_HEAVY = "--concurrency 40 --prompt-tokens 16:128 --max-tokens 100:400 --no-drain"
LIGHT = "--concurrency 2 --duration 12 --prompt-tokens 16:32 --max-tokens 32:64"


def sample_sums(body: bytes) -> dict[str, float]:
    """Per SERIES key, the sum of its samples on the page (one engine here, so the value)."""
    text = body.decode()
    out: dict[str, float] = {}
    for key, name in SERIES.items():
        pattern = rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$"
        values = [float(v) for v in re.findall(pattern, text, flags=re.M)]
        if values:
            out[key] = sum(values)
    return out


@dataclass
class Page:
    body: bytes
    wall: float  # unix time when the scrape was sent
    latency: float  # seconds until the whole body was read
    wire_bytes: int  # bytes on the wire (gzip when the server chose it)
    headers: dict[str, str] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)

    def observation(self, prev: Page | None) -> dict[str, Any]:
        obs: dict[str, Any] = {
            "wall_time": round(self.wall, 3),
            "scrape_latency_s": round(self.latency, 3),
            "bytes": len(self.body),
            "wire_bytes": self.wire_bytes,
            **self.headers,
            "vllm_lines": sum(1 for line in self.body.splitlines() if line.startswith(b"vllm:")),
            **{k: self.values.get(k) for k in SERIES},
        }
        if prev is not None and self.wall > prev.wall:
            dt = self.wall - prev.wall
            obs["rates_since_previous_scrape"] = {
                "seconds": round(dt, 3),
                **{
                    f"{k}_per_s": round((self.values[k] - prev.values[k]) / dt, 2)
                    for k in COUNTERS
                    if k in self.values and k in prev.values
                },
            }
        return obs


async def scrape(client: httpx.AsyncClient, url: str) -> Page:
    wall, began = time.time(), time.monotonic()
    resp = await client.get(f"{url}/metrics")
    resp.raise_for_status()
    body = resp.content
    page = Page(body, wall, time.monotonic() - began, resp.num_bytes_downloaded)
    page.headers = {
        h.replace("-", "_"): resp.headers.get(h, "") for h in ("content-type", "content-encoding")
    }
    page.values = sample_sums(body)
    return page


async def scrape_during(
    url: str, load_args: str, *, every: float = 1.0, limit: int = 200
) -> tuple[list[Page], dict[str, Any]]:
    """Scrape every `every` seconds (start to start) while load.py runs with `load_args`.

    The load runs in its own process so that its work does not delay this process's
    scrapes: the scrape latency recorded is the server's, not the load generator's.
    """
    pages: list[Page] = []
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tools.vllm_cpu.load",
        url,
        *load_args.split(),
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    out = asyncio.create_task(proc.communicate())
    async with httpx.AsyncClient(timeout=60.0) as client:
        while not out.done() and len(pages) < limit:
            began = time.monotonic()
            pages.append(await scrape(client, url))
            await asyncio.sleep(max(0.0, every - (time.monotonic() - began)))
    stdout, _ = await out
    summary: dict[str, Any] = json.loads(stdout)
    return pages, summary


def first(pages: list[Page], ok: Callable[[Page, Page], bool], start: int = 1) -> int:
    for i in range(max(start, 1), len(pages)):
        if ok(pages[i], pages[i - 1]):
            return i
    raise RuntimeError("no scraped page showed the state wanted; see the observations printed")


class Capture:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.record: dict[str, Any] = {"files": {}, "servers": {}}
        out.mkdir(parents=True, exist_ok=True)

    def merge_existing(self) -> None:
        """Keep what an earlier capture recorded; entries captured now replace theirs."""
        path = self.out / "captured.json"
        if path.exists():
            old = json.loads(path.read_text())
            for key in ("files", "servers", "loads", "log_lines"):
                self.record.setdefault(key, {}).update(old.get(key, {}))

    def save(self, name: str, page: Page, prev: Page | None, **meta: Any) -> None:
        (self.out / name).write_bytes(page.body)
        self.record["files"][name] = {**meta, "observed": page.observation(prev)}
        print(f"{name}: {json.dumps(self.record['files'][name]['observed'])}", flush=True)

    def save_series(self, folder: str, pages: list[Page], before: Page, **meta: Any) -> None:
        (self.out / folder).mkdir(exist_ok=True)
        rows = ["index\tfile\twall_time_unix\tscrape_latency_s\tbytes"]
        for i, page in enumerate(pages):
            name = f"{i:02d}.txt"
            (self.out / folder / name).write_bytes(page.body)
            rows.append(f"{i}\t{name}\t{page.wall:.3f}\t{page.latency:.3f}\t{len(page.body)}")
        (self.out / folder / "index.tsv").write_text("\n".join(rows) + "\n")
        self.record["files"][f"{folder}/"] = {
            **meta,
            "observed": [
                p.observation(q) for p, q in zip(pages, [before, *pages[:-1]], strict=True)
            ],
        }
        print(f"{folder}/: {len(pages)} pages", flush=True)

    def server(self, key: str, server: VllmServer) -> None:
        self.record["servers"][key] = {
            "command": ["python", "-m", "vllm.entrypoints.openai.api_server", *server.args],
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
            "startup_seconds": round(server.startup_seconds or 0.0, 1),
        }

    def load(
        self, key: str, args: str, summary: dict[str, Any], pages: list[Page]
    ) -> dict[str, Any]:
        """Record a load run and the range of what every scrape during it showed."""
        under_load = pages[1:-1] or pages  # the first and last may straddle start and end
        ranges: dict[str, Any] = {"scrapes": len(pages)}
        for k in ("running", "waiting", "kv_usage"):
            values = [p.values[k] for p in under_load if k in p.values]
            ranges[k] = [min(values), statistics.median(values), max(values)] if values else None
        ranges["scrape_latency_s"] = [
            round(v, 3)
            for v in (
                min(p.latency for p in pages),
                statistics.median(p.latency for p in pages),
                max(p.latency for p in pages),
            )
        ]
        entry = {
            "command": f"python -m tools.vllm_cpu.load URL {args}",
            "result": summary,
            "scrapes_min_median_max": ranges,
        }
        self.record.setdefault("loads", {})[key] = entry
        return entry

    def log_lines(self, key: str, server: VllmServer) -> None:
        """vLLM's periodic stats line, as a user would paste it (also saved as a fixture)."""
        lines = [
            line[line.index("Engine 000:") :]
            for line in server.log_path.read_text(errors="replace").splitlines()
            if "Avg prompt throughput" in line and "Engine 000:" in line
        ]
        self.record.setdefault("log_lines", {})[key] = lines
        with (self.out / "log-lines.txt").open("a") as f:
            f.writelines(f"{line}\n" for line in lines)

    def finish(self) -> None:
        path = self.out / "captured.json"
        path.write_text(json.dumps(self.record, indent=2, default=str) + "\n")


async def engine_phases(cap: Capture, server: VllmServer) -> None:
    url = server.url
    async with httpx.AsyncClient(timeout=60.0) as client:
        await asyncio.sleep(2.0)
        idle = await scrape(client, url)
        cap.save("idle.txt", idle, None, server="engine", load="none: fresh server, no traffic")
        for path, name in (("/v1/models", "models.json"), ("/version", "version.json")):
            resp = await client.get(f"{url}{path}")
            resp.raise_for_status()
            (cap.out / name).write_bytes(resp.content)

    args = f"{WITHIN_CAPACITY} --seed 1"
    pages, summary = await scrape_during(url, args)
    load = cap.load("busy", args, summary, pages)
    i = first(pages, lambda p, q: p.values["running"] >= 4 and p.values["waiting"] == 0, 10)
    cap.save("busy.txt", pages[i], pages[i - 1], server="engine", load=load)

    args = f"{KV_HEAVY} --duration 45 --seed 2"
    pages, summary = await scrape_during(url, args)
    load = cap.load("kv-exhausted", args, summary, pages)
    span = pages[-1].wall - pages[1].wall
    load["over_whole_run"] = {
        f"{k}_per_s": round((pages[-1].values[k] - pages[1].values[k]) / span, 2) for k in COUNTERS
    }

    def exhausted(p: Page, q: Page) -> bool:
        return (
            p.values["waiting"] > 0
            and p.values["kv_usage"] >= 0.95
            and p.values["preemptions"] > q.values["preemptions"]
        )

    i = first(pages, exhausted, 10)
    cap.save("kv-exhausted.txt", pages[i], pages[i - 1], server="engine", load=load)
    j = min(i + 1, len(pages) - 10)
    cap.save_series(
        "kv-exhausted-series", pages[j : j + 10], pages[j - 1], server="engine", load=load
    )


async def restart_phase(cap: Capture, server: VllmServer) -> None:
    url = server.url
    args = f"{LIGHT} --seed 3"
    pages, summary = await scrape_during(url, args)
    load = cap.load("after-restart", args, summary, pages)
    i = first(pages, lambda p, q: p.values["running"] > 0, 6)
    cap.save("after-restart.txt", pages[i], pages[i - 1], server="engine (restarted)", load=load)


async def tiny_phase(cap: Capture, server: VllmServer) -> None:
    url = server.url
    args = f"{KV_HEAVY} --duration 40 --seed 4"
    pages, summary = await scrape_during(url, args)
    load = cap.load("frontend-bound", args, summary, pages)

    def gauges_lie(p: Page, q: Page) -> bool:
        zero = p.values["running"] == p.values["waiting"] == p.values["kv_usage"] == 0
        return zero and p.values["generation_tokens"] > q.values["generation_tokens"]

    i = first(pages, gauges_lie, 3)
    lies = [k for k in range(1, len(pages)) if gauges_lie(pages[k], pages[k - 1])]
    load["pages_scraped"] = len(pages)
    load["pages_with_gauges_zero_while_counters_climb"] = len(lies)
    cap.save("frontend-bound.txt", pages[i], pages[i - 1], server="tiny", load=load)
    # The series: the 8 consecutive pages that hold the most such lying pages.
    j = max(range(1, len(pages) - 7), key=lambda s: (sum(s <= k < s + 8 for k in lies), -s))
    cap.save_series(
        "frontend-bound-series", pages[j : j + 8], pages[j - 1], server="tiny", load=load
    )


def fresh_log(name: str) -> Path:
    path = LOG_DIR / f"capture-{name}.log"
    path.unlink(missing_ok=True)
    return path


async def no_stats_phase(cap: Capture, server: VllmServer) -> None:
    """`--disable-log-stats`: the page a user gets when vLLM's own metrics are switched off."""
    args = "--concurrency 4 --duration 5 --prompt-tokens 16:128 --max-tokens 20:60 --seed 5"
    pages, summary = await scrape_during(server.url, args)
    load = cap.load("disable-log-stats", args, summary, pages)
    async with httpx.AsyncClient(timeout=60.0) as client:
        page = await scrape(client, server.url)
    where = "tiny, --disable-log-stats"
    cap.save("disable-log-stats.txt", page, pages[-1], server=where, load=load)


def engine_run(cap: Capture) -> None:
    engine = start_server("engine", max_num_seqs=16, num_gpu_blocks=24, log_path=fresh_log("e"))
    try:
        cap.server("engine", engine)
        asyncio.run(engine_phases(cap, engine))
        engine.restart()
        cap.server("engine (restarted)", engine)
        asyncio.run(restart_phase(cap, engine))
    finally:
        engine.stop()
    cap.log_lines("engine", engine)


def tiny_run(cap: Capture) -> None:
    tiny = start_server("tiny", max_num_seqs=16, num_gpu_blocks=24, log_path=fresh_log("t"))
    try:
        cap.server("tiny", tiny)
        asyncio.run(tiny_phase(cap, tiny))
    finally:
        tiny.stop()
    cap.log_lines("tiny", tiny)


def no_stats_run(cap: Capture) -> None:
    extra = ["--disable-log-stats"]
    tiny = start_server("tiny", extra_args=extra, log_path=fresh_log("q"))
    try:
        cap.server("tiny, --disable-log-stats", tiny)
        asyncio.run(no_stats_phase(cap, tiny))
    finally:
        tiny.stop()


RUNS = {"engine": engine_run, "tiny": tiny_run, "no-stats": no_stats_run}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Capture /metrics fixtures from real vLLM.")
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(RUNS),
        help="re-capture only these servers' files, keeping the rest of captured.json",
    )
    opts = parser.parse_args(argv[1:])
    cap = Capture(opts.out)
    if opts.only:
        cap.merge_existing()
    else:
        (cap.out / "log-lines.txt").unlink(missing_ok=True)
    for name, run in RUNS.items():
        if not opts.only or name in opts.only:
            run(cap)
    cap.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
