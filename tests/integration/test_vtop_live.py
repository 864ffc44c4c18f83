"""vtop's whole live data path against a real vLLM server whose KV cache runs out.

The same run a user would see: LiveSource polls the real server once a second through the
scraper, parser, catalog and store while 40 clients exhaust its 24-block KV pool; discovery
finds the server's process on this host and reads `--max-num-seqs` from its command line.
"""

from __future__ import annotations

import pytest

from tests.integration.kv_run import KvRun

pytestmark = pytest.mark.integration


def test_vtop_sees_kv_exhaustion_and_counts_every_token(kv_exhausted_run: KvRun) -> None:
    view = kv_exhausted_run.view
    assert view is not None
    store = view.store
    assert store.failed_polls == 0
    assert (store.max("waiting") or 0) > 0
    assert (store.max("kv_usage") or 0) >= 0.9
    assert (store.max("running") or 0) <= 16
    assert (store.increase("preemptions", 10_000) or 0) > 0
    generated = [v for v in store.values("generation_tokens") if v is not None]
    assert generated[-1] - generated[0] == kv_exhausted_run.load.completion_tokens
    knob = view.knobs["max_num_seqs"]
    assert (knob.value, knob.provenance) == (16, "process")
    assert view.knobs["kv_capacity_tokens"].value == 3072
    assert view.server.version == "0.32.0"
