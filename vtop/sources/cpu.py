"""What this host's CPU lets vLLM's CPU build do: an FP8 KV cache needs AVX-512 or AMX.

vLLM's CPU build refuses `--kv-cache-dtype fp8` on an x86 CPU without AVX-512 or AMX: the
engine exits while starting with "FP8 KV cache on CPU requires x86 with AVX-512 or AMX"
(vLLM 0.32, an AMD EPYC without AVX-512). Advice to set it is then advice the server will not
start with, so where vtop sees the server's process on a host with no accelerator, it reads
the CPU's flags (Linux's /proc/cpuinfo) and says whether FP8 KV is possible
(`fp8_kv_supported`); the rules recommend FP8 KV only where it is not known to be impossible.
A remote server's host is not seen: there nothing is said, and the rules assume FP8 KV works.
"""

from __future__ import annotations

import functools
import glob
import os

from vtop.model import Knob

FP8_KV_FLAGS = frozenset({"avx512f", "amx_tile", "amx_bf16", "amx_int8"})
"""Any of these in the CPU's flags: vLLM's CPU build keeps an FP8 KV cache."""
ACCELERATOR_NODES = ("/dev/nvidia[0-9]*", "/dev/kfd", "/dev/accel/*", "/dev/neuron*")
"""Device nodes of NVIDIA and AMD GPUs, TPUs and Gaudi, Neuron: a host with any of them may
serve from it, so its CPU says nothing about the server's KV cache."""


def cpu_flags(text: str) -> frozenset[str] | None:
    """The first processor's flags in /proc/cpuinfo's text; None where it lists none (an Arm
    CPU names them `Features`, whose FP8 support vLLM does not state)."""
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == "flags":
            return frozenset(value.split())
    return None


@functools.cache
def _this_cpu_flags() -> frozenset[str] | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return cpu_flags(f.read())
    except OSError:
        return None


def has_accelerator() -> bool:
    """Whether this host has a GPU or other accelerator device node (any vendor's)."""
    return any(glob.glob(pattern) for pattern in ACCELERATOR_NODES)


def fp8_kv_knob(flags: frozenset[str] | None) -> Knob | None:
    """`fp8_kv_supported` for a server on vLLM's CPU build with these CPU flags; None when
    they are unknown."""
    if flags is None:
        return None
    found = sorted(FP8_KV_FLAGS & flags)
    if found:
        return Knob("fp8_kv_supported", True, "process", f"this host's CPU has {found[0]}")
    return Knob(
        "fp8_kv_supported",
        False,
        "process",
        "this host's CPU has no AVX-512 or AMX, which vLLM's CPU build needs for an FP8 KV cache",
    )


def local_cpu_server_knob() -> Knob | None:
    """`fp8_kv_supported` for a vLLM server on this host when the host has no accelerator (so
    the server runs on vLLM's CPU build); None otherwise or where the CPU is not readable."""
    if os.name != "posix" or has_accelerator():
        return None
    return fp8_kv_knob(_this_cpu_flags())
