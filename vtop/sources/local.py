"""The readers of this host (NVML, psutil, the local vLLM process), bundled for a live source.

The knobs probe and the GPU reader share one piece of state: the process ids of the local vLLM
servers that discovery found, so NVML can say how much GPU memory the server holds. Both run
on worker threads; the pid set is replaced, never mutated, so a reader sees a whole set.
"""

from __future__ import annotations

from collections.abc import Mapping

from vtop.model import GpuStatus, HostReading, Knob
from vtop.sources.host import HostSampler, find_vllm_process
from vtop.sources.nvml import NvmlReader


class LocalHost:
    """GPU, host and process readers for `LiveSource`."""

    def __init__(self) -> None:
        self._nvml = NvmlReader()
        self._host = HostSampler()
        self._pids: frozenset[int] = frozenset()

    def gpu(self) -> GpuStatus:
        return self._nvml.read(self._pids)

    def host(self) -> HostReading:
        return self._host.read()

    def process_knobs(self, port: int) -> Mapping[str, Knob] | None:
        """Knobs of the vLLM server serving `port` on this host, None if there is none."""
        proc = find_vllm_process(port)
        if proc is None:
            return None
        self._pids = self._pids | frozenset(proc.pids)
        return proc.knobs

    def close(self) -> None:
        self._nvml.close()
