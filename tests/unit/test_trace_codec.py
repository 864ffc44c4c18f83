"""The trace codec: every part of a Frame survives the round trip, within the documented bound."""

from __future__ import annotations

import math
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.tracegen import busy_frames
from vtop.model import (
    EndpointInfo,
    Event,
    Frame,
    GpuReading,
    GpuStatus,
    Histogram,
    HostReading,
    Knob,
    Scrape,
    SeriesKey,
)
from vtop.trace import TraceReader, TraceWriter
from vtop.trace.codec import Encoder, fit_exp, quantize
from vtop.trace.decoder import Decoder

EP = "http://127.0.0.1:8000"
K = SeriesKey("running", "m", "0", "")


def roundtrip(frames: list[Frame], tmp_path: Path, **kw: int) -> list[Frame]:
    path = tmp_path / "t.vtrace"
    w = TraceWriter(path, **kw)
    w.write_header({"vtop": "test"})
    for f in frames:
        w.write(f)
    w.close()
    with TraceReader(path) as r:
        return list(r.frames())


def assert_same(a: Frame, b: Frame, tol: float = 5e-7) -> None:
    assert b.t == pytest.approx(a.t, abs=1e-6)
    assert [s.endpoint for s in a.scrapes] == [s.endpoint for s in b.scrapes]
    for sa, sb in zip(a.scrapes, b.scrapes, strict=True):
        assert sb.t == pytest.approx(sa.t, abs=1e-6)
        assert sa.error == sb.error and sa.has_vllm_series == sb.has_vllm_series
        assert dict(sa.info) == dict(sb.info)
        assert sa.size_bytes == sb.size_bytes
        assert (sa.latency_s is None) == (sb.latency_s is None)
        if sa.latency_s is not None:
            assert sb.latency_s == pytest.approx(sa.latency_s, abs=tol)
        assert sa.scalars.keys() == sb.scalars.keys()
        for k, v in sa.scalars.items():
            assert sb.scalars[k] == pytest.approx(v, abs=tol, rel=1e-12), k
        assert sa.histograms.keys() == sb.histograms.keys()
        for k, h in sa.histograms.items():
            g = sb.histograms[k]
            assert (g.bounds, g.buckets, g.count) == (h.bounds, h.buckets, h.count), k
            if math.isnan(h.sum):
                assert math.isnan(g.sum)
            else:
                assert g.sum == pytest.approx(h.sum, abs=tol)
        assert sa.knobs == sb.knobs and sa.server == sb.server
    assert a.gpu == b.gpu
    assert a.host == b.host
    assert a.events == b.events


def test_busy_engine_round_trips_exactly_where_values_are_exact(tmp_path: Path) -> None:
    frames = list(busy_frames(700))
    back = roundtrip(frames, tmp_path, keyframe_every=250)
    assert len(back) == len(frames)
    for a, b in zip(frames, back, strict=True):
        assert_same(a, b)
    # knobs and server travel only on the poll that announced them
    assert back[0].scrapes[0].knobs is not None and back[0].scrapes[0].server is not None
    assert all(f.scrapes[0].knobs is None for f in back[1:])


def test_failures_presence_events_and_shape_changes(tmp_path: Path) -> None:
    h1 = Histogram((0.1, 1.0), (1.0, 3.0), 4.0, 2.5)
    h2 = Histogram((0.1, 0.5, 1.0), (1.0, 2.0, 3.0), 5.0, math.nan)
    gpu = GpuStatus((GpuReading(0, "GPU A", "GPU-1", util_pct=50.0, power_w=None, temp_c=61.0),))
    knobs = {"max_num_seqs": Knob("max_num_seqs", 256, "default", "vLLM default")}
    frames = [
        Frame(
            10.0,
            (
                Scrape(
                    EP,
                    10.0,
                    0.01,
                    100,
                    scalars={K: 3.0},
                    histograms={K: h1},
                    info={"block_size": "16"},
                    knobs=knobs,
                    server=EndpointInfo("0.32.0", ("m",), 4096),
                ),
            ),
            gpu,
            HostReading(1.5),
        ),
        Frame(
            11.0,
            (Scrape(EP, 11.0, 0.8, error="cannot connect"),),
            GpuStatus(unavailable="NVML not found"),
            None,
            (Event(11.0, "disconnect", EP, "lost"),),
        ),
        Frame(
            12.5,
            (
                Scrape(
                    EP,
                    12.5,
                    0.01,
                    90,
                    scalars={K: -2.0, K._replace(label="x"): 1e15},
                    histograms={K: h2},
                ),
            ),
            gpu,
            HostReading(None, 10, 20),
        ),
        Frame(
            13.0,
            (
                Scrape(EP, 13.0, 0.01, 90, scalars={K: 7.25}),
                Scrape("http://b:1", 12.9, 0.02, 1, scalars={K: 1.0}),
            ),
            gpu,
            None,
        ),
    ]
    back = roundtrip(frames, tmp_path)
    for a, b in zip(frames, back, strict=True):
        assert_same(a, b)
    assert back[1].scrapes[0].scalars == {}


def test_large_jumps_move_series_to_wider_lanes(tmp_path: Path) -> None:
    values = [0.0, 1.0, 300.0, 70000.0, 5e9, 4e18, 3.0, -9e17]
    frames = [
        Frame(float(i), (Scrape(EP, float(i), scalars={K: v}),)) for i, v in enumerate(values)
    ]
    back = roundtrip(frames, tmp_path)
    got = [f.scrapes[0].scalars[K] for f in back]
    assert got[:5] == values[:5] and got[6] == 3.0
    assert got[5] == pytest.approx(4e18, rel=1e-15)
    assert got[7] == pytest.approx(-9e17, rel=1e-15)


def test_exponent_grows_when_a_value_needs_more_places(tmp_path: Path) -> None:
    values = [1.0, 0.5, 0.25, 0.123, 0.4237288135593, 2.0]
    frames = [
        Frame(float(i), (Scrape(EP, float(i), scalars={K: v}),)) for i, v in enumerate(values)
    ]
    got = [f.scrapes[0].scalars[K] for f in roundtrip(frames, tmp_path)]
    assert got[:4] == values[:4] and got[5] == 2.0
    assert abs(got[4] - values[4]) <= 5e-7  # the documented bound for 6 places


def test_fit_exp_is_the_fewest_places_that_are_exact() -> None:
    assert fit_exp([3.0], 0, 6) == 0
    assert fit_exp([0.42], 0, 6) == 2
    assert fit_exp([1712345678.12], 0, 6) == 2
    assert fit_exp([1 / 3], 0, 6) == 6
    assert fit_exp([1e30], 0, 6) < 0  # huge values give up places to stay under 2^62
    assert quantize(0.42, 2) == 42


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["running", "waiting", "kv_usage", "preemptions"]),
            st.floats(-1e12, 1e12, allow_nan=False),
            max_size=4,
        ),
        min_size=1,
        max_size=30,
    )
)
def test_any_scalar_sequence_round_trips_within_the_bound(polls: list[dict[str, float]]) -> None:
    enc, dec = Encoder(), Decoder()
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    unz = zlib.decompressobj(-15)
    for i, values in enumerate(polls):
        scalars = {SeriesKey(n, "m", "0", ""): v for n, v in values.items()}
        frame = Frame(100.0 + i, (Scrape(EP, 100.0 + i, scalars=scalars),))
        body = enc.encode(frame).body
        data = comp.compress(body) + comp.flush(zlib.Z_SYNC_FLUSH)
        dec.decode(unz.decompress(data))
        got = dec.frame().scrapes[0].scalars
        assert got.keys() == scalars.keys()
        for k, v in scalars.items():
            assert abs(got[k] - v) <= max(5e-7, abs(v) * 1e-15)


def test_control_characters_from_a_trace_never_reach_the_screen(tmp_path: Path) -> None:
    evil = "\x1b]0;pwned\x07\x1b[31mred"
    k = SeriesKey("running", evil, "0", "")
    frames = [
        Frame(1.0, (Scrape(EP + evil, 1.0, scalars={k: 1.0}, error=evil, info={evil: evil}),))
    ]
    (back,) = roundtrip(frames, tmp_path)
    s = back.scrapes[0]
    texts = [s.endpoint, s.error or "", *s.info, *s.info.values(), *(x.model for x in s.scalars)]
    assert all(t.isprintable() for t in texts), texts
    assert all("pwned" in t or "red" in t for t in texts)


def test_light_and_full_frames_agree_whatever_the_reading_pattern(tmp_path: Path) -> None:
    """Slots a light frame reads are kept current; the rest wait and are added on demand."""
    import random

    from vtop.report.window import LIGHT

    frames = list(busy_frames(500, seed=4))
    path = tmp_path / "mix.vtrace"
    w = TraceWriter(path, keyframe_every=170)
    w.write_header({})
    for f in frames:
        w.write(f)
    w.close()
    rng = random.Random(0)
    with TraceReader(path) as r:
        for original, poll in zip(frames, r.polls(), strict=True):
            choice = rng.random()
            if choice < 0.1:
                assert_same(original, poll.frame())
            elif choice < 0.8:
                light = poll.frame(LIGHT).scrapes[0]
                want = {k: v for k, v in original.scrapes[0].scalars.items() if k.signal in LIGHT}
                assert light.scalars == pytest.approx(want, abs=5e-7)
                assert light.histograms == {}
