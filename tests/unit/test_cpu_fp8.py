"""Whether a server on this host can keep an FP8 KV cache: vLLM's CPU build refuses one on an
x86 CPU without AVX-512 or AMX (it exits while starting), so the rules must not advise it."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from vtop.report.run import replay_document
from vtop.sources import cpu, discovery

# the first processor of /proc/cpuinfo on an AMD EPYC without AVX-512, where vLLM 0.32's CPU
# build exited with "FP8 KV cache on CPU requires x86 with AVX-512 or AMX" (shortened)
EPYC_AVX2 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu vme de pse tsc msr pae sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2
bugs\t\t: sysret_ss_attrs spectre_v1
"""
AVX512 = EPYC_AVX2.replace("avx2 bmi2", "avx2 bmi2 avx512f avx512bw avx512_bf16")
AMX = EPYC_AVX2.replace("avx2 bmi2", "avx2 bmi2 amx_bf16 amx_tile amx_int8")
ARM = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp
"""


@pytest.mark.parametrize(
    ("cpuinfo", "supported"), [(EPYC_AVX2, False), (AVX512, True), (AMX, True), (ARM, None)]
)
def test_fp8_kv_is_read_from_the_cpus_flags(cpuinfo: str, supported: bool | None) -> None:
    knob = cpu.fp8_kv_knob(cpu.cpu_flags(cpuinfo))
    if supported is None:
        assert knob is None  # an Arm CPU: vLLM states nothing, vtop assumes nothing
        return
    assert knob is not None
    assert (knob.name, knob.value, knob.provenance) == ("fp8_kv_supported", supported, "process")
    assert ("AVX-512 or AMX" in knob.detail) is not supported


def test_no_cpuinfo_is_no_flags() -> None:
    assert cpu.cpu_flags("") is None
    assert cpu.fp8_kv_knob(None) is None


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"),
    reason="reads an x86 Linux host's /proc/cpuinfo",
)
def test_this_hosts_cpu_is_read() -> None:
    flags = cpu.cpu_flags(Path("/proc/cpuinfo").read_text())
    assert flags is not None and "sse2" in flags
    knob = cpu.local_cpu_server_knob()
    if cpu.has_accelerator():
        assert knob is None  # a GPU may serve: the CPU says nothing about the KV cache
    else:
        assert knob is not None and knob.value is bool({"avx512f", "amx_tile"} & flags)


def test_the_hosts_word_is_a_knob_the_server_does_not_override() -> None:
    knob = cpu.fp8_kv_knob(cpu.cpu_flags(EPYC_AVX2))
    assert knob is not None
    merged = discovery.merge(host={knob.name: knob})
    assert merged["fp8_kv_supported"] == knob
    assert "fp8_kv_supported" not in discovery.merge()  # a remote server: nothing is said


def test_the_real_server_on_such_a_cpu_is_told_fewer_seats_not_fp8() -> None:
    """vLLM's CPU build on a CPU without AVX-512, its KV pool full (16 seats, 24 blocks, 40
    clients), recorded live by vtop: the knob is in the trace, and the advice it gives is what
    the pool fits, which the server can start with."""
    trace = Path(__file__).resolve().parents[1] / "fixtures/real-regimes/kv-nofp8-slowhost.vtrace"
    doc = replay_document(str(trace))
    assert doc["endpoints"][0]["knobs"]["fp8_kv_supported"]["value"] is False
    (top,) = [f for f in doc["findings"] if f["rule"] == "memory-ceiling"]
    flags = [r["flag"] for r in top["recommendations"]]
    assert not any(f.startswith("--kv-cache-dtype") for f in flags), flags
    (seats,) = [r for r in top["recommendations"] if r["knob"] == "max_num_seqs"]
    assert seats["direction"] == "lower" and isinstance(seats["to"], int) and seats["to"] < 16
