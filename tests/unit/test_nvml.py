"""NvmlReader against the real pynvml wrapper over a fake C library (tests/fakes/nvml.py)."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterator

import pynvml
import pytest

from tests.fakes.nvml import GIB, FakeGpu, FakeNvml, FakeProcess
from vtop.model import GpuReading, GpuStatus
from vtop.sources.nvml import NvmlReader

NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
NO_PERMISSION = pynvml.NVML_ERROR_NO_PERMISSION


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(autouse=True)
def _no_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    """vtop never spawns nvidia-smi (or anything else) to read the GPU."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"spawned a process: {args}")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def reader(clock: Clock) -> Iterator[NvmlReader]:
    r = NvmlReader(clock=clock, static_ttl_s=60.0, retry_s=30.0)
    yield r
    r.close()


def only(status: GpuStatus) -> GpuReading:
    assert status.unavailable is None
    assert len(status.gpus) == 1
    return status.gpus[0]


def test_reads_every_field_of_every_gpu(reader: NvmlReader) -> None:
    gpus = [
        FakeGpu(
            name="NVIDIA GeForce RTX 4090",
            util_pct=93,
            mem_total=25_757_220_864,
            mem_used=22 * GIB,
            power_mw=398_123,
            power_limit_mw=450_000,
            temp_c=71,
            processes=[FakeProcess(4242, 20 * GIB), FakeProcess(4243, GIB)],
        ),
        FakeGpu(name="NVIDIA H200", util_pct=5, mem_total=150 * GIB, mem_used=GIB, temp_c=33),
    ]
    gpus[1].clocks_mhz[pynvml.NVML_CLOCK_SM] = 1980
    with FakeNvml(gpus):
        status = reader.read(pids=[4242, 4243])
    assert status.unavailable is None
    a, b = status.gpus
    assert a == GpuReading(
        index=0,
        name="NVIDIA GeForce RTX 4090",
        uuid="GPU-00000000-1111-2222-3333-444455556666",
        util_pct=93.0,
        mem_used_bytes=22 * GIB,
        mem_total_bytes=25_757_220_864,
        power_w=398.123,
        power_limit_w=450.0,
        temp_c=71.0,
        sm_clock_mhz=2520.0,
        process_mem_bytes=21 * GIB,
        error=None,
    )
    assert (b.index, b.name, b.util_pct, b.temp_c, b.sm_clock_mhz) == (
        1,
        "NVIDIA H200",
        5.0,
        33.0,
        1980.0,
    )
    assert b.mem_total_bytes == 150 * GIB
    assert b.uuid == "GPU-00000001-1111-2222-3333-444455556666"
    assert b.process_mem_bytes is None  # the server has nothing on this GPU


def test_handles_and_static_fields_are_read_once_values_every_poll(reader: NvmlReader) -> None:
    gpu = FakeGpu(util_pct=10)
    with FakeNvml([gpu, FakeGpu()]) as lib:
        assert only_first(reader.read()).util_pct == 10.0
        gpu.util_pct, gpu.temp_c, gpu.power_mw = 95, 80, 420_000
        later = only_first(reader.read())
        reader.read()
    assert (later.util_pct, later.temp_c, later.power_w) == (95.0, 80.0, 420.0)
    assert lib.count("nvmlInitWithFlags") == 1
    assert lib.count("nvmlDeviceGetCount_v2") == 1
    for i in (0, 1):
        assert lib.count("nvmlDeviceGetHandleByIndex_v2", i) == 1
        assert lib.count("nvmlDeviceGetName", i) == 1
        assert lib.count("nvmlDeviceGetUUID", i) == 1
        assert lib.count("nvmlDeviceGetEnforcedPowerLimit", i) == 1
        assert lib.count("nvmlDeviceGetUtilizationRates", i) == 3


def only_first(status: GpuStatus) -> GpuReading:
    assert status.unavailable is None
    return status.gpus[0]


def test_process_memory_is_only_asked_for_when_there_are_pids(reader: NvmlReader) -> None:
    with FakeNvml([FakeGpu(processes=[FakeProcess(7, GIB)])]) as lib:
        assert only(reader.read()).process_mem_bytes is None
        assert lib.count("nvmlDeviceGetComputeRunningProcesses_v3") == 0
        assert only(reader.read(pids={7})).process_mem_bytes == GIB


@pytest.mark.parametrize(
    ("processes", "pids", "expected"),
    [
        ([], {1}, None),
        ([FakeProcess(1, 3 * GIB)], {1}, 3 * GIB),
        ([FakeProcess(1, 3 * GIB), FakeProcess(2, GIB), FakeProcess(9, 5 * GIB)], {1, 2}, 4 * GIB),
        ([FakeProcess(9, 5 * GIB)], {1, 2}, None),  # e.g. host pids seen from a container
        ([FakeProcess(1, None)], {1}, None),  # NVML: value not available
        ([FakeProcess(p, GIB) for p in range(100, 140)], {*range(100, 140)}, 40 * GIB),
    ],
)
def test_process_memory(
    reader: NvmlReader, processes: list[FakeProcess], pids: set[int], expected: int | None
) -> None:
    with FakeNvml([FakeGpu(processes=processes)]):
        assert only(reader.read(pids=pids)).process_mem_bytes == expected


def test_unsupported_fields_are_none_and_not_asked_again(reader: NvmlReader) -> None:
    gpu = FakeGpu(
        errors={
            "nvmlDeviceGetPowerUsage": NOT_SUPPORTED,
            "nvmlDeviceGetEnforcedPowerLimit": NO_PERMISSION,
            "nvmlDeviceGetTemperatureV": NOT_SUPPORTED,
            "nvmlDeviceGetUtilizationRates": NOT_SUPPORTED,  # a MIG slice
            "nvmlDeviceGetComputeRunningProcesses_v3": NO_PERMISSION,
        }
    )
    with FakeNvml([gpu, FakeGpu()]) as lib:
        readings = [reader.read(pids={1}) for _ in range(3)]
    for status in readings:
        a, b = status.gpus
        assert a.error is None
        assert (a.util_pct, a.power_w, a.power_limit_w, a.temp_c) == (None, None, None, None)
        assert a.process_mem_bytes is None
        assert (a.mem_used_bytes, a.sm_clock_mhz) == (gpu.mem_used, 2520.0)
        assert (b.util_pct, b.power_w, b.temp_c) == (87.0, 312.456, 64.0)  # other GPU unaffected
    for function in gpu.errors:
        assert lib.count(function, 0) == 1, function
    # Not supported on this GPU is not "the driver lacks the function": no fallback on GPU 0.
    assert lib.count("nvmlDeviceGetTemperature", 0) == 0
    assert lib.count("nvmlDeviceGetComputeRunningProcesses_v2", 0) == 0


def test_a_transient_error_is_none_for_that_poll_logged_once_and_retried(
    reader: NvmlReader, caplog: pytest.LogCaptureFixture
) -> None:
    gpu = FakeGpu(errors={"nvmlDeviceGetClockInfo": pynvml.NVML_ERROR_UNKNOWN})
    with caplog.at_level(logging.WARNING), FakeNvml([gpu]) as lib:
        first, second = only(reader.read()), only(reader.read())
        gpu.errors.clear()
        third = only(reader.read())
    assert (first.sm_clock_mhz, second.sm_clock_mhz, third.sm_clock_mhz) == (None, None, 2520.0)
    assert first.util_pct == 87.0
    assert lib.count("nvmlDeviceGetClockInfo") == 3
    warnings = [r for r in caplog.records if "sm_clock" in r.getMessage()]
    assert len(warnings) == 1
    assert "Unknown Error" in warnings[0].getMessage()


def test_memory_total_survives_a_failed_memory_read(reader: NvmlReader) -> None:
    gpu = FakeGpu()
    with FakeNvml([gpu]):
        reader.read()
        gpu.errors["nvmlDeviceGetMemoryInfo"] = pynvml.NVML_ERROR_TIMEOUT
        reading = only(reader.read())
    assert reading.mem_used_bytes is None
    assert reading.mem_total_bytes == gpu.mem_total


def test_power_limit_is_ttl_cached(reader: NvmlReader, clock: Clock) -> None:
    gpu = FakeGpu(power_limit_mw=450_000)
    with FakeNvml([gpu]) as lib:
        assert only(reader.read()).power_limit_w == 450.0
        gpu.power_limit_mw = 300_000  # nvidia-smi -pl 300
        clock.t += 59
        assert only(reader.read()).power_limit_w == 450.0
        clock.t += 2
        assert only(reader.read()).power_limit_w == 300.0
    assert lib.count("nvmlDeviceGetEnforcedPowerLimit") == 2


def test_gpu_lost_mid_run_retires_that_gpu_only(reader: NvmlReader) -> None:
    gpus = [FakeGpu(name="A"), FakeGpu(name="B", processes=[FakeProcess(5, GIB)])]
    with FakeNvml(gpus) as lib:
        before = reader.read(pids={5})
        lib.lose(1)
        after = [reader.read(pids={5}) for _ in range(3)]
        calls_on_lost = sum(1 for _, i in lib.calls if i == 1)
        reader.read()
        assert sum(1 for _, i in lib.calls if i == 1) == calls_on_lost  # never asked again
    assert before.gpus[1].error is None
    assert before.gpus[1].process_mem_bytes == GIB
    for status in after:
        a, b = status.gpus
        assert a.error is None
        assert a.util_pct == 87.0
        assert b == GpuReading(
            index=1,
            name="B",
            uuid="GPU-00000001-1111-2222-3333-444455556666",
            error="GPU lost",
        )


def test_gpu_lost_partway_through_a_reading(reader: NvmlReader) -> None:
    # Lost after 3 device calls: name and uuid at open, then utilisation; memory is lost.
    gpu = FakeGpu(lost_after_calls=3)
    with FakeNvml([gpu, FakeGpu()]):
        status = reader.read()
    a, b = status.gpus
    assert a.error == "GPU lost"
    assert (a.util_pct, a.mem_used_bytes, a.mem_total_bytes, a.power_w) == (None,) * 4
    assert b.error is None
    assert b.util_pct == 87.0


def test_gpu_lost_before_open_and_reset_required(reader: NvmlReader) -> None:
    lost = FakeGpu(lost=True)
    reset = FakeGpu(errors={"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_RESET_REQUIRED})
    with FakeNvml([lost, reset, FakeGpu()]):
        a, b, c = reader.read().gpus
    assert (a.error, a.name) == ("GPU lost", "GPU 0")
    assert b.error == "GPU requires reset"
    assert b.util_pct is None
    assert c.error is None


def test_a_handle_without_permission_is_reported_not_raised(reader: NvmlReader) -> None:
    denied = FakeGpu(errors={"nvmlDeviceGetHandleByIndex_v2": NO_PERMISSION})
    with FakeNvml([denied, FakeGpu()]):
        a, b = reader.read().gpus
    assert a.error == "Insufficient Permissions"
    assert a.util_pct is None
    assert b.error is None


def test_driver_not_loaded_is_unavailable_and_retried_later(
    reader: NvmlReader, clock: Clock
) -> None:
    with FakeNvml([FakeGpu()], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED) as lib:
        first = reader.read()
        second = reader.read()
        assert lib.count("nvmlInitWithFlags") == 1  # not retried every poll
        lib.init_error = pynvml.NVML_SUCCESS  # the driver is loaded (modprobe nvidia)
        clock.t += 31
        third = reader.read()
    assert first == second == GpuStatus(unavailable="NVIDIA driver not loaded")
    assert only(third).util_pct == 87.0


def test_library_missing_is_unavailable() -> None:
    with FakeNvml.missing():
        status = NvmlReader().read()
    assert status.gpus == ()
    assert status.unavailable is not None
    assert "NVML library (libnvidia-ml) not found" in status.unavailable


def test_no_gpu_is_unavailable_and_nvml_is_shut_down(reader: NvmlReader) -> None:
    with FakeNvml([]) as lib:
        status = reader.read()
        assert lib.initialized == 0
    assert status == GpuStatus(unavailable="no NVIDIA GPU found")


def test_other_init_failures_say_what_nvml_said(reader: NvmlReader) -> None:
    with FakeNvml([FakeGpu()], init_error=pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH):
        status = reader.read()
    assert status.unavailable == (
        "NVML failed to initialise: RM has detected an NVML/RM version mismatch."
    )


def test_close_shuts_nvml_down_once(clock: Clock) -> None:
    with FakeNvml([FakeGpu()]) as lib:
        with NvmlReader(clock=clock) as reader:
            only(reader.read())
            assert lib.initialized == 1
        assert lib.initialized == 0
        reader.close()
        assert lib.count("nvmlShutdown") == 1
        assert reader.read() == GpuStatus(unavailable="NVML closed")


def test_an_older_driver_without_newer_functions_steps_down_once(reader: NvmlReader) -> None:
    old = ["nvmlDeviceGetTemperatureV", "nvmlDeviceGetComputeRunningProcesses_v3"]
    gpus = [FakeGpu(temp_c=55, processes=[FakeProcess(3, 2 * GIB)]), FakeGpu(temp_c=56)]
    with FakeNvml(gpus, missing_functions=old) as lib:
        readings = [reader.read(pids={3}) for _ in range(3)]
    for status in readings:
        assert [g.temp_c for g in status.gpus] == [55.0, 56.0]
        assert status.gpus[0].process_mem_bytes == 2 * GIB
    assert lib.count("nvmlDeviceGetTemperature") == 6
    assert lib.count("nvmlDeviceGetComputeRunningProcesses_v2", 1) == 3
    assert sorted(lib.missing_lookups) == sorted(old)  # each newer symbol tried once only


def test_a_driver_without_any_temperature_function(reader: NvmlReader) -> None:
    missing = ["nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"]
    with FakeNvml([FakeGpu()], missing_functions=missing):
        reading = only(reader.read())
        assert only(reader.read()).temp_c is None
    assert reading.temp_c is None
    assert reading.util_pct == 87.0


def test_a_driver_that_cannot_count_gpus_is_unavailable_and_shut_down(
    reader: NvmlReader,
) -> None:
    with FakeNvml([FakeGpu()], missing_functions=["nvmlDeviceGetCount_v2"]) as lib:
        status = reader.read()
        assert lib.initialized == 0
    assert status == GpuStatus(unavailable="NVML cannot count GPUs: Function Not Found")
