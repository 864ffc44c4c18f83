"""Which GPUs a server has, and where each reading comes from: one answer for every view.

Two readers know a GPU: this host's NVML, and the dcgm-exporter series (`DCGM_FI_DEV_*`) a
server's /metrics may carry (a sidecar, a merged page, the simulator). The GPU panel, `--once`
and `--report` all ask `shown` (the store writes NVML's readings into the same series and
applies the same rule to them), so a GPU that one of them lists the others list too, with the
same source:

- a page's GPUs are the server's, even where this host has no NVIDIA driver;
- on a local endpoint NVML reads the same cards directly and replaces the page's reading of
  the same index (one GPU, one source);
- with no page GPUs at all, the answer is NVML's, unchanged (its GPUs, or why there are none).

Endpoints are taken in order and the first reading of an index wins: a fleet whose pages
number their GPUs alike shows the first endpoint's (GPU indices are what the panel and the
report key on).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vtop.model import GpuReading, GpuStatus, Scrape

NVML = "nvml"
PAGE = "page"

NVML_FIELDS = (
    ("gpu_util", "util_pct"),
    ("gpu_mem_used", "mem_used_bytes"),
    ("gpu_mem_total", "mem_total_bytes"),
    ("gpu_power", "power_w"),
    ("gpu_power_limit", "power_limit_w"),
    ("gpu_temp", "temp_c"),
    ("gpu_sm_clock", "sm_clock_mhz"),
)
"""Store signal -> `GpuReading` field, for the readings NVML gives."""

SIGNALS = frozenset(signal for signal, _ in NVML_FIELDS) | {"gpu_mem_free"}
"""Every per-GPU signal a page or NVML fills."""
PAGE_GPU_NAME = "dcgm.modelName."
"""`Scrape.info` key prefix (then the `gpu` index) under which a page names its cards: the
dcgm-exporter series' `modelName` label, kept with the scrape (and in a trace) so that every
reader of the page, the twin's fit among them, knows an RTX 4090 from a CPU."""


def page_names(info: Mapping[str, str]) -> list[str]:
    """The card names a page's info (`Scrape.info`, `Store.info`) carries, by GPU index."""
    named = [
        (k.removeprefix(PAGE_GPU_NAME), v) for k, v in info.items() if k.startswith(PAGE_GPU_NAME)
    ]
    return [name for _, name in sorted((int(i), n) for i, n in named if i.isdigit())]


def from_page(scrape: Scrape) -> tuple[GpuReading, ...]:
    """The GPUs a scrape's dcgm-exporter series describe, by index (none on a failed poll).

    dcgm-exporter gives used and free memory; their sum is the card's total. A `gpu` label
    that is not a number names no index the panel or the report can key on, and is skipped.
    """
    by_gpu: dict[int, dict[str, float]] = {}
    for k, v in scrape.scalars.items():
        if k.signal not in SIGNALS or not k.label.isdigit():
            continue
        by_gpu.setdefault(int(k.label), {})[k.signal] = v
    out = []
    for index, vals in sorted(by_gpu.items()):
        used, free = vals.get("gpu_mem_used"), vals.get("gpu_mem_free")
        out.append(
            GpuReading(
                index=index,
                name=scrape.info.get(PAGE_GPU_NAME + str(index), ""),
                util_pct=vals.get("gpu_util"),
                mem_used_bytes=None if used is None else int(used),
                mem_total_bytes=None if used is None or free is None else int(used + free),
                power_w=vals.get("gpu_power"),
                temp_c=vals.get("gpu_temp"),
                sm_clock_mhz=vals.get("gpu_sm_clock"),
                source=PAGE,
            )
        )
    return tuple(out)


def shown(nvml: GpuStatus, scrapes: Iterable[tuple[Scrape, bool]]) -> GpuStatus:
    """The GPUs to show: `nvml` (this host's reading) and the pages of `scrapes`, each with
    whether its endpoint is on this host (see the module docstring for the rule)."""
    pages = [(from_page(s), local) for s, local in scrapes]
    if not any(readings for readings, _ in pages):
        return nvml
    any_local = any(local for _, local in pages)
    out: list[GpuReading] = list(nvml.gpus) if any_local else []
    taken = {g.index for g in out}
    for readings, _ in pages:
        for g in readings:
            if g.index not in taken:
                taken.add(g.index)
                out.append(g)
    return GpuStatus(gpus=tuple(sorted(out, key=lambda g: g.index)))
