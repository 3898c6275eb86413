"""The process's buffer pool, seen from Python: its counters, its limit on idle memory, and a
test hook that fails an allocation.

Compiled modules allocate the results a step hands to the caller (and the buffers of dynamic
size that no memory plan covers) from one pool per process (``flowc_pool`` in
``runtime/csrc/flowc_rt.h``); a fetched numpy array owns its block and gives it back when it
is collected, so the next step reuses pages that are already mapped instead of faulting in a
fresh allocation. A block is never reused while an array (or a view of it) still holds it.
"""
from __future__ import annotations

from dataclasses import dataclass

from runtime.module import PROCESS_POOL, _pool_libs


@dataclass(frozen=True)
class PoolStats:
    live_blocks: int        # handed out and not yet given back (fetched arrays alive, steps running)
    cached_blocks: int      # idle, ready for reuse
    cached_bytes: int
    hits: int               # allocations served by an idle block
    misses: int             # allocations of a cached size class that found none idle
    max_cached_bytes: int


def pool_stats() -> PoolStats:
    """A snapshot of the pool's counters."""
    p = PROCESS_POOL
    return PoolStats(int(p.live_blocks), int(p.cached_blocks), int(p.cached_bytes), int(p.hits),
                     int(p.misses), int(p.max_cached_bytes))


def set_max_cached_bytes(nbytes: int) -> None:
    """Keep at most ``nbytes`` of idle blocks (blocks given back beyond it are freed); 0 turns
    caching off. Idle blocks over the new limit are freed now."""
    if nbytes < 0:
        raise ValueError(f"max_cached_bytes must be >= 0, got {nbytes}")
    PROCESS_POOL.max_cached_bytes = int(nbytes)
    if PROCESS_POOL.cached_bytes > nbytes:
        drop_idle()


def drop_idle() -> None:
    """Free every idle block (memory in use is not affected)."""
    if _pool_libs:
        _pool_libs[0].flowc_pool_drop_idle(PROCESS_POOL)


def fail_nth_allocation(n: int) -> None:
    """Test hook: the ``n``-th pool allocation from now (1 = the next) returns out of memory, once;
    0 cancels a pending failure."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    PROCESS_POOL.fail_countdown = int(n)
