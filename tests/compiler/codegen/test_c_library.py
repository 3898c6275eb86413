"""``flowc compile --emit c-library``: a shared library with a C API, run without Python.

The digits MLP is trained a few steps and checkpointed; the library built from that checkpoint
must predict what ``flowc run`` predicts with the same checkpoint, both from the plain C
program of ``examples/c_host`` (its own process, no Python) and through the C API loaded
here. Steps a standalone library cannot run are refused at compile time.
"""
import os
import shutil
import subprocess
import textwrap
import threading

import cffi
import numpy as np
import pytest

from cli_runner import flowc
from compiler.cli import main
from repo_paths import ROOT

MODEL = os.path.join(ROOT, "examples", "digits_mlp.flow")
HOST = os.path.join(ROOT, "examples", "c_host")
CC = os.environ.get("CC", "cc")

pytestmark = pytest.mark.skipif(shutil.which(CC) is None, reason="needs a C compiler")

API = """
typedef struct NAME_model NAME_model;
NAME_model *NAME_create(void);
void NAME_destroy(NAME_model *m);
const char *NAME_input_name(int32_t index);
const char *NAME_output_name(int32_t index);
int32_t NAME_input_index(const char *name);
int32_t NAME_output_index(const char *name);
int NAME_set_input(NAME_model *m, int32_t index, const void *data, int32_t dtype,
                   int32_t rank, const int64_t *dims);
int NAME_set_input_by_name(NAME_model *m, const char *name, const void *data, int32_t dtype,
                           int32_t rank, const int64_t *dims);
int NAME_bind_input(NAME_model *m, int32_t index, const void *data, int32_t dtype,
                    int32_t rank, const int64_t *dims);
int NAME_bind_input_by_name(NAME_model *m, const char *name, const void *data, int32_t dtype,
                            int32_t rank, const int64_t *dims);
int NAME_run(NAME_model *m);
int NAME_get_output(NAME_model *m, int32_t index, const void **data, int32_t *dtype,
                    int32_t *rank, const int64_t **dims);
int NAME_get_output_by_name(NAME_model *m, const char *name, const void **data,
                            int32_t *dtype, int32_t *rank, const int64_t **dims);
const char *NAME_last_error(const NAME_model *m);
"""
F32, I32 = 1, 3
NUMPY = {1: np.float32, 2: np.float64, 3: np.int32, 4: np.int64}


class Library:
    """The C API of a compiled library, called through cffi (as a C program would)."""

    def __init__(self, path: str, name: str):
        self.ffi = cffi.FFI()
        self.ffi.cdef(API.replace("NAME", name))
        self.lib = self.ffi.dlopen(path)
        self.name = name

    def fn(self, what):
        return getattr(self.lib, f"{self.name}_{what}")

    def create(self):
        m = self.fn("create")()
        assert m != self.ffi.NULL
        return self.ffi.gc(m, self.fn("destroy"))

    def set_input(self, m, index, array, dtype=None, rank=None, how="set_input"):
        arr = np.ascontiguousarray(array)
        dims = self.ffi.new("int64_t[]", list(arr.shape) or [0])
        code = dtype if dtype is not None else {np.float32: F32, np.int32: I32}[arr.dtype.type]
        return self.fn(how)(m, index, self.ffi.from_buffer(arr), code,
                            arr.ndim if rank is None else rank, dims)

    def bind_input(self, m, index, array, dtype=None, rank=None):
        """``bind_input``: ``array`` (C-contiguous) must outlive the runs that read it."""
        assert array.flags.c_contiguous
        return self.set_input(m, index, array, dtype, rank, how="bind_input")

    def output(self, m, index):
        data, dtype = self.ffi.new("void **"), self.ffi.new("int32_t *")
        rank, dims = self.ffi.new("int32_t *"), self.ffi.new("int64_t **")
        rc = self.fn("get_output")(m, index, self.ffi.cast("const void **", data), dtype, rank,
                                   self.ffi.cast("const int64_t **", dims))
        assert rc == 0, self.error(m)
        shape = tuple(dims[0][i] for i in range(rank[0]))
        np_dtype = np.dtype(NUMPY[dtype[0]])
        n = int(np.prod(shape)) * np_dtype.itemsize
        return np.frombuffer(self.ffi.buffer(data[0], n), np_dtype).reshape(shape).copy()

    def error(self, m) -> str:
        return self.ffi.string(self.fn("last_error")(m)).decode()


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("c_library")


@pytest.fixture(scope="module")
def checkpoint(work):
    """The digits MLP after 20 steps of training (fixed seeds), saved by the trainer's Saver."""
    rc = main(["train", MODEL, "--steps", "20", "--eval-every", "20", "--seed", "3",
               "--checkpoint-dir", str(work / "ckpt"), "-q"])
    assert rc == 0
    return str(work / "ckpt" / "model.ckpt-20")


@pytest.fixture(scope="module")
def digits_lib(work, checkpoint):
    out = work / "digits_lib"
    assert main(["compile", MODEL, "--emit", "c-library", "--checkpoint", checkpoint,
                 "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def digits_artifact(work):
    """The same model as an artifact, for ``flowc run``."""
    out = work / "digits_artifact"
    assert main(["compile", MODEL, "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def digits_rows(work):
    """200 held-out digits as the host program reads them (text, one image per line)."""
    data = np.load(os.path.join(ROOT, "examples", "data", "digits.npz"))
    rows = data["x"][data["is_test"]][:200].astype(np.float32)
    path = work / "rows.txt"
    with open(path, "w") as f:
        f.write("# held-out digits\n")
        for row in rows:
            f.write(" ".join(format(float(v), ".9g") for v in row) + "\n")
    np.save(work / "rows.npy", rows)
    return path, rows


def _compile_host(lib_dir, out):
    subprocess.run([CC, "-O2", "-Wall", "-Werror", os.path.join(HOST, "main.c"), f"-I{lib_dir}",
                    f"-L{lib_dir}", "-ldigits_mlp", f"-Wl,-rpath,{lib_dir}", "-o", str(out)],
                   check=True, capture_output=True, text=True)
    return str(out)


def _flowc_run_predictions(capsys, work, art, checkpoint, rows_npy):
    rc, _, err = flowc(capsys, "run", art, "--checkpoint", checkpoint, "--feed",
                       f"x={rows_npy}", "--fetch", "predictions", "--save", work / "pred.npy")
    assert rc == 0, err
    return np.load(work / "pred.npy")


def test_library_folder_has_header_library_and_only_the_api_exported(digits_lib):
    names = set(os.listdir(digits_lib))
    assert {"digits_mlp.h", "libdigits_mlp.so", "library.json", "src"} <= names
    header = (digits_lib / "digits_mlp.h").read_text()
    assert "Thread safety" in header and "DIGITS_MLP_INPUT_X 0" in header
    assert "DIGITS_MLP_OUTPUT_PREDICTIONS 1" in header
    nm = shutil.which("nm")
    if nm:
        out = subprocess.run([nm, "-D", "--defined-only", str(digits_lib / "libdigits_mlp.so")],
                             capture_output=True, text=True, check=True).stdout
        exported = {line.split()[-1] for line in out.splitlines() if line.strip()}
        assert {"digits_mlp_run", "digits_mlp_set_input", "digits_mlp_bind_input"} <= exported
        assert not [s for s in exported if s.startswith("flowc_")]   # runtime stays private


def test_c_host_prints_the_predictions_of_flowc_run(capsys, work, checkpoint, digits_lib,
                                                    digits_artifact, digits_rows):
    path, rows = digits_rows
    host = _compile_host(digits_lib, work / "digits_host")
    proc = subprocess.run([host, str(path)], capture_output=True, text=True, env={})
    assert proc.returncode == 0, proc.stderr
    printed = np.array([int(line) for line in proc.stdout.split()], dtype=np.int32)
    expected = _flowc_run_predictions(capsys, work, digits_artifact, checkpoint, work / "rows.npy")
    assert printed.shape == (200,)
    np.testing.assert_array_equal(printed, expected)
    # the example's own input file runs too (12 rows)
    proc = subprocess.run([host, os.path.join(HOST, "digits_rows.txt")], capture_output=True,
                          text=True)
    assert proc.returncode == 0 and len(proc.stdout.split()) == 12


def test_c_host_reports_a_wrong_width_with_node_and_location(work, digits_lib):
    host = _compile_host(digits_lib, work / "digits_host_err")
    bad = work / "bad_rows.txt"
    bad.write_text("0 1 2\n3 4 5\n")
    proc = subprocess.run([host, str(bad)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "digits_mlp.flow:9:1: node 'x': input 'x' expects f32[?,64]; got f32[2,3]" in proc.stderr


def test_outputs_match_the_artifact_through_the_c_api(checkpoint, digits_lib, digits_artifact,
                                                      digits_rows):
    import runtime
    _, rows = digits_rows
    art = runtime.load_artifact(str(digits_artifact))
    art.restore(checkpoint)
    probs, predictions = art.run({"x": rows})
    lib = Library(str(digits_lib / "libdigits_mlp.so"), "digits_mlp")
    m = lib.create()
    assert lib.fn("input_index")(b"x") == 0 and lib.fn("output_index")(b"predictions") == 1
    assert lib.fn("input_index")(b"nope") == -1
    assert lib.set_input(m, 0, rows) == 0
    assert lib.fn("run")(m) == 0, lib.error(m)
    np.testing.assert_allclose(lib.output(m, 0), probs, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(lib.output(m, 1), predictions)


def test_inputs_of_changing_size_reuse_or_grow_their_buffer(checkpoint, digits_lib,
                                                             digits_artifact, digits_rows):
    """set_input keeps an input's buffer for the next value that fits and grows it for one that
    does not: every run computes on the rows last set, never on leftovers of a larger set."""
    import runtime
    _, rows = digits_rows
    art = runtime.load_artifact(str(digits_artifact))
    art.restore(checkpoint)
    lib = Library(str(digits_lib / "libdigits_mlp.so"), "digits_mlp")
    m = lib.create()
    for n in (3, 3, 50, 7, 0, 120, 1):
        batch = rows[n:2 * n].copy()
        assert lib.set_input(m, 0, batch) == 0, lib.error(m)
        batch[...] = 0                               # the library holds its own copy
        assert lib.fn("run")(m) == 0, lib.error(m)
        probs, predictions = art.run({"x": rows[n:2 * n]})
        np.testing.assert_allclose(lib.output(m, 0), probs, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(lib.output(m, 1), predictions)


def test_bind_input_reads_the_callers_buffer_without_a_copy(checkpoint, digits_lib,
                                                            digits_artifact, digits_rows):
    """bind_input makes no copy: a run reads the caller's buffer as it is then (so a batch
    written into it in place is the next run's input), the library never writes or frees it,
    and set_input afterwards copies into a buffer of the library's own again."""
    import runtime
    _, rows = digits_rows
    art = runtime.load_artifact(str(digits_artifact))
    art.restore(checkpoint)

    def expect(m, x):
        assert lib.fn("run")(m) == 0, lib.error(m)
        probs, predictions = art.run({"x": x})
        np.testing.assert_allclose(lib.output(m, 0), probs, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(lib.output(m, 1), predictions)

    lib = Library(str(digits_lib / "libdigits_mlp.so"), "digits_mlp")
    m = lib.create()
    block = rows[:40].copy()
    buf = block[5:10]                    # inside a larger block: never the library's to free
    assert lib.bind_input(m, 0, buf) == 0, lib.error(m)
    expect(m, rows[5:10])
    buf[...] = rows[20:25]               # written in place: the next run sees it
    expect(m, rows[20:25])
    assert lib.bind_input(m, 0, block[:0]) == 0, lib.error(m)     # an empty batch
    assert lib.fn("run")(m) == 0 and lib.output(m, 1).shape == (0,)
    assert lib.bind_input(m, 0, buf) == 0
    assert lib.bind_input(m, 0, np.zeros((3, 32), np.float32)) == 3   # refused: kept
    assert "input 'x' expects f32[?,64]; got f32[3,32]" in lib.error(m)
    expect(m, rows[20:25])
    assert lib.set_input(m, 0, rows[30:33]) == 0                   # a copy again
    np.testing.assert_array_equal(buf, rows[20:25])                # not written into buf
    buf[...] = 0
    expect(m, rows[30:33])
    name_bind = lib.fn("bind_input_by_name")
    dims = lib.ffi.new("int64_t[]", [2, 64])
    other = rows[1:3].copy()
    assert name_bind(m, b"x", lib.ffi.from_buffer(other), F32, 2, dims) == 0, lib.error(m)
    expect(m, rows[1:3])
    assert name_bind(m, b"y", lib.ffi.from_buffer(other), F32, 2, dims) == 6
    assert "no input named 'y'" in lib.error(m)
    del m                                # destroy: frees its own buffers, not the caller's
    np.testing.assert_array_equal(block[:5], rows[:5])


def test_bad_calls_fail_with_messages_and_change_nothing(digits_lib, digits_rows):
    _, rows = digits_rows
    lib = Library(str(digits_lib / "libdigits_mlp.so"), "digits_mlp")
    m = lib.create()
    assert lib.fn("run")(m) == 5                     # FAILED_PRECONDITION: no input yet
    assert "node 'x'" in lib.error(m) and "was not set" in lib.error(m)
    assert lib.fn("get_output")(m, 0, lib.ffi.NULL, lib.ffi.NULL, lib.ffi.NULL, lib.ffi.NULL) == 5
    assert "run the model first" in lib.error(m)
    assert lib.set_input(m, 0, rows[:4]) == 0
    assert lib.error(m) == ""
    assert lib.set_input(m, 0, rows[:4, :32]) == 3   # INVALID_ARGUMENT, input kept
    assert "examples/digits_mlp.flow:9:1: node 'x': input 'x' expects f32[?,64]; got f32[4,32]" \
        in lib.error(m)
    assert lib.set_input(m, 0, rows[:4].astype(np.float64), dtype=2) == 3
    assert "got f64[4,64]" in lib.error(m)
    assert lib.set_input(m, 7, rows[:4]) == 3 and "out of range" in lib.error(m)
    assert lib.fn("set_input_by_name")(m, b"y", lib.ffi.NULL, F32, 0, lib.ffi.NULL) == 6
    assert "no input named 'y'" in lib.error(m)
    assert lib.fn("run")(m) == 0, lib.error(m)       # the last good input is still there
    assert lib.output(m, 1).shape == (4,)


def test_instances_are_independent_across_threads(digits_lib, digits_rows):
    _, rows = digits_rows
    lib = Library(str(digits_lib / "libdigits_mlp.so"), "digits_mlp")
    reference = lib.create()
    assert lib.set_input(reference, 0, rows) == 0 and lib.fn("run")(reference) == 0
    expected = lib.output(reference, 0)
    results, errors = {}, []

    def worker(k):
        m = lib.create()
        for _ in range(5):
            if lib.set_input(m, 0, rows) or lib.fn("run")(m):
                errors.append(lib.error(m))
                return
        results[k] = lib.output(m, 0)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 4
    for value in results.values():
        np.testing.assert_array_equal(value, expected)


def _model_file(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("import dsl as fl\n\n\ndef build():\n"
                    + textwrap.indent(textwrap.dedent(body), "    "))
    return path


def test_random_ops_draw_new_numbers_each_run_like_a_fresh_session(capsys, tmp_path):
    model = _model_file(tmp_path, "noisy.py", """
        g = fl.Graph()
        with g.as_default():
            x = fl.placeholder(fl.float32, [2, 3], name="x")
            y = fl.add(x, fl.random_uniform([2, 3], seed=7), name="y")
        return g, {"y": y}
    """)
    rc, _, err = flowc(capsys, "compile", model, "--emit", "c-library", "-o", tmp_path / "lib")
    assert rc == 0, err
    rc, _, err = flowc(capsys, "compile", model, "-o", tmp_path / "art")
    assert rc == 0, err
    import runtime
    art = runtime.load_artifact(str(tmp_path / "art"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    first, second = art.run({"x": x})[0], art.run({"x": x})[0]
    assert not np.array_equal(first, second)
    lib = Library(str(tmp_path / "lib" / "libnoisy.so"), "noisy")
    m = lib.create()
    assert lib.set_input(m, 0, x) == 0
    got = []
    for _ in range(2):
        assert lib.fn("run")(m) == 0, lib.error(m)
        got.append(lib.output(m, 0))
    np.testing.assert_array_equal(got[0], first)
    np.testing.assert_array_equal(got[1], second)
    fresh = lib.create()                             # a new instance starts its streams at 0
    assert lib.set_input(fresh, 0, x) == 0 and lib.fn("run")(fresh) == 0
    np.testing.assert_array_equal(lib.output(fresh, 0), first)


# A C program that runs a model with one 64 MiB output (4096x4096 f32, every element the
# scalar input x) RUNS times from one instance, with x = 0, 1, 2, ...: it checks every value,
# counts the runs whose output pointer differs from the first run's and the page faults of
# runs 2..RUNS (what allocating the output anew every run costs: 16,384 in 4 KiB pages, 32 in
# huge pages), then destroys the instance.
_POOL_HOST = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include "big.h"

static long minor_faults(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

int main(int argc, char **argv) {
    const int runs = atoi(argv[1]);
    big_model *m = big_create();
    if (!m) return 2;
    const void *first = NULL;
    long faults = 0;
    int moved = 0;
    for (int r = 0; r < runs; r++) {
        const float x = (float)r;
        const void *data;
        int32_t dtype, rank;
        const int64_t *dims;
        if (big_set_input(m, BIG_INPUT_X, &x, FLOWC_DTYPE_F32, 0, NULL) || big_run(m)
            || big_get_output(m, BIG_OUTPUT_Y, &data, &dtype, &rank, &dims)) {
            fprintf(stderr, "%s\n", big_last_error(m));
            return 1;
        }
        if (r == 1) faults = minor_faults();
        const float *y = (const float *)data;
        for (int64_t i = 0; i < dims[0] * dims[1]; i++)
            if (y[i] != x) {
                fprintf(stderr, "run %d: y[%lld] = %g, not %g\n", r, (long long)i, y[i], x);
                return 1;
            }
        if (r == 0) first = data;
        else if (data != first) moved++;
    }
    faults = minor_faults() - faults;
    big_destroy(m);
    printf("%d %ld\n", moved, faults);
    return 0;
}
"""


def _pool_host(capsys, monkeypatch, tmp_path, sanitize=""):
    model = _model_file(tmp_path, "big.py", """
        g = fl.Graph()
        with g.as_default():
            x = fl.placeholder(fl.float32, [], name="x")
            y = fl.fill([4096, 4096], x, name="y")
        return g, {"y": y}
    """)
    lib = tmp_path / "lib"
    monkeypatch.setenv("FLOWC_SANITIZE", sanitize)
    rc, _, err = flowc(capsys, "compile", model, "--emit", "c-library", "-o", lib)
    assert rc == 0, err
    source = tmp_path / "pool_host.c"
    source.write_text(_POOL_HOST)
    flags = ["-fsanitize=address", "-g"] if sanitize else []
    subprocess.run([CC, "-O2", "-Wall", "-Werror", *flags, str(source), f"-I{lib}", f"-L{lib}",
                    "-lbig", f"-Wl,-rpath,{lib}", "-o", str(tmp_path / "pool_host")],
                   check=True, capture_output=True, text=True)
    return str(tmp_path / "pool_host")


def test_outputs_of_a_run_reuse_the_last_runs_memory(capsys, monkeypatch, tmp_path):
    """An output of the same size gets the same memory back every run (the library's buffer
    pool): no new allocation, no new page faults for it, and its values are this run's."""
    runs = 12
    proc = subprocess.run([_pool_host(capsys, monkeypatch, tmp_path), str(runs)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    moved, faults = map(int, proc.stdout.split())
    assert moved == 0
    assert faults < runs - 1          # not one output's worth of page faults per run


def test_runs_and_destroy_leave_no_leak_under_address_sanitizer(capsys, monkeypatch, tmp_path):
    """The same program and library built with AddressSanitizer, leak checking on: outputs
    read while they are the instance's, and nothing left allocated once it is destroyed."""
    probe = tmp_path / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    if subprocess.run([CC, "-fsanitize=address", str(probe), "-o", str(tmp_path / "probe")],
                      capture_output=True).returncode != 0:
        pytest.skip("the C compiler cannot build with AddressSanitizer")
    host = _pool_host(capsys, monkeypatch, tmp_path, sanitize="address")
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:halt_on_error=1")
    env.pop("LD_PRELOAD", None)
    proc = subprocess.run([host, "4"], capture_output=True, text=True, env=env)
    if "LeakSanitizer has encountered a fatal error" in proc.stderr:
        pytest.skip("LeakSanitizer cannot run here (ptrace)")
    assert proc.returncode == 0 and "Sanitizer" not in proc.stderr, proc.stderr
    assert proc.stdout.split()[0] == "0"


def test_ops_that_need_python_are_refused_in_one_error(capsys, tmp_path):
    model = _model_file(tmp_path, "needs_python.py", """
        g = fl.Graph()
        with g.as_default():
            x = fl.placeholder(fl.float32, [2], name="x")
            q = fl.FIFOQueue(4, [fl.float32], shapes=[[2]], name="q")
            v = fl.Variable(fl.zeros_initializer(), shape=[2], name="v")
            saver = fl.train.Saver([v])
            y = fl.add(x, q.dequeue(), name="y")
        return {"graph": g, "fetches": {"y": y}, "targets": [saver.save_op],
                "feeds": [x, saver.filename_tensor]}
    """)
    rc, _, err = flowc(capsys, "compile", model, "--emit", "c-library", "-o", tmp_path / "lib")
    assert rc == 1
    assert "needs the Python runtime" in err
    assert "'save/SaveV2' (SaveV2): writes checkpoint files" in err
    assert "(QueueDequeueV2): uses a queue" in err
    assert "(FIFOQueueV2): uses a queue" in err
    assert not (tmp_path / "lib").exists()


def test_variables_need_a_checkpoint_that_matches(capsys, tmp_path, checkpoint):
    rc, _, err = flowc(capsys, "compile", MODEL, "--emit", "c-library", "-o", tmp_path / "lib")
    assert rc == 1
    assert "give --checkpoint PREFIX" in err and "'hidden/weights1'" in err
    model = _model_file(tmp_path, "other.py", """
        g = fl.Graph()
        with g.as_default():
            x = fl.placeholder(fl.float32, [None, 3], name="x")
            with fl.name_scope("hidden"):
                w = fl.Variable(fl.zeros_initializer(), shape=[3, 3], name="weights1")
            y = fl.matmul(x, w, name="y")
        return g, {"y": y}
    """)
    rc, _, err = flowc(capsys, "compile", model, "--emit", "c-library", "--checkpoint",
                       checkpoint, "-o", tmp_path / "lib")
    assert rc == 1 and "hidden/weights1" in err
    assert not (tmp_path / "lib").exists()


def test_several_devices_are_refused(capsys, tmp_path):
    model = _model_file(tmp_path, "two_devices.py", """
        g = fl.Graph()
        with g.as_default():
            x = fl.placeholder(fl.float32, [2], name="x")
            with fl.device("/cpu:1"):
                y = fl.multiply(x, x, name="y")
            with fl.device("/cpu:0"):
                z = fl.add(y, x, name="z")
        return g, {"z": z}
    """)
    rc, _, err = flowc(capsys, "compile", model, "--emit", "c-library", "--cpu-devices", "2",
                       "-o", tmp_path / "lib")
    assert rc == 1
    assert "placed on 2 devices" in err and "a C library runs one CPU device" in err


def test_output_folder_and_name_are_checked(capsys, tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    rc, _, err = flowc(capsys, "compile", MODEL, "--emit", "c-library", "-o", tmp_path / "busy")
    assert rc == 1 and "refusing to replace" in err
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"
    rc, _, err = flowc(capsys, "compile", MODEL, "--emit", "c-library", "--name", "2bad",
                       "-o", tmp_path / "lib")
    assert rc == 1 and "must be a C identifier" in err
    rc, _, err = flowc(capsys, "compile", MODEL, "--name", "x", "-o", tmp_path / "art")
    assert rc == 1 and "--emit c-library" in err


_HOST_CALLING_C = """\
if (flowc_rt->host_call(flowc_rt->host, "TestLog", flowc_node, "{}", 0, NULL, 0, NULL, st))
    goto fail;
for (int64_t i = 0; i < {{ out.size }}; i++) {{ out.data }}[i] = {{ inputs[0].data }}[i];
"""


def test_user_ops_whose_kernels_call_python_are_refused(graph, tmp_path):
    import dsl as fl
    from compiler.codegen.c_library import CLibraryError, write_c_library
    from compiler.codegen.user_templates import c_template
    from compiler.ir.op_registry import has_op, register_op
    from compiler.step import make_step_graph, optimize
    if not has_op("CLibTestHostLoggedIdentity"):
        register_op("CLibTestHostLoggedIdentity", inputs=["x: T"], outputs=["y: T"],
                    attrs=["T: {float}"], shape=lambda ctx: [ctx.input_shape(0)],
                    kernel=lambda ctx, x: x.copy(), c_kernel=c_template(_HOST_CALLING_C),
                    c_output_dims=lambda kc: [kc.inputs[0].dims], stateful=True,
                    doc="Identity that logs through the runtime's host-call hook.")
    x = fl.placeholder(fl.float32, [3], name="x")
    y = fl.apply_op("CLibTestHostLoggedIdentity", [x], name="logged")
    step = make_step_graph(graph, [x.output], [y.output])
    optimize(step)
    with pytest.raises(CLibraryError, match=r"'logged': its kernel calls the Python runtime"):
        write_c_library(step, str(tmp_path / "lib"), "logged")
    assert not (tmp_path / "lib").exists()
