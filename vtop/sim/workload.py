"""Who sends requests, when, and how long they are: the clients in front of the twin.

Three arrival processes cover the seeds' situations: open-loop Poisson traffic (optionally in
bursts), a closed loop of N clients that each wait for their answer (plus a think time) before
sending the next, and a client that sends fixed waves and waits for the whole wave (static
batching rebuilt on the client). Prompt and output lengths come from log-normal distributions;
a workload is a weighted mix of request shapes, which is how a long-prompt mix is written.

Everything draws from one `random.Random(seed)`, and requests are generated only as the
simulation reaches them, so a run is reproducible and its memory does not grow with duration.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass

from vtop.sim.scheduler import FINISH_LENGTH, FINISH_STOP, Request


@dataclass(frozen=True, slots=True)
class Lengths:
    """A token count: log-normal with this mean (sigma 0: always `mean`), clamped to lo..hi."""

    mean: float
    sigma: float = 0.0
    lo: int = 1
    hi: int = 1 << 20

    def sample(self, rng: random.Random) -> int:
        if self.sigma <= 0:
            value = self.mean
        else:
            mu = math.log(self.mean) - self.sigma * self.sigma / 2
            value = rng.lognormvariate(mu, self.sigma)
        return max(self.lo, min(self.hi, round(value)))


@dataclass(frozen=True, slots=True)
class Shape:
    """One kind of request in a workload mix.

    `max_tokens`: the client's max_tokens. A sampled output at or above it is cut there and
    finishes "length"; a shorter one finishes "stop". None means the client set none (vLLM
    then allows up to max_model_len) and every request finishes "stop" at its sampled length;
    `finish="length"` instead models benchmark clients that set max_tokens = the length they
    want with `ignore_eos`.

    `prefix_len` leading tokens are shared with every request of the same prefix group (a
    system prompt); `prefix_share` says the same as a share of each prompt (the larger of the
    two applies); `prefix_groups` is how many distinct such prefixes there are. Only whole
    blocks of it can ever hit the prefix cache.
    """

    prompt: Lengths
    output: Lengths
    weight: float = 1.0
    max_tokens: int | None = None
    finish: str | None = None
    prefix_len: int = 0
    prefix_share: float = 0.0
    prefix_groups: int = 1
    tag: int = 0


@dataclass(frozen=True, slots=True)
class Poisson:
    """Open-loop arrivals at `rate` per second; with `burst_factor` > 1 the rate alternates
    between `rate * burst_factor` for `burst_duty` of each `burst_period_s` and a lower rate
    that keeps the mean at `rate`."""

    rate: float
    shapes: tuple[Shape, ...]
    burst_factor: float = 1.0
    burst_period_s: float = 60.0
    burst_duty: float = 0.25


@dataclass(frozen=True, slots=True)
class ClosedLoop:
    """`clients` concurrent users; each sends, waits for the answer, thinks, sends again."""

    clients: int
    shapes: tuple[Shape, ...]
    think_s: float = 0.0
    ramp_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Waves:
    """A client that sends `wave_size` requests at once and waits for all of them.

    With `script`, requests are its (prompt, output) pairs in order instead of samples, and
    the client stops when the script is used up.
    """

    wave_size: int
    shapes: tuple[Shape, ...] = ()
    gap_s: float = 0.0
    script: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Fixed:
    """An explicit list of (send time, prompt, output) requests, FCFS in list order."""

    requests: tuple[tuple[float, int, int], ...]


Workload = Poisson | ClosedLoop | Waves | Fixed


class Clients:
    """The running workload: yields requests as their send time comes, learns of answers."""

    def __init__(
        self, workload: Workload, seed: int, *, max_model_len: int, block_size: int
    ) -> None:
        self.workload = workload
        self.rng = random.Random(seed)
        self.max_model_len = max_model_len
        self.block_size = block_size
        self._next_rid = 0
        self._heap: list[tuple[float, int, int]] = []  # (send time, seq, client)
        self._seq = 0
        self._outstanding = 0
        self.sent = 0
        wl = workload
        if isinstance(wl, ClosedLoop):
            for c in range(wl.clients):
                start = wl.ramp_s * c / wl.clients if wl.clients else 0.0
                self._push(start, c)
        elif isinstance(wl, Waves):
            self._push(0.0, 0)
        elif isinstance(wl, Poisson):
            self._push(self._next_poisson(0.0), 0)
        else:
            for i, (t, _, _) in enumerate(wl.requests):
                self._push(t, i)
        self._cum: list[float] = []
        if not isinstance(wl, Fixed) and wl.shapes:
            weights = [s.weight for s in wl.shapes]
            total = sum(weights)
            acc = 0.0
            for w in weights:
                acc += w / total
                self._cum.append(acc)

    # --- timing ---------------------------------------------------------------------------------

    @property
    def next_time(self) -> float:
        return self._heap[0][0] if self._heap else math.inf

    def _push(self, t: float, client: int) -> None:
        heapq.heappush(self._heap, (t, self._seq, client))
        self._seq += 1

    def _rate_at(self, t: float) -> float:
        wl = self.workload
        assert isinstance(wl, Poisson)
        if wl.burst_factor <= 1.0:
            return wl.rate
        phase = (t % wl.burst_period_s) / wl.burst_period_s
        if phase < wl.burst_duty:
            return wl.rate * wl.burst_factor
        low = wl.rate * (1 - wl.burst_duty * wl.burst_factor) / (1 - wl.burst_duty)
        return max(0.0, low)

    def _next_poisson(self, t: float) -> float:
        wl = self.workload
        assert isinstance(wl, Poisson)
        peak = wl.rate * max(1.0, wl.burst_factor)
        if peak <= 0:
            return math.inf
        while True:  # thinning: candidate events at the peak rate, kept with p = rate/peak
            t += self.rng.expovariate(peak)
            if self.rng.random() * peak <= self._rate_at(t):
                return t

    # --- requests -------------------------------------------------------------------------------

    def pop_due(self, t: float, out: list[Request]) -> None:
        """Append every request whose send time is <= t, in send order."""
        heap = self._heap
        wl = self.workload
        while heap and heap[0][0] <= t:
            send, _, client = heapq.heappop(heap)
            if isinstance(wl, Waves):
                size = wl.wave_size
                if wl.script:
                    size = min(size, len(wl.script) - self.sent)
                for _ in range(size):
                    out.append(self._make(send, client))
                self._outstanding = size
            else:
                out.append(self._make(send, client))
                if isinstance(wl, Poisson):
                    self._push(self._next_poisson(send), 0)

    def on_done(self, req: Request, t: float) -> None:
        """The client received its whole answer at `t`."""
        wl = self.workload
        if isinstance(wl, ClosedLoop):
            think = self.rng.expovariate(1 / wl.think_s) if wl.think_s > 0 else 0.0
            self._push(t + think, req.client)
        elif isinstance(wl, Waves):
            self._outstanding -= 1
            if self._outstanding == 0 and not (wl.script and self.sent >= len(wl.script)):
                self._push(t + wl.gap_s, 0)

    def _make(self, send: float, client: int) -> Request:
        rid = self._next_rid
        self._next_rid += 1
        self.sent += 1
        wl = self.workload
        if isinstance(wl, Fixed):
            _, prompt, output = wl.requests[client]
            return Request(rid, prompt, output, arrival_ts=send, client=client)
        if isinstance(wl, Waves) and wl.script:
            prompt, output = wl.script[rid]
            return Request(rid, prompt, output, arrival_ts=send, client=client)
        rng = self.rng
        u = rng.random()
        idx = 0
        while idx < len(self._cum) - 1 and u > self._cum[idx]:
            idx += 1
        shape = wl.shapes[idx]
        prompt = shape.prompt.sample(rng)
        if shape.prefix_len:
            prompt = max(prompt, shape.prefix_len + 1)
        prompt = min(prompt, self.max_model_len - 1)
        sampled = shape.output.sample(rng)
        limit = self.max_model_len - prompt
        if shape.max_tokens is not None:
            max_tokens = min(shape.max_tokens, limit)
            output = min(sampled, max_tokens)
            reason = FINISH_LENGTH if sampled >= max_tokens else FINISH_STOP
        else:
            max_tokens = limit
            output = min(sampled, limit)
            reason = FINISH_LENGTH if output >= limit else FINISH_STOP
        if shape.finish is not None:
            reason = shape.finish
            if reason == FINISH_LENGTH and shape.max_tokens is None:
                max_tokens = output
        prefix_key = -1
        prefix_blocks = 0
        shared = max(shape.prefix_len, int(shape.prefix_share * prompt))
        if shared:
            group = rng.randrange(shape.prefix_groups)
            prefix_key = idx * 1_000_003 + group
            prefix_blocks = min(shared, prompt - 1) // self.block_size
        return Request(
            rid,
            prompt,
            output,
            max_tokens=max_tokens,
            finish_reason=reason,
            prefix_key=prefix_key,
            prefix_blocks=prefix_blocks,
            arrival_ts=send,
            client=client,
            tag=shape.tag,
        )
