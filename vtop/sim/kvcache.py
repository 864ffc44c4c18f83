"""The KV block pool and its prefix cache, counted in blocks rather than block objects.

vLLM V1's `BlockPool` keeps every block as an object in a free queue; a block freed by a
finished or preempted request keeps its hash and stays reusable until the LRU head of the free
queue is evicted for a new allocation (`vllm/v1/core/block_pool.py`). What the scheduler and the
metrics depend on is only how many blocks are held, how many are free but still cached, and how
long a prefix a new request can reuse, so the twin counts blocks and keeps one entry per reusable
prefix instead of one object per block:

- `used`: blocks held by running requests (a shared prefix counted once, as ref-counted blocks
  are). `kv_cache_usage_perc` is `used / total`, exactly `1 - free / total` in vLLM, because
  cached-but-unreferenced blocks sit in the free queue.
- an *entry* is a run of cached blocks: the shared prefix of a workload's prefix group, or the
  blocks a preempted request left behind (V1 recompute with prefix caching finds them again if
  they were not evicted meanwhile). Entries with no referencing request are evictable, in LRU
  order of release; eviction takes blocks off the tail of the oldest entry first, as vLLM frees
  a request's blocks in reverse order so its tail goes first.

Invariant: `used + evictable <= total`.
"""

from __future__ import annotations

from collections import OrderedDict


class Entry:
    """A run of cached blocks starting at block `start` of the requests that can reuse it."""

    __slots__ = ("blocks", "refs", "start")

    def __init__(self, blocks: int, refs: int, start: int = 0) -> None:
        self.blocks = blocks
        self.refs = refs
        self.start = start


class KVPool:
    """Block counts and prefix-cache entries. Callers check `free` before allocating."""

    __slots__ = ("_lru", "entries", "evictable", "total", "used")

    def __init__(self, total_blocks: int) -> None:
        if total_blocks <= 0:
            raise ValueError(f"KV pool needs at least one block, got {total_blocks}")
        self.total = total_blocks
        self.used = 0
        self.evictable = 0
        self.entries: dict[int, Entry] = {}
        self._lru: OrderedDict[int, None] = OrderedDict()

    @property
    def free(self) -> int:
        """Blocks an allocation may take: truly free plus cached-but-evictable ones."""
        return self.total - self.used

    @property
    def usage(self) -> float:
        return self.used / self.total

    def allocate(self, n: int) -> None:
        """Take `n` blocks (caller checked `n <= free`), evicting cached ones if needed."""
        self.used += n
        over = self.used + self.evictable - self.total
        if over > 0:
            self._evict(over)

    def release(self, n: int) -> None:
        self.used -= n

    def lookup(self, key: int) -> Entry | None:
        return self.entries.get(key)

    def acquire(self, key: int, blocks: int) -> int:
        """Reference entry `key` for a request that reuses its first `blocks` blocks.

        An unreferenced entry leaves the evictable set (its blocks become used again); blocks
        beyond what the request reuses are dropped. Returns the blocks the request now shares.
        """
        entry = self.entries[key]
        if entry.refs == 0:
            del self._lru[key]
            self.evictable -= entry.blocks
            entry.blocks = min(entry.blocks, blocks)
            self.used += entry.blocks
        entry.refs += 1
        return entry.blocks

    def evictable_blocks_of(self, key: int) -> int:
        """Blocks that referencing `key` would move out of the free count (vLLM counts them)."""
        entry = self.entries.get(key)
        if entry is None or entry.refs > 0:
            return 0
        return entry.blocks

    def unref(self, key: int) -> None:
        """A request stops referencing `key`; the last one makes it evictable (LRU tail)."""
        entry = self.entries[key]
        entry.refs -= 1
        if entry.refs == 0:
            self.used -= entry.blocks
            self.evictable += entry.blocks
            self._lru[key] = None

    def publish(self, key: int, blocks: int) -> bool:
        """Turn `blocks` blocks a request computed privately into the shared entry `key`.

        Refused (False) while another request holds a live entry for `key`: the request then
        keeps its private copy, as concurrent first requests of a prefix each compute their own.
        The caller moves the blocks from the request's private count to its shared count.
        """
        entry = self.entries.get(key)
        if entry is not None:
            if entry.refs > 0:
                return False
            self.discard(key)
        self.entries[key] = Entry(blocks, 1)
        return True

    def stash(self, key: int, blocks: int, start: int) -> None:
        """Keep `blocks` just-released blocks cached under `key` (a preempted request's own).

        The caller has already released them from `used`.
        """
        if blocks <= 0:
            return
        if key in self.entries:
            self.discard(key)
        self.entries[key] = Entry(blocks, 0, start)
        self.evictable += blocks
        self._lru[key] = None
        over = self.used + self.evictable - self.total
        if over > 0:
            self._evict(over)

    def take(self, key: int) -> int:
        """Remove an unreferenced entry and hand its blocks to one request as private blocks."""
        entry = self.entries.pop(key)
        del self._lru[key]
        self.evictable -= entry.blocks
        self.used += entry.blocks
        return entry.blocks

    def discard(self, key: int) -> None:
        """Forget an unreferenced entry; its blocks become plain free blocks."""
        entry = self.entries.pop(key)
        if entry.refs:
            raise ValueError(f"entry {key} is still referenced")
        del self._lru[key]
        self.evictable -= entry.blocks

    def _evict(self, n: int) -> None:
        lru = self._lru
        entries = self.entries
        while n > 0:
            if not lru:  # nothing cached is left to evict: the count had drifted from the entries
                self.evictable = 0
                return
            key = next(iter(lru))
            entry = entries[key]
            cut = entry.blocks if entry.blocks < n else n
            entry.blocks -= cut
            self.evictable -= cut
            n -= cut
            if entry.blocks == 0:
                del lru[key]
                del entries[key]
