"""Prometheus as a source: every vLLM instance a Prometheus scrapes, read through its HTTP API.

Three parts, each small enough to read whole: `client` makes the two API calls and words
their failures, `series` turns what they answer into targets and Scrapes (no I/O, no clock),
and `source` is the `FrameSource` that decides when to ask and backfills history. The names
the rest of vtop uses are re-exported here, so callers import the package and not its layout.
"""

from __future__ import annotations

from vtop.sources.prometheus.client import PrometheusClient, PrometheusError
from vtop.sources.prometheus.series import head
from vtop.sources.prometheus.source import (
    DEFAULT_BACKFILL_S,
    GPU_UNAVAILABLE,
    MAX_POINTS,
    MIN_STEP_S,
    PrometheusSource,
    backfill_step,
)

__all__ = [
    "DEFAULT_BACKFILL_S",
    "GPU_UNAVAILABLE",
    "MAX_POINTS",
    "MIN_STEP_S",
    "PrometheusClient",
    "PrometheusError",
    "PrometheusSource",
    "backfill_step",
    "head",
]
