"""The twin's metric state: counters, gauges and histograms that any vLLM dialect can render.

Each vLLM release has its own bucket bounds (V0's TTFT buckets stop at 10 s, V1's at 2560 s;
V0 0.6.0's e2e buckets start at 1 s, later ones at 0.3 s). The twin keeps one histogram per
quantity over the sorted union of every dialect's bounds, so any dialect's cumulative buckets
are exact prefix sums of the same counts, and switching `--emulate-version` never loses data.

Histograms take weighted observations (`observe(value, count)`): in a decode step every
request that decoded in the previous step too sees the same inter-token latency, so one call
records them all and the step loop does no per-token work.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence


def build_buckets(mantissas: Sequence[int], max_value: int) -> list[int]:
    """vLLM's `build_buckets`: mantissa x 10^k up to `max_value` (inclusive)."""
    out: list[int] = []
    exponent = 0
    while True:
        for m in mantissas:
            value = m * 10**exponent
            if value > max_value:
                return out
            out.append(value)
        exponent += 1


def build_1_2_5_buckets(max_value: int) -> list[int]:
    """vLLM's `build_1_2_5_buckets`: 1, 2, 5, 10, 20, 50, ... up to `max_value`."""
    return build_buckets([1, 2, 5], max_value)


class Hist:
    """A histogram over a fixed, sorted grid of upper bounds (+Inf implied)."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: Iterable[float]) -> None:
        self.bounds: list[float] = sorted({float(b) for b in bounds})
        self.counts: list[float] = [0.0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0.0

    def observe(self, value: float, weight: float = 1.0) -> None:
        self.counts[bisect_left(self.bounds, value)] += weight
        self.sum += value * weight
        self.count += weight

    def cumulative(self, bounds: Sequence[float]) -> list[float]:
        """Cumulative counts at `bounds` (each must be on this grid), then +Inf."""
        out: list[float] = []
        running = 0.0
        i = 0
        grid = self.bounds
        counts = self.counts
        for b in bounds:
            fb = float(b)
            while i < len(grid) and grid[i] <= fb:
                running += counts[i]
                i += 1
            if i == 0 or grid[i - 1] != fb:
                raise ValueError(f"bound {b} is not on the histogram grid")
            out.append(running)
        out.append(self.count)
        return out

    def quantile(self, q: float) -> float:
        """Upper bound of the bucket holding quantile `q` (inf if it falls past the grid)."""
        if self.count <= 0:
            return float("nan")
        target = q * self.count
        running = 0.0
        for i, c in enumerate(self.counts):
            running += c
            if running >= target:
                return self.bounds[i] if i < len(self.bounds) else float("inf")
        return float("inf")

    @property
    def mean(self) -> float:
        return self.sum / self.count if self.count else float("nan")


FINISH_REASONS: tuple[str, ...] = ("stop", "length", "abort", "error", "repetition")

HTTP_FEW_BUCKETS = (0.1, 0.5, 1.0)


class HttpTally:
    """What prometheus-fastapi-instrumentator counts for one (handler, method)."""

    __slots__ = ("count", "duration", "request_bytes", "response_bytes")

    def __init__(self) -> None:
        self.count = 0.0
        self.request_bytes = 0.0
        self.response_bytes = 0.0
        self.duration = Hist(HTTP_FEW_BUCKETS)


class Stats:
    """Everything the /metrics page shows, updated as the API server processes engine output."""

    def __init__(self, grids: Mapping[str, Iterable[float]]) -> None:
        self.hists: dict[str, Hist] = {name: Hist(bounds) for name, bounds in grids.items()}
        # Counters.
        self.prompt_tokens = 0.0
        self.prompt_tokens_cached = 0.0
        self.generation_tokens = 0.0
        self.preemptions = 0.0
        self.prefix_queries = 0.0
        self.prefix_hits = 0.0
        self.prefix_requests = 0.0
        self.request_success: dict[str, float] = dict.fromkeys(FINISH_REASONS, 0.0)
        self.steps = 0.0
        self.perf_flops = 0.0
        self.perf_read_bytes = 0.0
        self.perf_write_bytes = 0.0
        self.http: dict[tuple[str, str], HttpTally] = {}
        """HTTP requests by (handler, method), in the order handlers were first called."""
        # Gauges, as of the last engine step the API server processed.
        self.running = 0
        self.waiting = 0
        self.kv_usage = 0.0

    def hist(self, name: str) -> Hist:
        return self.hists[name]

    def http_request(
        self, handler: str, method: str, request_bytes: float, response_bytes: float, seconds: float
    ) -> None:
        """Count one answered HTTP request (the instrumentator skips /metrics itself)."""
        tally = self.http.get((handler, method))
        if tally is None:
            tally = self.http[(handler, method)] = HttpTally()
        tally.count += 1
        tally.request_bytes += request_bytes
        tally.response_bytes += response_bytes
        tally.duration.observe(seconds)
        self.hists["http_highr"].observe(seconds)
