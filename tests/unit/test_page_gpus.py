"""The GPUs a page names: dcgm-exporter's series carry the card's model, and every reader of
the page (the GPU panel, --once, the report, the twin's fit) gets the same name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from vtop.cli.whatif import watch_live
from vtop.signals import gpus
from vtop.signals.extract import PageReader

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
        _, _, gpu = watch_live(url, 2.0, 0.5)
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    assert gpu == "NVIDIA GeForce RTX 4090"
