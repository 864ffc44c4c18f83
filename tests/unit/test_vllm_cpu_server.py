"""The real-server harness picks float32 only where the CPU would emulate bfloat16.

On an x86 CPU without AVX-512 vLLM's bfloat16 matmuls fall back to emulation, five times slower
than float32; a test's regime (waves every few seconds, a pool that fills in seconds) would
not show within its minute. The flags are read from /proc/cpuinfo's text.
"""

from __future__ import annotations

from tools.vllm_cpu.server import emulated_bf16, server_args

AVX2 = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 fma\n"
AVX512 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512bw avx512_vnni\n"
AVX512_BF16 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"
AMX = "processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_tile\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd bf16\n"


def test_only_an_x86_cpu_without_avx512_emulates_bf16() -> None:
    assert emulated_bf16(AVX2)
    assert not emulated_bf16(AVX512)  # oneDNN's own bfloat16 path, as the preset was measured
    assert not emulated_bf16(AVX512_BF16)
    assert not emulated_bf16(AMX)
    assert not emulated_bf16(ARM)


def test_a_dtype_given_by_the_caller_is_never_doubled() -> None:
    args = server_args("engine", port=8000, extra_args=("--dtype", "bfloat16"))
    assert args.count("--dtype") == 1 and args[args.index("--dtype") + 1] == "bfloat16"
    plain = server_args("engine", port=8000)
    assert ("--dtype" in plain) == emulated_bf16()
