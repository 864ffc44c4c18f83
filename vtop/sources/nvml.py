"""The GPUs of this host, read through NVML (nvidia-ml-py, imported as `pynvml`).

Built the way nvitop reads NVML, because a monitor that an SSH user leaves open all day must
never be the thing that hurts:

- NVML is initialised once and every device handle opened once; a poll is a handful of cheap
  queries per GPU (utilisation, memory, power, temperature, SM clock, and the compute processes
  only when there are server pids to match). Never `nvidia-smi`: a process per poll costs more
  than everything else vtop does.
- A field the card does not support (consumer cards and MIG slices lack some; containers may
  deny some) is `None`, and is remembered as such so it is not asked again every poll. The
  same for a C function an older driver lacks: the reader steps down to the older variant
  (`nvmlDeviceGetTemperatureV` → `nvmlDeviceGetTemperature`, process list v3 → v2) once.
- Static fields (name, UUID) are read once; total memory comes free with used memory and is
  kept when a later read fails; the power limit (settable with `nvidia-smi -pl`) is TTL-cached.
- A GPU that falls off the bus (`GPU is lost`, Xid 79) or needs a reset keeps its row with
  `error` set and no values, and is never queried again: calls on a lost GPU can stall for
  seconds. The other GPUs keep working. Nothing here raises into the poll loop.
- No library, no driver, no GPU: `GpuStatus(unavailable=<reason>)`, so the UI drops the GPU
  section and says why. Initialisation is retried after `retry_s`, not every poll.

Memory "used" is NVML's v1 figure (total − free), the same quantity vLLM's
`gpu_memory_utilization` budget is computed from (`torch.cuda.mem_get_info`).

`pynvml` has no type stubs; everything untyped stays inside this module, behind `_Nv` (`Any`)
and converted to plain `int` / `float` / `str` at the point of reading.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from vtop.model import GpuReading, GpuStatus

log = logging.getLogger(__name__)

_Nv = Any
"""The `pynvml` module (untyped)."""

_LOST: Final = "GPU lost"
_RESET: Final = "GPU requires reset"


class _GpuGone(Exception):
    """A call said the GPU is lost or needs a reset; the GPU is retired with this message."""


@dataclass
class _Gpu:
    """What the reader keeps per device between polls (owned by the reader's lock)."""

    index: int
    handle: Any
    name: str
    uuid: str | None = None
    error: str | None = None
    unsupported: set[str] = field(default_factory=set)
    mem_total: int | None = None
    power_limit_w: float | None = None
    power_limit_read_at: float | None = None


_Getter = Callable[[_Nv, Any], Any]
"""One way to read a field: `(pynvml, handle) -> value`."""


class NvmlReader:
    """Reads every GPU once per call; cheap enough for a worker thread at each poll.

    Thread-safe (one lock): `read` from a worker thread, `close` from anywhere.
    `clock` is injectable for tests of the TTL and the init retry.
    """

    def __init__(
        self,
        *,
        static_ttl_s: float = 60.0,
        retry_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._static_ttl_s = static_ttl_s
        self._retry_s = retry_s
        self._clock = clock
        self._lock = threading.Lock()
        self._nv: _Nv = None
        self._initialized = False
        self._gpus: list[_Gpu] | None = None
        """Open devices; None until NVML is up (and again after a failed open or close)."""
        self._unavailable = "not read yet"
        self._retry_at: float | None = None
        self._closed = False
        self._logged: set[tuple[int, str, str]] = set()
        # Driver-wide choice among a field's C-function variants (newest first); a variant
        # the driver or the wrapper lacks is dropped once for all GPUs.
        self._temp_variants: list[_Getter] = [
            lambda nv, h: nv.nvmlDeviceGetTemperatureV(h, nv.NVML_TEMPERATURE_GPU),
            lambda nv, h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
        ]
        self._proc_variants: list[_Getter] = [
            lambda nv, h: nv.nvmlDeviceGetComputeRunningProcesses(h),
            lambda nv, h: nv.nvmlDeviceGetComputeRunningProcesses_v2(h),
        ]

    # --- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> NvmlReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Shut NVML down (once). Later reads answer `unavailable="NVML closed"`."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._shutdown()
            self._unavailable = "NVML closed"

    def _shutdown(self) -> None:
        if self._initialized:
            self._initialized = False
            try:
                self._nv.nvmlShutdown()
            except self._nv.NVMLError as exc:
                log.debug("nvmlShutdown failed: %s", exc)
        self._gpus = None

    def _open(self) -> bool:
        """Initialise NVML and open every handle; False (with `_unavailable` set) if not."""
        now = self._clock()
        if self._retry_at is not None and now < self._retry_at:
            return False
        self._retry_at = now + self._retry_s
        if self._nv is None:
            try:
                self._nv = importlib.import_module("pynvml")
            except ImportError:
                self._unavailable = "nvidia-ml-py (pynvml) is not installed"
                return False
        nv = self._nv
        try:
            nv.nvmlInit()
        except nv.NVMLError_LibraryNotFound:
            self._unavailable = "no NVIDIA driver: NVML library (libnvidia-ml) not found"
            return False
        except nv.NVMLError_DriverNotLoaded:
            self._unavailable = "NVIDIA driver not loaded"
            return False
        except nv.NVMLError_NoPermission:
            self._unavailable = "no permission to use NVML"
            return False
        except nv.NVMLError as exc:
            self._unavailable = f"NVML failed to initialise: {exc}"
            return False
        self._initialized = True
        try:
            count = int(nv.nvmlDeviceGetCount())
        except nv.NVMLError as exc:
            self._unavailable = f"NVML cannot count GPUs: {exc}"
            self._shutdown()
            return False
        if count == 0:
            self._unavailable = "no NVIDIA GPU found"
            self._shutdown()
            return False
        self._gpus = [self._open_gpu(i) for i in range(count)]
        self._retry_at = None
        return True

    def _open_gpu(self, index: int) -> _Gpu:
        nv = self._nv
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(index)
        except nv.NVMLError as exc:
            return _Gpu(index, None, f"GPU {index}", error=_gone_message(nv, exc) or str(exc))
        gpu = _Gpu(index, handle, f"GPU {index}")
        try:
            name = self._query(gpu, "name", lambda: nv.nvmlDeviceGetName(handle))
            if name is not None:
                gpu.name = str(name)
            uuid = self._query(gpu, "uuid", lambda: nv.nvmlDeviceGetUUID(handle))
            gpu.uuid = None if uuid is None else str(uuid)
        except _GpuGone as gone:
            gpu.error = str(gone)
        return gpu

    # --- reading ----------------------------------------------------------------------------

    def read(self, pids: Collection[int] = ()) -> GpuStatus:
        """One reading of every GPU. `pids`: the vLLM server's process tree, for its memory."""
        with self._lock:
            if self._closed:
                return GpuStatus(unavailable=self._unavailable)
            if self._gpus is None and not self._open():
                return GpuStatus(unavailable=self._unavailable)
            assert self._gpus is not None
            wanted = frozenset(pids)
            try:
                return GpuStatus(gpus=tuple(self._read_gpu(gpu, wanted) for gpu in self._gpus))
            except Exception as exc:  # a wrapper surprise must not take the poll loop down
                log.exception("reading NVML failed")
                return GpuStatus(unavailable=f"NVML read failed: {exc}")

    def _read_gpu(self, gpu: _Gpu, pids: frozenset[int]) -> GpuReading:
        if gpu.error is None:
            try:
                return self._read_fields(gpu, pids)
            except _GpuGone as gone:
                gpu.error = str(gone)
                log.warning("GPU %d (%s): %s", gpu.index, gpu.name, gone)
        return GpuReading(index=gpu.index, name=gpu.name, uuid=gpu.uuid, error=gpu.error)

    def _read_fields(self, gpu: _Gpu, pids: frozenset[int]) -> GpuReading:
        nv, h = self._nv, gpu.handle
        util = self._query(gpu, "util", lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu)
        mem = self._query(gpu, "memory", lambda: nv.nvmlDeviceGetMemoryInfo(h))
        mem_used: int | None = None
        if mem is not None:
            mem_used, gpu.mem_total = int(mem.used), int(mem.total)
        power = self._query(gpu, "power", lambda: nv.nvmlDeviceGetPowerUsage(h))
        temp = self._query_variants(gpu, "temp", self._temp_variants)
        sm_clock = self._query(
            gpu, "sm_clock", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
        )
        return GpuReading(
            index=gpu.index,
            name=gpu.name,
            uuid=gpu.uuid,
            util_pct=None if util is None else float(util),
            mem_used_bytes=mem_used,
            mem_total_bytes=gpu.mem_total,
            power_w=None if power is None else int(power) / 1000.0,
            power_limit_w=self._power_limit(gpu),
            temp_c=None if temp is None else float(temp),
            sm_clock_mhz=None if sm_clock is None else float(sm_clock),
            process_mem_bytes=self._process_memory(gpu, pids),
        )

    def _power_limit(self, gpu: _Gpu) -> float | None:
        now = self._clock()
        fresh = (
            gpu.power_limit_read_at is not None
            and now - gpu.power_limit_read_at < self._static_ttl_s
        )
        if not fresh:
            nv, h = self._nv, gpu.handle
            limit = self._query(gpu, "power_limit", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
            if limit is not None:
                gpu.power_limit_w = int(limit) / 1000.0
            gpu.power_limit_read_at = now
        return gpu.power_limit_w

    def _process_memory(self, gpu: _Gpu, pids: frozenset[int]) -> int | None:
        """Bytes the given pids hold on this GPU; None if none of them is seen on it.

        In a container without the host's pid namespace NVML reports host pids, which never
        match: the value is then None (unknown), not 0.
        """
        if not pids:
            return None
        procs = self._query_variants(gpu, "processes", self._proc_variants)
        if procs is None:
            return None
        used = [p.usedGpuMemory for p in procs if int(p.pid) in pids]
        known = [int(u) for u in used if u is not None]
        return sum(known) if known else None

    # --- one NVML call, with the error policy ------------------------------------------------

    def _query(
        self, gpu: _Gpu, name: str, call: Callable[[], Any], *, variant: bool = False
    ) -> Any:
        """Run one NVML call for `gpu`'s field `name`; None when it cannot be read.

        Not supported / no permission / a function this driver or wrapper lacks: None, and the
        field is not asked again. Lost GPU: `_GpuGone`. Anything else NVML says (timeout,
        unknown): None for this poll, logged once, asked again next poll. With `variant`, a
        missing function is raised for `_query_variants` to step down instead.
        """
        if name in gpu.unsupported:
            return None
        nv = self._nv
        try:
            return call()
        except (AttributeError, nv.NVMLError_FunctionNotFound, nv.NVMLLibraryMismatchError):
            if variant:
                raise
            gpu.unsupported.add(name)
            return None
        except nv.NVMLError as exc:
            gone = _gone_message(nv, exc)
            if gone is not None:
                raise _GpuGone(gone) from exc
            if isinstance(exc, nv.NVMLError_NotSupported | nv.NVMLError_NoPermission):
                gpu.unsupported.add(name)
            else:
                self._log_once(gpu, name, exc)
            return None

    def _query_variants(self, gpu: _Gpu, name: str, variants: list[_Getter]) -> Any:
        """`_query` over a field's C-function variants, dropping ones the driver lacks."""
        nv = self._nv
        while variants:
            getter = variants[0]
            try:
                return self._query(gpu, name, partial(getter, nv, gpu.handle), variant=True)
            except (AttributeError, nv.NVMLError_FunctionNotFound, nv.NVMLLibraryMismatchError):
                log.debug(
                    "NVML %s: the driver lacks variant %d, stepping down", name, len(variants)
                )
                variants.pop(0)
        gpu.unsupported.add(name)
        return None

    def _log_once(self, gpu: _Gpu, name: str, exc: Exception) -> None:
        key = (gpu.index, name, type(exc).__name__)
        if key not in self._logged:
            self._logged.add(key)
            log.warning("GPU %d: reading %s failed: %s", gpu.index, name, exc)


def _gone_message(nv: _Nv, exc: Exception) -> str | None:
    if isinstance(exc, nv.NVMLError_GpuIsLost):
        return _LOST
    if isinstance(exc, nv.NVMLError_ResetRequired):
        return _RESET
    return None
