"""Trace files: permissions, the index, seeking, and damage (truncated, garbled, hostile, newer)."""

from __future__ import annotations

import os
import random
import stat
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tracegen import busy_frames
from vtop.model import Frame
from vtop.trace import TraceError, TraceReader, TraceWriteError, TraceWriter, wire
from vtop.trace.recorder import Recorder

ROOT = Path(__file__).resolve().parents[2]
FRAMES = list(busy_frames(400, seed=3))


def write(
    path: Path, frames: list[Frame] = FRAMES, *, close: bool = True, every: int = 100
) -> None:
    rec = Recorder(path, sources=["test"], interval_s=1.0, keyframe_every=every)
    for f in frames:
        rec.feed(f)
    if close:
        rec.close()
    else:
        rec._writer.abandon()


class Warnings(list[str]):
    def __call__(self, message: str) -> None:
        self.append(message)


def read(path: Path) -> tuple[list[Frame], Warnings]:
    warnings = Warnings()
    with TraceReader(path, warn=warnings) as r:
        return list(r.frames()), warnings


def test_created_owner_only_and_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "a.vtrace"
    old = os.umask(0)
    try:
        write(path, FRAMES[:3])
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    before = path.read_bytes()
    with pytest.raises(TraceWriteError, match="never overwrites"):
        TraceWriter(path)
    assert path.read_bytes() == before


def test_header_index_and_totals(tmp_path: Path) -> None:
    path = tmp_path / "a.vtrace"
    write(path)
    with TraceReader(path) as r:
        assert r.indexed and len(r.keyframes) == 4
        assert r.header.vtop and r.header.sources == ["test"]
        assert r.header.endpoints[0]["vllm_version"] == "0.32.0"
        assert r.header.endpoints[0]["knobs"]["max_num_seqs"][1] == "default"
        assert r.header.gpus == ["NVIDIA GeForce RTX 4090"]
        st_ = r.stats()
        assert st_.polls == 400 and st_.samples > 400 * 200
        assert r.start == pytest.approx(FRAMES[0].t, abs=1e-6)
        assert r.end == pytest.approx(FRAMES[-1].t, abs=1e-6)


def test_the_end_is_the_last_poll_as_decoded(tmp_path: Path) -> None:
    """A live clock has sub-microsecond digits; the file keeps microseconds. The end must be
    the last poll's decoded time, or a replay clamped to it never shows the last poll."""
    from dataclasses import replace

    path = tmp_path / "a.vtrace"
    write(path, [replace(f, t=f.t + 0.3e-6) for f in FRAMES[:150]])
    with TraceReader(path) as r:
        last = list(r.times())[-1]
        assert r.end == last
        assert [f.t for f in r.frames(last - 1.5, r.end)][-1] == last


def test_without_footer_the_index_is_rebuilt_identically(tmp_path: Path) -> None:
    a, b = tmp_path / "a.vtrace", tmp_path / "b.vtrace"
    write(a)
    write(b, close=False)
    with TraceReader(a) as ra, TraceReader(b) as rb:
        assert not rb.indexed and ra.indexed
        assert [k.t for k in ra.keyframes] == [k.t for k in rb.keyframes]
        assert rb.end == ra.end and rb.stats().polls == ra.stats().polls
        assert rb.stats().samples == ra.stats().samples
    assert [f.t for f in read(b)[0]] == [f.t for f in read(a)[0]]
    assert read(b)[1] == []


def test_seek_starts_at_the_first_poll_at_or_after_t_and_carries_knobs(tmp_path: Path) -> None:
    path = tmp_path / "a.vtrace"
    write(path)
    with TraceReader(path) as r:
        target = FRAMES[250].t - 0.5
        first = next(iter(r.frames(target)))
        assert first.t == pytest.approx(FRAMES[250].t, abs=1e-6)
        assert first.scrapes[0].knobs is not None  # announced at poll 0, carried to the seek
        assert first.scrapes[0].knobs == FRAMES[0].scrapes[0].knobs
        window = list(r.frames(FRAMES[10].t, FRAMES[20].t))
        assert len(window) == 11


@pytest.mark.parametrize("cut", [1, 5, 9, 60, 300, 2000])
def test_truncated_tail_reads_what_precedes_with_one_warning(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "a.vtrace"
    write(path, close=False)
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    frames, warnings = read(path)
    assert len(warnings) == 1 and "damaged or truncated" in warnings[0]
    assert 400 - cut // 100 - 1 <= len(frames) < 400  # records are ~130 bytes
    assert frames[-1].t == pytest.approx(FRAMES[len(frames) - 1].t, abs=1e-6)


def test_a_reader_without_a_callback_keeps_the_warning_and_prints_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Writing to stderr is the command line's job: a reader keeps what it would have said."""
    path = tmp_path / "a.vtrace"
    write(path, close=False)
    path.write_bytes(path.read_bytes()[:-60])
    with TraceReader(path) as r:
        assert len(list(r.frames())) < 400
        assert r.warning is not None and "damaged or truncated" in r.warning
    assert capsys.readouterr() == ("", "")


def test_garbled_tail_and_middle_are_skipped_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "a.vtrace"
    write(path)
    data = bytearray(path.read_bytes())
    with TraceReader(path) as r:
        middle = r.keyframes[1].offset + 500
    for i in range(middle, middle + 40):
        data[i] ^= 0x5A
    for i in range(len(data) - 3000, len(data) - 2900):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    frames, warnings = read(path)
    assert len(warnings) == 1
    times = [f.t for f in frames]
    assert times == sorted(times)
    assert 200 < len(frames) < 400  # the damaged stretch to the next keyframe is skipped
    assert frames[0].t == pytest.approx(FRAMES[0].t, abs=1e-6)
    assert any(abs(t - FRAMES[300].t) < 1e-6 for t in times)  # resumed at a later keyframe


def test_a_newer_format_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "a.vtrace"
    write(path, FRAMES[:5])
    data = bytearray(path.read_bytes())
    struct.pack_into("<H", data, 8, wire.FORMAT_VERSION + 1)
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError, match=r"newer than this vtop reads \(1\); upgrade vtop"):
        TraceReader(path)


@pytest.mark.parametrize(
    "content",
    [b"", b"hello", b"VTOPTRC\x1a\x01\x00\x00\x00", random.Random(7).randbytes(5000)],
    ids=["empty", "text", "header-only", "random-bytes"],
)
def test_not_a_trace_is_one_clear_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.vtrace"
    path.write_bytes(content)
    with pytest.raises(TraceError) as exc:
        TraceReader(path)
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)


def _record(kind: int, payload: bytes) -> bytes:
    return wire.frame_record(kind, payload)


def test_hostile_records_are_bounded_and_warned_once(tmp_path: Path) -> None:
    path = tmp_path / "a.vtrace"
    write(path, FRAMES[:20], close=False)
    good = path.read_bytes()
    bomb = zlib.compressobj(9, zlib.DEFLATED, -15)
    payload = bomb.compress(b"\x00" * (wire.MAX_BODY * 2)) + bomb.flush(zlib.Z_SYNC_FLUSH)
    head = wire.KEYFRAME_HEAD.pack(wire.KEYFRAME_SYNC, 2_000_000_000_000_000, 99)
    hostile = [
        _record(wire.KEYFRAME, head + payload[:-4]),  # decompression bomb, valid CRC
        struct.pack("<BII", wire.DELTA, 0xFFFFFFF0, 0),  # absurd length
        _record(wire.KEYFRAME, head + zlib.compress(b"\xff" * 64)[2:]),  # not deflate
    ]
    for rec in hostile:
        path.write_bytes(good + rec + good[-200:])
        frames, warnings = read(path)
        assert len(frames) == 20 and len(warnings) == 1


def _def_body(path_json: str, n_bounds: int) -> bytes:
    out = bytearray()
    wire.put_svarint(out, 1_000_000)
    out.append(3)  # OP_DEF
    wire.put_uvarint(out, 0)
    wire.put_str(out, path_json)
    out += bytes([1, 0])
    wire.put_svarint(out, 0)
    wire.put_uvarint(out, n_bounds)
    return bytes(out)


@pytest.mark.parametrize(
    "body",
    [
        _def_body('["h","e","ttft","","",""]', 10**9),  # bucket count over the limit
        _def_body('["h","e","ttft"' + ',"x"' * 3 + "]", 5),  # truncated after the count
        _def_body("[" * 100000 + "]" * 100000, 1),  # JSON nesting bomb
        _def_body('{"__class__": "os.system"}', 1),  # not a path
        b"\x00\x01" + b"\xff" * 20,  # varint longer than ten bytes
    ],
)
def test_hostile_bodies_never_allocate_or_execute(tmp_path: Path, body: bytes) -> None:
    path = tmp_path / "a.vtrace"
    write(path, FRAMES[:3], close=False)
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = comp.compress(body) + comp.flush(zlib.Z_SYNC_FLUSH)
    head = wire.KEYFRAME_HEAD.pack(wire.KEYFRAME_SYNC, 2_000_000_000_000_000, 9)
    with path.open("ab") as fh:
        fh.write(_record(wire.KEYFRAME, head + data[:-4]))
    frames, warnings = read(path)
    assert len(frames) == 3 and len(warnings) == 1 and "bad poll data" in warnings[0]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=8))
def test_random_corruption_never_escapes_the_reader(
    tmp_path: Path, flips: list[tuple[int, int]]
) -> None:
    path = tmp_path / "fuzz.vtrace"
    if not path.exists():
        write(path, FRAMES[:150], every=50)
    data = bytearray(path.read_bytes())
    for pos, mask in flips:
        data[pos % len(data)] ^= mask
    bad = tmp_path / f"bad{random.randrange(10**9)}.vtrace"
    bad.write_bytes(bytes(data))
    warnings = Warnings()
    try:
        with TraceReader(bad, warn=warnings) as r:
            frames = list(r.frames())
            list(r.frames(r.start))
    except TraceError:
        return  # the preamble or header was hit: refused in one line
    assert len(warnings) <= 1
    assert len(frames) <= 150
    bad.unlink()


def test_the_reader_cannot_run_code() -> None:
    sources = [*(ROOT / "vtop" / "trace").glob("*.py"), ROOT / "vtop" / "sources" / "replay.py"]
    banned = ("pickle", "marshal", "eval(", "exec(", "yaml", "shelve", "__import__", "importlib")
    for src in sources:
        text = src.read_text()
        for word in banned:
            assert word not in text, f"{src.name} mentions {word}"
