"""The in-process simulator as a `FrameSource`: `vtop --demo`, tests, training traces.

Each poll advances the twin by one interval of virtual time (times `speed`), then reads it the
way the live source reads a real server: the /metrics page goes through the same parser and
catalog, the scrape's latency is how long the twin's API server would take to answer, the GPU
readings are NVML-like, and the knobs come from the simulated server's command line. So the
demo exercises the whole data path, not a shortcut around it.

Time is virtual: a frame's timestamp is the twin's epoch plus its virtual clock, so a demo
shows wall-clock times while a test with a fixed epoch gets the same frames every run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import replace

from vtop import knobs
from vtop.knobs import KnobValue
from vtop.model import Frame, Knob
from vtop.signals.extract import PageReader
from vtop.sim.twin import Twin
from vtop.sources import discovery
from vtop.sources.status import SIMULATED, ConnectionStatus

DEFAULT_SCENARIO = "budget-too-small"
DEMO_RUNNING_S = 300.0
"""How long `vtop --demo`'s server has been in its scenario when vtop attaches: long enough
for the incident to be under way and for its own counters to tell of it, so a newcomer sees
the verdict within seconds."""


def sim_url(scenario: str, index: int = 0) -> str:
    """The endpoint name a simulated server goes by (treated as local: its GPU is known)."""
    return f"sim://{scenario}" if index == 0 else f"sim://{scenario}/{index}"


def twin_knobs(twin: Twin) -> dict[str, Knob]:
    """The twin's configuration as discovery would read it from its command line, each knob's
    detail naming the flag it came from (`simulated server's --max-num-seqs`), as a real
    server's names its pid and flag: the provenance, `process`, already says "its command
    line", and every view prints the two side by side."""
    values: Mapping[str, KnobValue] = twin.knobs
    return {
        name: Knob(name, value, "process", f"simulated server's {knobs.flag_argv(name, value)[0]}")
        for name, value in values.items()
    }


class SimSource:
    """Polls one or more in-process twins; each poll is `interval_s × speed` virtual seconds."""

    def __init__(
        self,
        twins: list[Twin],
        *,
        interval_s: float = 1.0,
        speed: float = 1.0,
        in_thread: bool = True,
    ) -> None:
        if not twins:
            raise ValueError("no simulated server")
        self.twins = twins
        self.interval_s = interval_s
        self.speed = speed
        self._in_thread = in_thread
        self._readers = [PageReader() for _ in twins]
        self._urls = [sim_url(t.scenario.name, i) for i, t in enumerate(twins)]
        self._announced = False
        self._next_s: float | None = None

    @classmethod
    def scenario(
        cls,
        name: str = DEFAULT_SCENARIO,
        *,
        seed: int = 0,
        epoch: float | None = None,
        warm_up: bool = True,
        running_s: float = 0.0,
        **kw: float,
    ) -> SimSource:
        """One twin of scenario `name`, warmed up to its symptom (or `running_s` into it, if
        longer: the demo attaches to a server that has been in trouble for minutes, as a user
        opening vtop during an incident does). Without `epoch`, the server started `running_s`
        ago, so the frames carry the wall-clock time."""
        if epoch is None:
            epoch = time.time() - running_s
        twin = Twin(name, seed=seed, epoch=epoch)
        if warm_up:
            twin.warm_up()
        twin.advance(max(0.0, running_s - twin.now))
        return cls([twin], **kw)  # type: ignore[arg-type]

    @property
    def endpoints(self) -> list[str]:
        return list(self._urls)

    def watching(self) -> list[str]:
        """The scenario of each twin (`vtop.sources.base.watching`)."""
        return [twin.scenario.name for twin in self.twins]

    def status(self, endpoint: str) -> ConnectionStatus:
        return SIMULATED

    async def aclose(self) -> None:
        return None

    def pace(self, seconds: float) -> None:
        """The next poll comes `seconds` after this one (a warm-up, `vtop.sources.pacing`):
        the twins advance by that much (times `speed`) instead of a whole interval."""
        self._next_s = seconds

    def _step(self) -> Frame:
        dt = (self.interval_s if self._next_s is None else self._next_s) * self.speed
        self._next_s = None
        scrapes = []
        for twin, reader, url in zip(self.twins, self._readers, self._urls, strict=True):
            twin.advance(dt)
            delay, page = twin.scrape()
            text = page.decode()
            scrape = reader.read(text, endpoint=url, t=twin.epoch + twin.now, latency_s=delay)
            if not self._announced:
                server = twin.endpoint_info()
                gpus = twin.gpu_status().gpus
                knobs = discovery.merge(
                    cache_info=scrape.info,
                    endpoint=server,
                    process=twin_knobs(twin),
                    gpu_mem_bytes=gpus[0].mem_total_bytes if gpus else None,
                )
                scrape = replace(scrape, knobs=knobs, server=server)
            scrapes.append(scrape)
        self._announced = True
        first = self.twins[0]
        return Frame(t=first.epoch + first.now, scrapes=tuple(scrapes), gpu=first.gpu_status())

    async def poll(self) -> Frame:
        if self._in_thread:
            return await asyncio.to_thread(self._step)
        return self._step()

    def poll_now(self) -> Frame:
        """The next frame, synchronously (reports and tests that run virtual time flat out)."""
        return self._step()
