"""Fixtures that start the real vLLM CPU server (tools/vllm_cpu) for integration tests.

Why this shape:
- One server per configuration lives for the whole session and tests share it (servers.py:
  the configurations and the pool). Each test names its configuration
  (`@pytest.mark.vllm(CONFIG)`; the `server` fixture starts it), and
  `pytest_collection_modifyitems` runs them in `RUN_ORDER`, so each configuration starts once.
- Without `.venv-vllm` (tools/vllm_cpu/setup.sh not run) the tests skip locally with the
  command to run, but fail in CI (CI=true): CI runs setup.sh first, so a missing server
  there is a broken build, not a reason to go green without the real-server proof.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from tests.integration import kv_run
from tests.integration.kv_run import KvRun
from tests.integration.servers import ENGINE_KV, RUN_ORDER, ServerConfig, ServerPool
from tools.vllm_cpu.server import VllmServer, missing_setup


def _order_key(item: pytest.Item) -> tuple[int, int]:
    mark = item.get_closest_marker("vllm")
    assert mark is not None
    config: ServerConfig = mark.args[0]
    then: ServerConfig | None = mark.kwargs.get("then")
    at = RUN_ORDER.index(config)
    if then is not None and RUN_ORDER[at + 1 : at + 2] != (then,):
        raise pytest.UsageError(f"{item.nodeid}: then= must name the configuration after its own")
    return at, then is not None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The real-server tests, wherever they were collected, in `RUN_ORDER` (stable within a
    configuration); every other test keeps its place."""
    slots = [i for i, item in enumerate(items) if item.get_closest_marker("vllm")]
    ordered = sorted((items[i] for i in slots), key=_order_key)
    for i, item in zip(slots, ordered, strict=True):
        items[i] = item


def require_real_vllm() -> None:
    """Skip (locally) or fail (CI=true) when the real server cannot be started here."""
    why = missing_setup()
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the real-vLLM integration tests, but {why}", pytrace=False)
    pytest.skip(f"real vLLM CPU server not set up ({why})")


@pytest.fixture(scope="session")
def vllm_pool() -> Iterator[ServerPool]:
    require_real_vllm()
    pool = ServerPool()
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def server(request: pytest.FixtureRequest, vllm_pool: ServerPool) -> VllmServer:
    """The running server of the test's `@pytest.mark.vllm(CONFIG)` (shared; use deltas)."""
    mark = request.node.get_closest_marker("vllm")
    if mark is None:
        raise pytest.UsageError(f"{request.node.nodeid}: `server` needs @pytest.mark.vllm(CONFIG)")
    return vllm_pool.get(mark.args[0])


@pytest.fixture(scope="session")
def kv_exhausted_run(vllm_pool: ServerPool) -> KvRun:
    """The engine-bound server loaded past its KV pool once, watched raw and by vtop (its tests
    are marked `vllm(ENGINE_KV)`, so they run while that server is up)."""
    server = vllm_pool.get(ENGINE_KV)
    return asyncio.run(kv_run.run(server.url))
