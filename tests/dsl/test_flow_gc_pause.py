"""``gc_paused``: the cyclic collector waits while a model is built; what was built goes to the
oldest generation afterwards, and garbage among it is still collected."""
import gc
import weakref

from compiler.gc_pause import gc_paused


class _Cell:
    def __init__(self):
        self.me = self                      # a reference cycle: only the collector frees it


def _generation_of(obj) -> int:
    for generation in range(3):
        if any(o is obj for o in gc.get_objects(generation)):
            return generation
    return -1


def test_the_collector_is_paused_inside_and_enabled_after():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():                   # nested (building parses inside)
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_what_was_built_leaves_in_the_oldest_generation():
    gc.collect()
    with gc_paused():
        built = [[i] for i in range(1000)]
    assert _generation_of(built) == 2
    assert _generation_of(built[-1]) == 2
    assert gc.get_freeze_count() == 0


def test_garbage_made_while_paused_is_collected_by_a_full_collection():
    with gc_paused():
        ref = weakref.ref(_Cell())
    assert ref() is not None                # a cycle: not freed by reference counting
    gc.collect()
    assert ref() is None


def test_objects_someone_else_froze_stay_frozen():
    gc.collect()
    theirs = [object()]
    gc.freeze()
    try:
        with gc_paused():
            [[i] for i in range(10)]
        # not unfrozen (that would empty the permanent generation); the count itself may
        # drop while other threads of the suite free objects that were frozen
        assert gc.get_freeze_count() > 0
        assert _generation_of(theirs) == -1  # still in the permanent generation
    finally:
        gc.unfreeze()


def test_overlapping_pauses_in_threads_restore_the_collector_once():
    import threading
    inside = threading.Barrier(2)
    leave = threading.Event()
    seen = []

    def build():
        with gc_paused():
            inside.wait()
            leave.wait()
            seen.append(gc.isenabled())

    t = threading.Thread(target=build)
    t.start()
    with gc_paused():
        inside.wait()
    assert not gc.isenabled()               # the other thread's pause is still on
    leave.set()
    t.join()
    assert seen == [False] and gc.isenabled()
