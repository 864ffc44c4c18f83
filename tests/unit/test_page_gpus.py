"""The GPUs a page names: dcgm-exporter's series carry the card's model, and every reader of
the page (the GPU panel, --once, the report, the twin's fit) gets the same name; what the twin
is fitted to (`Watched`) comes from the monitor, a trace or frames by one rule each."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from vtop.cli.whatif import watch_live
from vtop.model import Frame, GpuReading, GpuStatus, Knob, Scrape
from vtop.monitor import Monitor
from vtop.signals import gpus
from vtop.signals.extract import PageReader
from vtop.whatif.watched import from_frames, read_trace

ROOT = Path(__file__).resolve().parents[2]

# dcgm-exporter's own exposition (labels as it writes them), beside a vLLM config line.
PAGE = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-4090a1d7",pci_bus_id="00000000:01:00.0",device="nvidia0",modelName="NVIDIA GeForce RTX 4090",Hostname="box"} 74
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-a100b2c3",pci_bus_id="00000000:02:00.0",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",Hostname="box"} 12
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-4090a1d7",pci_bus_id="00000000:01:00.0",device="nvidia0",modelName="NVIDIA GeForce RTX 4090",Hostname="box"} 22000
vllm:cache_config_info{block_size="16",num_gpu_blocks="18194"} 1.0
"""


def test_a_page_names_its_cards_and_keeps_its_cache_config() -> None:
    scrape = PageReader().read(PAGE, endpoint="e", t=0.0)
    names = {g.index: g.name for g in gpus.from_page(scrape)}
    assert names == {0: "NVIDIA GeForce RTX 4090", 1: "NVIDIA A100-SXM4-80GB"}
    assert scrape.info["block_size"] == "16"  # the config is still read with the names beside


def test_whatif_fits_the_gpu_the_page_reports() -> None:
    # Issue 25: `vtop whatif --url` against `vtop sim` fitted the CPU build's prior beside
    # the RTX 4090 the page reports (the dashboard and --once read it).
    sim = subprocess.Popen(
        [sys.executable, "-m", "vtop", "sim", "--scenario", "healthy", "--port", "0",
         "--duration", "60"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert sim.stdout is not None
        url = sim.stdout.readline().split(" on ")[1].split()[0].removesuffix("/metrics")
        gpu = watch_live(url, 2.0, 0.5).gpu_name
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    assert gpu == "NVIDIA GeForce RTX 4090"


def test_the_twin_is_fitted_to_the_gpu_of_the_server_it_is_about() -> None:
    """`Monitor.watched`, which the report, the screens and `vtop whatif --url` fit from: this
    host's card (NVML) for a server that runs here, the page's for one that names its own,
    none for a remote server that names none (this host's card is not its)."""
    nvml = GpuStatus((GpuReading(0, "NVIDIA H100 80GB HBM3"),))
    local, named, silent = "http://127.0.0.1:8000", "http://10.0.0.7:8000", "http://10.0.0.8:8000"
    page = PageReader().read(PAGE, endpoint=named, t=0.0)
    monitor = Monitor()
    for t in (0.0, 1.0):
        scrapes = (Scrape(local, t), replace(page, t=t), Scrape(silent, t))
        monitor.feed(Frame(t, scrapes, gpu=nvml))
    assert (here := monitor.watched(local)) is not None and here.gpu_name == nvml.gpus[0].name
    assert (there := monitor.watched(named)) is not None
    assert there.gpu_name == "NVIDIA GeForce RTX 4090" and len(there.store) == 2
    assert (unknown := monitor.watched(silent)) is not None and unknown.gpu_name is None
    assert monitor.watched("http://never.polled:8000") is None


def test_a_trace_and_a_simulated_server_are_read_by_one_loop() -> None:
    """`from_frames`: the first endpoint's polls (another's are not mixed in), its last knobs
    and the last GPU a frame with one of its polls named; nothing polled is None; a trace with one poll is too
    few to fit a twin to."""
    knob = Knob("max_num_seqs", 16, "metrics")
    gpu = GpuStatus((GpuReading(0, "NVIDIA GeForce RTX 4090"),))
    frames = [
        Frame(0.0, ()),
        Frame(1.0, (Scrape("a", 1.0, knobs={"max_num_seqs": knob}), Scrape("b", 1.0)), gpu=gpu),
        Frame(2.0, (Scrape("b", 2.0),)),
        Frame(3.0, (Scrape("a", 3.0),), gpu=GpuStatus(unavailable="no driver")),
    ]
    watched = from_frames(frames)
    assert watched is not None and watched.store.endpoint == "a"
    assert list(watched.store.times()) == [1.0, 3.0]
    assert watched.knobs == {"max_num_seqs": knob} and watched.gpu_name == "NVIDIA GeForce RTX 4090"
    assert from_frames([Frame(0.0, ())]) is None
    shipped = read_trace(str(ROOT / "traces" / "memory-ceiling.vtrace"))
    assert len(shipped.store) > 2 and shipped.knobs["max_num_seqs"].value == 256
