"""`vtop tune --load N`: a closed-loop load of N clients, for a server that has none of its own.

Why built in: tune compares measured windows, so every trial must see the same load, and a
user's load generator may not survive the server's restarts. Each client sends its next
request the moment the last one returns (a closed loop: the pressure `max_num_seqs` and the KV
pool are tuned for), and after a failed one (the server restarting) waits a second and goes on.

What a request looks like: the prompt is a list of token ids (ids from `TOKEN_IDS`, which
every tokenizer has), so a prompt of n tokens is exactly n tokens whatever the model; with
vLLM's `ignore_eos` each request generates exactly its `max_tokens`. The lengths are drawn from
the log-normal fitted to the server's own request histograms (`shape_from_page`), the shapes
its users sent, or from the shape the user gives (`--load-shape 512:128`).

The load runs on a thread with an event loop of its own, so the watches (each its own
`asyncio.run`) never share a loop with it; `stop()` cancels the clients and joins the thread.
Secrets travel as for the scrape (the `Authorization` token, `--header`s), never across a
redirect: a redirected request counts as failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from vtop.model import Histogram, SeriesKey
from vtop.signals.extract import PageReader
from vtop.sim.workload import Lengths
from vtop.sources.urls import base_url, with_path
from vtop.sources.vllm import ScrapeOptions
from vtop.whatif.workload import fit_lengths

TOKEN_IDS = (100, 500)
"""Prompt token ids are drawn from this range: every vocabulary has them, even a test model's."""
RETRY_S = 1.0
"""How long a client waits after a failed request before it sends the next one."""
REQUEST_TIMEOUT_S = 600.0
MIN_REQUESTS = 20
"""Requests the server must have finished for its own histograms to give the load's shape."""
DEFAULT_MAX_MODEL_LEN = 2048
"""The context a request is kept within when /v1/models does not say (older servers)."""
DEFAULT_SHAPE = (256, 128)
"""Prompt and output tokens when neither the server nor the user says."""


@dataclass(frozen=True, slots=True)
class LoadShape:
    """The lengths each request draws, and where they came from (said once, to the user)."""

    prompt: Lengths
    output: Lengths
    source: str

    def describe(self) -> str:
        """`prompts ~72 tokens, outputs ~246 (the server's own requests)`."""
        return (
            f"prompts ~{self.prompt.mean:.0f} tokens, outputs ~{self.output.mean:.0f} "
            f"({self.source})"
        )


def parse_shape(text: str) -> LoadShape:
    """`512:128` (prompt:output tokens, each at least 1); ValueError with the reason."""
    prompt, sep, output = text.partition(":")
    try:
        p, o = int(prompt), int(output)
    except ValueError:
        p = o = 0
    if not sep or p < 1 or o < 1:
        raise ValueError(f"{text!r} is not PROMPT:OUTPUT in tokens, e.g. 512:128")
    return LoadShape(Lengths(p, 0.3, lo=1), Lengths(o, 0.3, lo=1), "as given")


def shape_from_page(page: str, url: str) -> LoadShape | None:
    """The shape of the requests a server has finished since it started, from its /metrics
    page (prompt and generation length histograms); None when it has served too few."""
    scrape = PageReader().read(page, endpoint=url, t=0.0, latency_s=0.0)
    prompt_h = _merged(scrape.histograms, "prompt_len")
    output_h = _merged(scrape.histograms, "generation_len")
    if prompt_h is None or output_h is None or prompt_h.count < MIN_REQUESTS:
        return None
    prompt, output = fit_lengths(prompt_h), fit_lengths(output_h)
    if prompt is None or output is None:
        return None
    return LoadShape(prompt, output, f"the shape of the {prompt_h.count:,.0f} requests it served")


def _merged(hists: Mapping[SeriesKey, Histogram], signal: str) -> Histogram | None:
    """Every model's and engine's histogram of `signal` added up (None: none, or bounds that
    differ)."""
    parts = [h for key, h in hists.items() if key.signal == signal]
    if not parts or any(h.bounds != parts[0].bounds for h in parts):
        return None
    return Histogram(
        bounds=parts[0].bounds,
        buckets=tuple(map(sum, zip(*(h.buckets for h in parts), strict=True))),
        count=sum(h.count for h in parts),
        sum=sum(h.sum for h in parts),
    )


def default_shape() -> LoadShape:
    p, o = DEFAULT_SHAPE
    return LoadShape(Lengths(p, 0.3, lo=1), Lengths(o, 0.3, lo=1), "vtop's default: none served")


@dataclass(slots=True)
class LoadCounts:
    """What the clients did (read while they run: plain integers, one writer each)."""

    sent: int = 0
    finished: int = 0
    failed: int = 0
    last_error: str = ""


class ClosedLoop:
    """N clients sending to `url` until `stop()`; `start()` returns at once."""

    def __init__(
        self,
        url: str,
        clients: int,
        shape: LoadShape,
        options: ScrapeOptions,
        *,
        seed: int = 0,
    ) -> None:
        self.base = base_url(url)
        self.clients = clients
        self.shape = shape
        self.options = options
        self.counts = LoadCounts()
        self._rng = random.Random(seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="vtop-load", daemon=True)
        self._started = threading.Event()

    def start(self) -> None:
        self._thread.start()
        self._started.wait()

    def stop(self) -> None:
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended between the check and now
                loop.call_soon_threadsafe(stopping.set)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._started.set()
        headers = {k: v for k, v in self.options.request_headers().items() if k.lower() != "accept"}
        async with httpx.AsyncClient(
            headers=headers,
            verify=self.options.tls() if self.base.startswith("https") else True,
            proxy=self.options.proxy_for(self.base),
            timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=10.0),
            limits=httpx.Limits(max_connections=self.clients + 1),
            follow_redirects=False,
            trust_env=False,
        ) as http:
            tasks = [asyncio.create_task(self._client(http, i)) for i in range(self.clients)]
            await self._stopping.wait()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _client(self, http: httpx.AsyncClient, number: int) -> None:
        rng = random.Random(self._rng.random() + number)
        model: tuple[str, int] | None = None
        while True:
            try:
                if model is None:
                    model = await self._model(http)
                await self._request(http, *model, rng)
                self.counts.finished += 1
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                self.counts.failed += 1
                self.counts.last_error = f"{type(exc).__name__}: {exc}"[:200]
                model = None  # a restarted server may serve another name or length
                await asyncio.sleep(RETRY_S)

    async def _model(self, http: httpx.AsyncClient) -> tuple[str, int]:
        """The served model's name and its max_model_len (vLLM says both in /v1/models)."""
        answer = await http.get(with_path(self.base, "/v1/models"))
        answer.raise_for_status()
        first = answer.json()["data"][0]
        name, length = first["id"], first.get("max_model_len") or DEFAULT_MAX_MODEL_LEN
        if not isinstance(name, str) or not isinstance(length, int) or length < 2:
            raise ValueError("/v1/models names no model and length")
        return name, length

    async def _request(
        self, http: httpx.AsyncClient, model: str, max_model_len: int, rng: random.Random
    ) -> None:
        prompt_len = min(self.shape.prompt.sample(rng), max_model_len // 2)
        output_len = min(self.shape.output.sample(rng), max_model_len - prompt_len)
        low, high = TOKEN_IDS
        body = {
            "model": model,
            "prompt": [rng.randrange(low, high) for _ in range(prompt_len)],
            "max_tokens": output_len,
            "ignore_eos": True,
            "temperature": 0.0,
        }
        self.counts.sent += 1
        answer = await http.post(with_path(self.base, "/v1/completions"), json=body)
        answer.raise_for_status()


class Load:
    """`--load N` for the whole tune: started once the server first answers (its page gives
    the shape), kept through every restart, stopped at the end."""

    def __init__(
        self,
        url: str,
        clients: int,
        shape: LoadShape | None,
        options: ScrapeOptions,
        say: Callable[[str], None],
    ) -> None:
        self.url = url
        self.clients = clients
        self.given = shape
        self.options = options
        self.say = say
        self.running: ClosedLoop | None = None

    def ensure_started(self) -> None:
        """Start the clients (once): the shape given, else the server's own, else the default."""
        if self.running is not None:
            return
        shape = self.given or self._served_shape() or default_shape()
        self.say(f"load: {self.clients} closed-loop clients, {shape.describe()}")
        self.running = ClosedLoop(self.url, self.clients, shape, self.options)
        self.running.start()

    def _served_shape(self) -> LoadShape | None:
        base = base_url(self.url)
        try:
            with httpx.Client(
                headers=self.options.request_headers(),
                verify=self.options.tls() if base.startswith("https") else True,
                proxy=self.options.proxy_for(base),
                timeout=self.options.timeout_s,
                follow_redirects=False,
                trust_env=False,
            ) as http:
                answer = http.get(with_path(base, "/metrics"))
                answer.raise_for_status()
                return shape_from_page(answer.text, self.url)
        except httpx.HTTPError:
            return None

    def last_error(self) -> str:
        """The last failed request's error, or that none has failed."""
        counts = self.running.counts if self.running is not None else LoadCounts()
        return counts.last_error or "none failed, none finished"

    def stop(self) -> None:
        if self.running is not None:
            self.running.stop()
