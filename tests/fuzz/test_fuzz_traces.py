"""Traces mutated at every level reach the reader, the report and the command line: never a
traceback, a hang, a memory blow-up or an exit code outside 0-3.

A seeded mutator starts from the traces vtop ships and the real-server fixtures. Flipping
bytes of a file mostly meets a CRC, so most mutants are made below it: a record's payload
changed and its CRC recomputed, a header or an index rewritten with hostile JSON (NaN, 1e308,
wrong types, deep nesting), and, deepest, a keyframe segment inflated, one of its poll bodies
mutated (bytes flipped, cut, repeated, huge varints planted, another poll's body swapped in)
and deflated again, so the decoder itself sees the damage. Each mutant is opened, checked,
totalled and read (light and full frames); some are reported on (`replay_document`) and a few
go through `vtop trace info` and `vtop --replay F --report` in a child process.

Bounded to well under a minute: `VTOP_FUZZ_SCALE=10` runs ten times as many mutants, and
`VTOP_FUZZ_SEED` another seed, for a longer hunt.
"""

from __future__ import annotations

import json
import os
import random
import resource
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from vtop.trace import TraceError, TraceReader, wire

ROOT = Path(__file__).resolve().parents[2]
SEEDS = sorted(ROOT.glob("tests/fixtures/real-regimes/*.vtrace"))
"""Real-server recordings of 50 to 120 polls, one or two keyframes each: small enough that a
mutant reads in milliseconds (the shipped 900-poll traces are the same format, ten times the
reading)."""
SCALE = float(os.environ.get("VTOP_FUZZ_SCALE", "1"))
SEED = int(os.environ.get("VTOP_FUZZ_SEED", "26"))
CASE_S = 20.0
"""No mutant may take longer than this to open and read (a decoded poll costs microseconds;
a hang or a quadratic path costs minutes)."""
PEAK_RSS = 1 << 30
"""Nor grow the process past this (the reader's limits bound a poll to 32 MiB decompressed;
the test's own process holds about 100 MiB)."""


@dataclass(frozen=True)
class Rec:
    kind: int
    start: int
    end: int


def records(data: bytes) -> list[Rec]:
    """The sound records of a trace, in order (after the preamble)."""
    out, pos = [], wire.PREAMBLE.size
    while pos + wire.RECORD.size <= len(data):
        kind, length, _ = wire.RECORD.unpack_from(data, pos)
        end = pos + wire.RECORD.size + length
        if end > len(data):
            break
        out.append(Rec(kind, pos, end))
        pos = end
    return out


def payload(data: bytes, rec: Rec) -> bytes:
    return data[rec.start + wire.RECORD.size : rec.end]


def replace(data: bytes, rec: Rec, kind: int, new: bytes) -> bytes:
    """`data` with `rec` replaced by a sound record (fresh CRC) of `new`."""
    return data[: rec.start] + wire.frame_record(kind, new) + data[rec.end :]


# -- mutators -----------------------------------------------------------------------------------

HOSTILE_JSON = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e308",
    "-1e308",
    "1e20",
    "-1",
    "0",
    "true",
    "null",
    '"x"',
    "[]",
    "{}",
    "[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]",
    "9" * 400,
    '"\\u001b[2J"',
    "[" * 5000 + "]" * 5000,
    "4294967296",
    "1.5",
]
HEADER_KEYS = ["format", "vtop", "created", "start_t", "sources", "interval_s", "endpoints", "gpus"]
INDEX_KEYS = ["polls", "samples", "t_first", "t_last"]


def flip_bytes(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        out[rng.randrange(len(out))] ^= rng.randint(1, 255)
    return bytes(out)


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def splice(rng: random.Random, data: bytes) -> bytes:
    other = rng.choice(SEEDS).read_bytes()
    a, b = rng.randrange(len(data)), rng.randrange(len(other))
    return data[:a] + other[b:]


def payload_bytes(rng: random.Random, data: bytes) -> bytes:
    """A record's payload changed under a fresh CRC: the reader cannot tell it by framing."""
    recs = records(data)
    rec = rng.choice(recs)
    body = bytearray(payload(data, rec))
    if body:
        for _ in range(rng.randint(1, 4)):
            body[rng.randrange(len(body))] = rng.randrange(256)
    return replace(data, rec, rec.kind, bytes(body))


def header_json(rng: random.Random, data: bytes) -> bytes:
    rec = records(data)[0]
    doc = json.loads(payload(data, rec))
    if rng.random() < 0.15:
        text = rng.choice(HOSTILE_JSON)
    else:
        for _ in range(rng.randint(1, 3)):
            doc[rng.choice(HEADER_KEYS)] = json.loads(rng.choice(HOSTILE_JSON[:-3]))
        text = json.dumps(doc)
    return replace(data, rec, wire.HEADER, text.encode())


def index_json(rng: random.Random, data: bytes) -> bytes:
    recs = [r for r in records(data) if r.kind == wire.INDEX]
    if not recs:
        return payload_bytes(rng, data)
    rec = recs[-1]
    body = payload(data, rec)
    (n,) = struct.unpack_from("<I", body)
    head = bytearray(body[: 4 + n * wire.INDEX_ENTRY.size])
    doc = json.loads(body[len(head) :])
    if rng.random() < 0.3 and n:  # an entry: time, offset or poll number
        i = rng.randrange(n)
        entry = list(wire.INDEX_ENTRY.unpack_from(head, 4 + i * wire.INDEX_ENTRY.size))
        j = rng.randrange(3)
        entry[j] = rng.choice([0, 1, 2**31, 2**62, len(data), -(2**62)])
        if j:
            entry[j] = abs(entry[j])
        wire.INDEX_ENTRY.pack_into(head, 4 + i * wire.INDEX_ENTRY.size, *entry)
    else:
        for _ in range(rng.randint(1, 2)):
            doc[rng.choice(INDEX_KEYS)] = json.loads(rng.choice(HOSTILE_JSON[:-3]))
    return replace(data, rec, wire.INDEX, bytes(head) + json.dumps(doc).encode())


def _segment(data: bytes, rng: random.Random) -> tuple[list[Rec], list[bytes]]:
    """A keyframe and its deltas, and their poll bodies inflated."""
    recs = records(data)
    keys = [i for i, r in enumerate(recs) if r.kind == wire.KEYFRAME]
    k = rng.choice(keys)
    seg = [recs[k]]
    for r in recs[k + 1 :]:
        if r.kind != wire.DELTA:
            break
        seg.append(r)
    seg = seg[: rng.randint(1, min(len(seg), 60))]
    zd = zlib.decompressobj(-15)
    bodies = []
    for i, r in enumerate(seg):
        raw = payload(data, r)[wire.KEYFRAME_HEAD.size :] if i == 0 else payload(data, r)
        bodies.append(zd.decompress(raw + wire.SYNC_TAIL))
    return seg, bodies


def _big_varint(rng: random.Random) -> bytes:
    return bytes([0xFF] * rng.randint(1, 9) + [rng.randint(1, 0x7F)])


def body_ops(rng: random.Random, data: bytes) -> bytes:
    """One to three poll bodies of a segment mutated, the segment deflated again: valid
    records and streams around bodies that say what the encoder never would."""
    seg, bodies = _segment(data, rng)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(bodies))
        b = bytearray(bodies[i])
        how = rng.randrange(6)
        a = rng.randrange(len(b) + 1)
        z = min(len(b), a + rng.randint(1, 64))
        if how == 0 and b:
            for _ in range(rng.randint(1, 6)):
                b[rng.randrange(len(b))] = rng.randrange(256)
        elif how == 1:
            del b[a:z]
        elif how == 2:
            b[a:a] = b[a:z] * rng.randint(2, 50)  # an op repeated
        elif how == 3:
            b[a:a] = _big_varint(rng)
        elif how == 4:
            b = bytearray(rng.choice(bodies))  # another poll's body
        else:
            b = b[:a]
        bodies[i] = bytes(b)
    comp = zlib.compressobj(6, zlib.DEFLATED, -15, 9)
    out = bytearray(data[: seg[0].start])
    for i, (r, body) in enumerate(zip(seg, bodies, strict=True)):
        deflated = comp.compress(body) + comp.flush(zlib.Z_SYNC_FLUSH)
        deflated = deflated[: -len(wire.SYNC_TAIL)]
        if i == 0:
            head = payload(data, r)[: wire.KEYFRAME_HEAD.size]
            out += wire.frame_record(wire.KEYFRAME, head + deflated)
        else:
            out += wire.frame_record(wire.DELTA, deflated)
    rest = data[seg[-1].end :]
    if rng.random() < 0.5:  # the footer's offsets are stale now: keep it, or drop it
        rest = b"".join(
            data[r.start : r.end]
            for r in records(data)
            if r.start >= seg[-1].end and r.kind in (wire.KEYFRAME, wire.DELTA)
        )
    return bytes(out) + rest


MUTATORS: list[tuple[Callable[[random.Random, bytes], bytes], int]] = [
    (flip_bytes, 1),
    (truncate, 1),
    (splice, 1),
    (payload_bytes, 2),
    (header_json, 2),
    (index_json, 2),
    (body_ops, 6),
]


def mutants(n: int, seed: int) -> Iterator[tuple[str, bytes]]:
    rng = random.Random(seed)
    funcs = [f for f, weight in MUTATORS for _ in range(weight)]
    originals = {p: p.read_bytes() for p in SEEDS}
    for i in range(n):
        source = rng.choice(SEEDS)
        data = originals[source]
        steps = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            f = rng.choice(funcs)
            try:
                data = f(rng, data)
            except (
                ValueError,
                IndexError,
                KeyError,
                TypeError,
                RecursionError,
                struct.error,
                zlib.error,
            ):
                continue  # an earlier step left nothing this one can parse: it changes nothing
            steps.append(f.__name__)
        yield f"#{i} {source.name} {'+'.join(steps)}", data


# -- the checks ---------------------------------------------------------------------------------


def read_all(path: Path) -> list[str]:
    """Everything a user can ask of a trace; returns the warnings (at most one)."""
    warnings: list[str] = []
    with TraceReader(path, warn=warnings.append) as reader:
        reader.check()
        reader.stats()
        _ = reader.start, reader.end
        for i, poll in enumerate(reader.polls()):
            poll.frame() if i % 7 == 0 else poll.frame(frozenset({"running", "waiting"}))
        list(reader.frames(reader.start, reader.end))
    return warnings


def test_mutated_traces_never_escape_the_reader(tmp_path: Path) -> None:
    from vtop.report.run import replay_document

    count = int(250 * SCALE)
    refused = warned = 0
    for i, (name, data) in enumerate(mutants(count, SEED)):
        path = tmp_path / "m.vtrace"
        path.write_bytes(data)
        started = time.monotonic()
        try:
            warnings = read_all(path)
            if i % 10 == 0:  # the report: one more reader, one more warning at most
                said: list[str] = []
                replay_document(str(path), warn=said.append, max_evaluations=20)
                assert len(said) <= 1, f"{name}: {said}"
        except TraceError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 600, name
            refused += 1
            continue
        finally:
            took = time.monotonic() - started
            assert took < CASE_S, f"{name}: {took:.1f} s"
        assert len(warnings) <= 1 and all("\n" not in w for w in warnings), f"{name}: {warnings}"
        warned += bool(warnings)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert rss < PEAK_RSS, f"the process peaked at {rss >> 20} MiB"
    # the mutants reach both outcomes: refused outright, and read with a warning
    assert refused > count // 20 and warned > count // 10, (refused, warned)


def vtop_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
        env={**os.environ, "VTOP_DEBUG": ""},
    )


@pytest.mark.timeout(600)
def test_mutated_traces_through_the_command_line_exit_0_to_3_in_lines(tmp_path: Path) -> None:
    for name, data in mutants(int(4 * SCALE), SEED + 1):
        path = tmp_path / "m.vtrace"
        path.write_bytes(data)
        for args in (("trace", "info", str(path)), ("--replay", str(path), "--report")):
            result = vtop_cli(*args)
            assert result.returncode in (0, 1, 2, 3), f"{name} {args}: {result.stderr}"
            assert "Traceback" not in result.stderr, f"{name} {args}: {result.stderr}"
            for line in result.stderr.splitlines():
                assert line.startswith("vtop: "), f"{name} {args}: {line}"
