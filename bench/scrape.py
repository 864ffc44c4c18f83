"""CPU cost of one poll, fetch excluded: parse + catalog + store, against prometheus-client.

Prints, for the real ~50 KB vLLM 0.32 page and for an 8-engine (data-parallel) page built from
it, the mean time vtop spends turning a page into stored samples, and the time
prometheus-client's own text parser takes just to parse the same text. Target: vtop at least
10x cheaper. Run: `.venv/bin/python bench/scrape.py`.
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vtop.signals.extract import PageReader  # noqa: E402
from vtop.signals.store import Store  # noqa: E402

FIXTURE = ROOT / "tests/fixtures/metrics/vllm-0.32/kv-exhausted.txt"


def data_parallel(page: str, engines: int) -> str:
    """The page as an N-engine server shows it: every engine-labelled line once per engine."""
    out: list[str] = []
    for line in page.splitlines():
        if 'engine="0"' in line:
            out.extend(line.replace('engine="0"', f'engine="{e}"') for e in range(engines))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def best_of(fn: Callable[[], object], repeat: int, number: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(number):
            fn()
        runs.append((time.process_time() - start) / number)
    return statistics.median(runs)


def measure(name: str, text: str) -> tuple[float, float]:
    """Seconds of CPU per page: vtop's whole poll, and prometheus-client's parse alone."""
    reader, store = PageReader(), Store("bench", capacity=3600)
    clock = iter(range(10**9))

    def vtop_poll() -> None:
        store.ingest(reader.read(text, endpoint="bench", t=float(next(clock))))

    def prom_parse() -> None:
        for _family in text_string_to_metric_families(text):
            pass

    vtop_poll()  # the first page teaches the reader its routes
    ours = best_of(vtop_poll, repeat=7, number=100)
    theirs = best_of(prom_parse, repeat=5, number=10)
    lines = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    print(f"{name:<28} {len(text) / 1024:6.1f} KB {lines:5d} samples | "
          f"vtop {ours * 1e3:6.3f} ms | prometheus-client {theirs * 1e3:6.3f} ms | "
          f"{theirs / ours:5.1f}x cheaper | {ours * 100:.3f}% of a core at 1 Hz")  # fmt: skip
    return ours, theirs


def main() -> None:
    page = FIXTURE.read_text()
    print("one poll, fetch excluded (parse + catalog + store), CPU time, median of runs")
    measure("vLLM 0.32 page", page)
    measure("8 data-parallel engines", data_parallel(page, 8))
    if re.search(r"python_gc", page) is None:
        print("note: the fixture has no python_* series (multiprocess mode?)")


if __name__ == "__main__":
    main()
