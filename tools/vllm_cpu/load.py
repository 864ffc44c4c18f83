"""Async load generator for a real vLLM server: the client shapes the seeds talk about.

Why it is built this way:
- Three arrival shapes, because each makes a different scheduler picture: closed-loop clients
  (N users, each sends its next request when the last returns: steady pressure, the queue and
  KV wall), waves (send K, wait for all K, repeat: static batching rebuilt on the client, so
  running falls to 0 between waves) and Poisson arrivals at a rate (open loop: load that does
  not back off when the server slows).
- Prompts are sent as token-id lists, so a prompt of N tokens is exactly N tokens whatever the
  tokenizer, and `ignore_eos: true` makes every request generate exactly `max_tokens` (the
  random-weight model would otherwise stop at a random EOS).
- By default a duration stops *new* requests and requests in flight are let finish. A
  cancelled request is aborted inside vLLM after it has generated tokens, and then the
  server's `vllm:generation_tokens_total` no longer equals the sum of `usage.completion_tokens`
  clients saw — the equality the integration test checks. `drain=False` cancels them at the
  deadline instead (counted as `cancelled`), for callers that only need the pressure.
- Totals only (counts, token sums, latencies): what a test or bench compares with /metrics.

Usable as a module (`await closed_loop(url, ...)`) or by hand:
    python tools/vllm_cpu/load.py URL --mode closed --concurrency 40 --duration 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

# Ids the generated tokenizers know (ids 0-2 are <unk>, <s>, </s>; the tiny vocab has ~500).
TOKEN_ID_RANGE = (3, 500)
REQUEST_TIMEOUT_S = 600.0

IntSpec = int | tuple[int, int]


def _pick(rng: random.Random, spec: IntSpec) -> int:
    if isinstance(spec, int):
        return spec
    low, high = spec
    return rng.randint(low, high)


def parse_int_spec(text: str) -> IntSpec:
    """`"128"` -> 128, `"16:128"` -> (16, 128) (uniform, inclusive)."""
    if ":" in text:
        low, high = (int(part) for part in text.split(":", 1))
        if low > high:
            raise ValueError(f"range {text!r} has low > high")
        return (low, high)
    return int(text)


@dataclass(frozen=True)
class Shape:
    """What each request looks like."""

    prompt_tokens: IntSpec = (16, 128)
    max_tokens: IntSpec = (100, 400)
    model: str | None = None  # None: the first model /v1/models lists
    token_id_range: tuple[int, int] = TOKEN_ID_RANGE


@dataclass
class LoadResult:
    """Totals of one load run. Latencies are seconds per successful request."""

    requests: int = 0
    errors: int = 0
    cancelled: int = 0
    completion_tokens: int = 0
    prompt_tokens: int = 0
    latencies: list[float] = field(default_factory=list)
    error_samples: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    def add_ok(self, latency: float, usage: dict[str, Any]) -> None:
        self.requests += 1
        self.completion_tokens += int(usage.get("completion_tokens", 0))
        self.prompt_tokens += int(usage.get("prompt_tokens", 0))
        self.latencies.append(latency)

    def add_error(self, message: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(message)

    def quantile(self, q: float) -> float | None:
        """Nearest-rank quantile of the latencies, or None when no request finished."""
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        rank = max(1, math.ceil(q * len(ordered)))
        return ordered[rank - 1]

    @property
    def completion_tokens_per_s(self) -> float:
        return self.completion_tokens / self.elapsed if self.elapsed > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        """JSON-ready totals without the latency list."""
        out = asdict(self)
        out.pop("latencies")
        out["latency_p50_s"] = self.quantile(0.5)
        out["latency_p99_s"] = self.quantile(0.99)
        out["completion_tokens_per_s"] = round(self.completion_tokens_per_s, 1)
        return out


class _Client:
    """One httpx client, the resolved model name and the request shape, shared by workers."""

    def __init__(self, url: str, shape: Shape, seed: int, connections: int) -> None:
        self.base = url.rstrip("/")
        self.shape = shape
        self.rng = random.Random(seed)
        self.http = httpx.AsyncClient(
            timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=10.0),
            limits=httpx.Limits(max_connections=max(connections, 1)),
            trust_env=False,  # a loopback test server: never through an environment proxy
        )
        self.model = shape.model or ""
        self.result = LoadResult()

    async def __aenter__(self) -> _Client:
        if not self.model:
            resp = await self.http.get(f"{self.base}/v1/models")
            resp.raise_for_status()
            self.model = resp.json()["data"][0]["id"]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    def body(self) -> dict[str, Any]:
        low, high = self.shape.token_id_range
        n_prompt = _pick(self.rng, self.shape.prompt_tokens)
        return {
            "model": self.model,
            "prompt": [self.rng.randint(low, high) for _ in range(n_prompt)],
            "max_tokens": _pick(self.rng, self.shape.max_tokens),
            "ignore_eos": True,
            "temperature": 0.0,
        }

    async def one(self) -> None:
        began = time.monotonic()
        try:
            resp = await self.http.post(f"{self.base}/v1/completions", json=self.body())
            if resp.status_code != 200:
                self.result.add_error(f"HTTP {resp.status_code}: {resp.text[:200]}")
                return
            usage = resp.json().get("usage") or {}
        except (httpx.HTTPError, ValueError) as exc:
            self.result.add_error(f"{type(exc).__name__}: {exc}")
            return
        except asyncio.CancelledError:
            self.result.cancelled += 1
            raise
        self.result.add_ok(time.monotonic() - began, usage)


def _budget(duration: float | None, requests: int | None) -> None:
    if duration is None and requests is None:
        raise ValueError("give a duration, a request count, or both")


async def _finish(tasks: list[asyncio.Task[None]], timeout: float | None, drain: bool) -> None:
    """Wait for the tasks; without `drain`, cancel those still running after `timeout`. A
    caller cancelled meanwhile cancels them too: no worker outlives the client it shares."""
    try:
        if drain or timeout is None:
            await asyncio.gather(*tasks)
        else:
            await asyncio.wait(tasks, timeout=max(0.0, timeout))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def closed_loop(
    url: str,
    *,
    concurrency: int,
    duration: float | None = None,
    requests: int | None = None,
    shape: Shape | None = None,
    seed: int = 0,
    drain: bool = True,
) -> LoadResult:
    """`concurrency` clients, each sending its next request when its last one returns.

    Stops starting requests when `duration` seconds have passed or `requests` were started;
    requests in flight then finish (or, with `drain=False`, are cancelled at the deadline).
    """
    _budget(duration, requests)
    async with _Client(url, shape or Shape(), seed, concurrency) as client:
        began = time.monotonic()
        deadline = began + duration if duration is not None else math.inf
        started = 0

        async def worker() -> None:
            nonlocal started
            while time.monotonic() < deadline and (requests is None or started < requests):
                started += 1
                await client.one()

        tasks = [asyncio.create_task(worker()) for _ in range(concurrency)]
        await _finish(tasks, duration, drain)
        client.result.elapsed = time.monotonic() - began
        return client.result


async def waves(
    url: str,
    *,
    wave_size: int,
    duration: float | None = None,
    count: int | None = None,
    pause: float = 0.0,
    shape: Shape | None = None,
    seed: int = 0,
) -> LoadResult:
    """Send `wave_size` requests, wait for all of them, pause, repeat (client-side static
    batching). Stops after `count` waves or when `duration` has passed at a wave boundary."""
    _budget(duration, count)
    async with _Client(url, shape or Shape(), seed, wave_size) as client:
        began = time.monotonic()
        deadline = began + duration if duration is not None else math.inf
        done = 0
        while time.monotonic() < deadline and (count is None or done < count):
            await asyncio.gather(*(client.one() for _ in range(wave_size)))
            done += 1
            if pause > 0:
                await asyncio.sleep(pause)
        client.result.elapsed = time.monotonic() - began
        return client.result


async def wave_shape(
    url: str,
    *,
    wave_size: int,
    wave_s: float,
    prompt_tokens: IntSpec = (16, 128),
    most: int = 400,
) -> Shape:
    """The request shape whose waves of `wave_size` take about `wave_s` seconds on this server.

    A wave lasts as long as its longest request's decode, and a decode step's time depends on
    the machine (the CPU build: ~35 ms for 16 sequences on AVX-512, ~100 ms on AVX2 only). Probe
    waves of 8 and of 40 tokens a request, after one that warms the server up, measure it
    (their difference leaves out the prefill and the HTTP round trips); max_tokens is then
    drawn from (M/2, M) with M the steps that fit in `wave_s`, at most `most`."""
    took: list[float] = []
    for tokens in (8, 8, 40):
        async with _Client(url, Shape(prompt_tokens, tokens), 0, wave_size) as client:
            began = time.monotonic()
            await asyncio.gather(*(client.one() for _ in range(wave_size)))
            took.append(time.monotonic() - began)
    step_s = max(took[2] - took[1], took[2] / 2) / 32
    top = max(16, min(most, int(wave_s / step_s)))
    return Shape(prompt_tokens=prompt_tokens, max_tokens=(top // 2, top))


async def poisson(
    url: str,
    *,
    rate: float,
    duration: float | None = None,
    requests: int | None = None,
    max_in_flight: int = 256,
    shape: Shape | None = None,
    seed: int = 0,
    drain: bool = True,
) -> LoadResult:
    """Open-loop arrivals: exponential gaps with mean 1/`rate` seconds, whatever the server does.

    `max_in_flight` bounds the requests outstanding at once (arrivals past it are counted as
    errors rather than queued on the client), so a stalled server cannot make the loop grow
    without bound.
    """
    _budget(duration, requests)
    if rate <= 0:
        raise ValueError("rate must be > 0")
    async with _Client(url, shape or Shape(), seed, max_in_flight) as client:
        gaps = random.Random(seed + 1)
        began = time.monotonic()
        deadline = began + duration if duration is not None else math.inf
        tasks: set[asyncio.Task[None]] = set()
        started = 0
        next_at = began
        while requests is None or started < requests:
            next_at += gaps.expovariate(rate)
            if next_at >= deadline:
                break
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            started += 1
            if len(tasks) >= max_in_flight:
                client.result.add_error(f"client-side limit of {max_in_flight} in flight")
                continue
            task = asyncio.create_task(client.one())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            left = None if math.isinf(deadline) else deadline - time.monotonic()
            await _finish(list(tasks), left, drain)
        client.result.elapsed = time.monotonic() - began
        return client.result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Send completions load to a vLLM server.")
    parser.add_argument("url", help="server base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--mode", choices=("closed", "waves", "poisson"), default="closed")
    parser.add_argument("--concurrency", type=int, default=40, help="closed: clients")
    parser.add_argument("--wave-size", type=int, default=16, help="waves: requests per wave")
    parser.add_argument("--waves", type=int, default=None, help="waves: how many")
    parser.add_argument("--pause", type=float, default=0.0, help="waves: seconds between")
    parser.add_argument("--rate", type=float, default=2.0, help="poisson: requests per second")
    parser.add_argument("--duration", type=float, default=None, help="seconds")
    parser.add_argument("--requests", type=int, default=None, help="request count")
    parser.add_argument("--prompt-tokens", type=parse_int_spec, default=(16, 128), help="N|A:B")
    parser.add_argument("--max-tokens", type=parse_int_spec, default=(100, 400), help="N|A:B")
    parser.add_argument("--model", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-drain", action="store_true", help="cancel requests in flight at the deadline"
    )
    opts = parser.parse_args(argv)
    shape = Shape(prompt_tokens=opts.prompt_tokens, max_tokens=opts.max_tokens, model=opts.model)
    if opts.duration is None and opts.requests is None and opts.waves is None:
        opts.duration = 10.0
    if opts.mode == "closed":
        coro = closed_loop(
            opts.url,
            concurrency=opts.concurrency,
            duration=opts.duration,
            requests=opts.requests,
            shape=shape,
            seed=opts.seed,
            drain=not opts.no_drain,
        )
    elif opts.mode == "waves":
        coro = waves(
            opts.url,
            wave_size=opts.wave_size,
            duration=opts.duration,
            count=opts.waves,
            pause=opts.pause,
            shape=shape,
            seed=opts.seed,
        )
    else:
        coro = poisson(
            opts.url,
            rate=opts.rate,
            duration=opts.duration,
            requests=opts.requests,
            shape=shape,
            seed=opts.seed,
            drain=not opts.no_drain,
        )
    try:
        result = asyncio.run(coro)
    except httpx.HTTPError as exc:
        print(f"load: {opts.url}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result.summary(), indent=2))
    return 0 if result.errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
