"""A fake `libnvidia-ml.so.1` under the real `pynvml` module.

Why this layer: the code under test calls nvidia-ml-py, whose wrappers allocate ctypes structs,
pass them by reference to C functions and turn the C return code into a typed `NVMLError_*`
exception. A fake of the Python module would have to re-implement all of that, and would drift
from the real wrapper (struct versions, `_v2`/`_v3` function names, how `Insufficient Size` is
handled for process lists, which wrapper raises `NVMLLibraryMismatchError`). Faking the C
library instead keeps every line of the real wrapper in the test: `pynvml` loads the library
with `CDLL("libnvidia-ml.so.1")` and resolves each function with `getattr(nvmlLib, name)`, so a
Python object whose attributes are callables taking the same ctypes arguments, writing into the
same structs and returning NVML return codes is, to `pynvml`, a driver.

What it models, per GPU (`FakeGpu`, mutable between polls): name, UUID, utilisation, memory,
power and its limit, temperature, clocks, compute processes; C functions that answer a given
return code (`NOT_SUPPORTED`, `NO_PERMISSION`, ...); a GPU that falls off the bus after N calls
or on demand; and, library-wide, a failing `nvmlInit` (driver not loaded), C functions an older
driver lacks, and no library at all. Every C call is recorded, so a test can prove what was
(not) called.

Use it as a context manager: `with FakeNvml([FakeGpu()]) as lib: ...`, or
`with FakeNvml.missing(): ...` for a host without the library.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pynvml

GIB = 1024**3
_HANDLE_BASE = 0x7F00_0000_0000
_HANDLE_STRIDE = 0x1000

NVML_SUCCESS: int = pynvml.NVML_SUCCESS


@dataclass
class FakeProcess:
    """A compute process on a GPU; `used_bytes=None` is NVML's "not available"."""

    pid: int
    used_bytes: int | None


@dataclass
class FakeGpu:
    """One fake device. Values are in NVML's own units (mW, MHz, bytes, percent, °C).

    `errors` maps a C function name (`"nvmlDeviceGetPowerUsage"`) to the return code that
    function answers for this GPU, e.g. `pynvml.NVML_ERROR_NOT_SUPPORTED`.
    `lost_after_calls`: after this many device calls, every call answers `GPU_IS_LOST`.
    """

    name: str = "NVIDIA GeForce RTX 4090"
    uuid: str | None = None
    util_pct: int = 87
    mem_util_pct: int = 41
    mem_total: int = 25_757_220_864
    mem_used: int = 21 * GIB
    power_mw: int = 312_456
    power_limit_mw: int = 450_000
    power_management_limit_mw: int = 450_000
    temp_c: int = 64
    clocks_mhz: dict[int, int] = field(
        default_factory=lambda: {
            pynvml.NVML_CLOCK_GRAPHICS: 2520,
            pynvml.NVML_CLOCK_SM: 2520,
            pynvml.NVML_CLOCK_MEM: 10501,
            pynvml.NVML_CLOCK_VIDEO: 1950,
        }
    )
    processes: list[FakeProcess] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    lost_after_calls: int | None = None
    lost: bool = False
    calls: int = 0


def _obj(ref: Any) -> Any:
    """The ctypes object behind `byref(x)` (what the C side would dereference)."""
    return getattr(ref, "_obj", ref)


def _int(arg: Any) -> int:
    return int(arg.value) if hasattr(arg, "value") else int(arg)


def _write_string(buf: Any, size: Any, text: str) -> int:
    data = text.encode()
    if len(data) + 1 > _int(size):
        return int(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
    buf.value = data
    return NVML_SUCCESS


class FakeNvml:
    """The fake C library. Attributes named like NVML's C functions are the functions."""

    def __init__(
        self,
        gpus: Sequence[FakeGpu] = (),
        *,
        init_error: int = NVML_SUCCESS,
        missing_functions: Sequence[str] = (),
        driver_version: str = "550.54.15",
    ) -> None:
        self.gpus = list(gpus)
        for i, gpu in enumerate(self.gpus):
            if gpu.uuid is None:
                gpu.uuid = f"GPU-{i:08x}-1111-2222-3333-444455556666"
        self.init_error = init_error
        self.missing_functions = set(missing_functions)
        self.driver_version = driver_version
        self.initialized = 0
        self.calls: list[tuple[str, int | None]] = []
        self.missing_lookups: list[str] = []  # symbols looked up that this driver lacks
        self._fns: dict[str, Callable[..., Any]] = {}
        self._absent = False

    # --- test controls -------------------------------------------------------------------

    @classmethod
    def missing(cls) -> FakeNvml:
        """A host with no `libnvidia-ml.so.1` at all: loading it fails like `CDLL` does."""
        lib = cls()
        lib._absent = True
        return lib

    def lose(self, index: int) -> None:
        """The GPU falls off the bus now (Xid 79): every call on it answers GPU_IS_LOST."""
        self.gpus[index].lost = True

    def count(self, function: str, index: int | None = None) -> int:
        """How many times a C function was called (on one GPU, if `index` is given)."""
        return sum(1 for f, i in self.calls if f == function and (index is None or i == index))

    # --- installing under the real pynvml -------------------------------------------------

    def __enter__(self) -> FakeNvml:
        self._saved = (pynvml.CDLL, pynvml.nvmlLib, pynvml._nvmlLib_refcount)
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml.nvmlLib = None
        pynvml._nvmlLib_refcount = 0
        pynvml.CDLL = self._cdll
        return self

    def __exit__(self, *exc: object) -> None:
        pynvml.CDLL, pynvml.nvmlLib, pynvml._nvmlLib_refcount = self._saved
        pynvml._nvmlGetFunctionPointer_cache.clear()

    def _cdll(self, name: str, *args: Any, **kwargs: Any) -> FakeNvml:
        if self._absent or name != "libnvidia-ml.so.1":
            raise OSError(f"{name}: cannot open shared object file: No such file or directory")
        return self

    def __getattr__(self, name: str) -> Callable[..., Any]:
        # pynvml resolves C symbols with getattr(); an AttributeError is a symbol this driver
        # does not export, which pynvml reports as NVMLError_FunctionNotFound.
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self.missing_functions:
            self.__dict__["missing_lookups"].append(name)
            raise AttributeError(name)
        impl = getattr(type(self), "_c_" + name, None)
        if impl is None:
            raise AttributeError(name)
        fns: dict[str, Callable[..., Any]] = self.__dict__["_fns"]
        if name not in fns:
            bound = impl.__get__(self)

            # A plain function, not a bound method: pynvml sets `.restype` on some pointers.
            def c_function(*args: Any) -> Any:
                return bound(*args)

            c_function.__name__ = name
            fns[name] = c_function
        return fns[name]

    # --- helpers shared by the C functions ------------------------------------------------

    def _enter(self, name: str, handle: Any = None) -> tuple[int, FakeGpu | None]:
        """Record the call; answer UNINITIALIZED / INVALID_ARGUMENT / GPU_IS_LOST like NVML."""
        index: int | None = None
        gpu: FakeGpu | None = None
        if handle is not None:
            address = ctypes.cast(handle, ctypes.c_void_p).value or 0
            offset = address - _HANDLE_BASE
            if offset >= 0 and offset % _HANDLE_STRIDE == 0:
                index = offset // _HANDLE_STRIDE
                if index < len(self.gpus):
                    gpu = self.gpus[index]
        self.calls.append((name, index))
        if not self.initialized:
            return int(pynvml.NVML_ERROR_UNINITIALIZED), None
        if handle is not None:
            if gpu is None:
                return int(pynvml.NVML_ERROR_INVALID_ARGUMENT), None
            gpu.calls += 1
            if gpu.lost_after_calls is not None and gpu.calls > gpu.lost_after_calls:
                gpu.lost = True
            if gpu.lost:
                return int(pynvml.NVML_ERROR_GPU_IS_LOST), None
            code = gpu.errors.get(name, NVML_SUCCESS)
            if code != NVML_SUCCESS:
                return code, None
        return NVML_SUCCESS, gpu

    # --- the C functions -------------------------------------------------------------------

    def _c_nvmlInitWithFlags(self, flags: int) -> int:
        self.calls.append(("nvmlInitWithFlags", None))
        if self.init_error != NVML_SUCCESS:
            return self.init_error
        self.initialized += 1
        return NVML_SUCCESS

    def _c_nvmlShutdown(self) -> int:
        self.calls.append(("nvmlShutdown", None))
        if not self.initialized:
            return int(pynvml.NVML_ERROR_UNINITIALIZED)
        self.initialized -= 1
        return NVML_SUCCESS

    def _c_nvmlErrorString(self, code: int) -> bytes:
        text = pynvml.NVMLError._errcode_to_string.get(_int(code), "Unknown Error")
        return str(text).encode()

    def _c_nvmlSystemGetDriverVersion(self, buf: Any, size: Any) -> int:
        code, _ = self._enter("nvmlSystemGetDriverVersion")
        return code if code else _write_string(buf, size, self.driver_version)

    def _c_nvmlDeviceGetCount_v2(self, count_ref: Any) -> int:
        code, _ = self._enter("nvmlDeviceGetCount_v2")
        if code == NVML_SUCCESS:
            _obj(count_ref).value = len(self.gpus)
        return code

    def _c_nvmlDeviceGetHandleByIndex_v2(self, index: Any, handle_ref: Any) -> int:
        i = _int(index)
        self.calls.append(("nvmlDeviceGetHandleByIndex_v2", i))
        if not self.initialized:
            return int(pynvml.NVML_ERROR_UNINITIALIZED)
        if not 0 <= i < len(self.gpus):
            return int(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[i]
        if gpu.lost:
            return int(pynvml.NVML_ERROR_GPU_IS_LOST)
        code = gpu.errors.get("nvmlDeviceGetHandleByIndex_v2", NVML_SUCCESS)
        if code != NVML_SUCCESS:
            return code
        # The handle is an opaque pointer: write an address into the caller's pointer object.
        ctypes.c_void_p.from_buffer(_obj(handle_ref)).value = _HANDLE_BASE + i * _HANDLE_STRIDE
        return NVML_SUCCESS

    def _c_nvmlDeviceGetName(self, handle: Any, buf: Any, size: Any) -> int:
        code, gpu = self._enter("nvmlDeviceGetName", handle)
        return code if gpu is None else _write_string(buf, size, gpu.name)

    def _c_nvmlDeviceGetUUID(self, handle: Any, buf: Any, size: Any) -> int:
        code, gpu = self._enter("nvmlDeviceGetUUID", handle)
        return code if gpu is None else _write_string(buf, size, gpu.uuid or "")

    def _c_nvmlDeviceGetUtilizationRates(self, handle: Any, util_ref: Any) -> int:
        code, gpu = self._enter("nvmlDeviceGetUtilizationRates", handle)
        if gpu is not None:
            util = _obj(util_ref)
            util.gpu, util.memory = gpu.util_pct, gpu.mem_util_pct
        return code

    def _c_nvmlDeviceGetMemoryInfo(self, handle: Any, mem_ref: Any) -> int:
        code, gpu = self._enter("nvmlDeviceGetMemoryInfo", handle)
        if gpu is not None:
            mem = _obj(mem_ref)
            mem.total, mem.used, mem.free = (
                gpu.mem_total,
                gpu.mem_used,
                gpu.mem_total - gpu.mem_used,
            )
        return code

    def _c_nvmlDeviceGetMemoryInfo_v2(self, handle: Any, mem_ref: Any) -> int:
        code, gpu = self._enter("nvmlDeviceGetMemoryInfo_v2", handle)
        if gpu is not None:
            mem = _obj(mem_ref)
            if mem.version != pynvml.nvmlMemory_v2:
                return int(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            reserved = 512 * 1024**2
            mem.total, mem.reserved = gpu.mem_total, reserved
            mem.used, mem.free = gpu.mem_used - reserved, gpu.mem_total - gpu.mem_used
        return code

    def _uint_out(
        self, name: str, handle: Any, out_ref: Any, value: Callable[[FakeGpu], int]
    ) -> int:
        code, gpu = self._enter(name, handle)
        if gpu is not None:
            _obj(out_ref).value = value(gpu)
        return code

    def _c_nvmlDeviceGetPowerUsage(self, handle: Any, out_ref: Any) -> int:
        return self._uint_out("nvmlDeviceGetPowerUsage", handle, out_ref, lambda g: g.power_mw)

    def _c_nvmlDeviceGetEnforcedPowerLimit(self, handle: Any, out_ref: Any) -> int:
        return self._uint_out(
            "nvmlDeviceGetEnforcedPowerLimit", handle, out_ref, lambda g: g.power_limit_mw
        )

    def _c_nvmlDeviceGetPowerManagementLimit(self, handle: Any, out_ref: Any) -> int:
        return self._uint_out(
            "nvmlDeviceGetPowerManagementLimit",
            handle,
            out_ref,
            lambda g: g.power_management_limit_mw,
        )

    def _c_nvmlDeviceGetTemperature(self, handle: Any, sensor: Any, out_ref: Any) -> int:
        code, gpu = self._enter("nvmlDeviceGetTemperature", handle)
        if gpu is not None:
            if _int(sensor) != pynvml.NVML_TEMPERATURE_GPU:
                return int(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            _obj(out_ref).value = gpu.temp_c
        return code

    def _c_nvmlDeviceGetTemperatureV(self, handle: Any, temp_ref: Any) -> int:
        code, gpu = self._enter("nvmlDeviceGetTemperatureV", handle)
        if gpu is not None:
            temp = _obj(temp_ref)
            if temp.version != pynvml.nvmlTemperature_v1:
                return int(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            if temp.sensorType != pynvml.NVML_TEMPERATURE_GPU:
                return int(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            temp.temperature = gpu.temp_c
        return code

    def _c_nvmlDeviceGetClockInfo(self, handle: Any, clock_type: Any, out_ref: Any) -> int:
        code, gpu = self._enter("nvmlDeviceGetClockInfo", handle)
        if gpu is not None:
            mhz = gpu.clocks_mhz.get(_int(clock_type))
            if mhz is None:
                return int(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            _obj(out_ref).value = mhz
        return code

    def _processes(self, name: str, handle: Any, count_ref: Any, infos: Any) -> int:
        # NVML's contract: with too small a buffer (or NULL), answer INSUFFICIENT_SIZE and the
        # needed count; with no processes and a NULL buffer, SUCCESS and count 0.
        code, gpu = self._enter(name, handle)
        if gpu is None:
            return code
        count = _obj(count_ref)
        procs = gpu.processes
        if count.value < len(procs) or (infos is None and procs):
            count.value = len(procs)
            return int(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
        for i, proc in enumerate(procs):
            infos[i].pid = proc.pid
            infos[i].usedGpuMemory = (
                pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
                if proc.used_bytes is None
                else proc.used_bytes
            )
            infos[i].gpuInstanceId = 0xFFFFFFFF
            infos[i].computeInstanceId = 0xFFFFFFFF
        count.value = len(procs)
        return NVML_SUCCESS

    def _c_nvmlDeviceGetComputeRunningProcesses_v3(
        self, handle: Any, count_ref: Any, infos: Any
    ) -> int:
        return self._processes("nvmlDeviceGetComputeRunningProcesses_v3", handle, count_ref, infos)

    def _c_nvmlDeviceGetComputeRunningProcesses_v2(
        self, handle: Any, count_ref: Any, infos: Any
    ) -> int:
        return self._processes("nvmlDeviceGetComputeRunningProcesses_v2", handle, count_ref, infos)


@contextmanager
def fake_nvml(gpus: Sequence[FakeGpu] = (), **kwargs: Any) -> Iterator[FakeNvml]:
    """`with fake_nvml([FakeGpu(), FakeGpu()]) as lib:` installs a fake driver for the block."""
    with FakeNvml(gpus, **kwargs) as lib:
        yield lib
