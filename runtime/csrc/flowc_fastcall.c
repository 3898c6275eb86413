/* The run path of a compiled step in C: one call from Python fills the feed structs from
 * numpy arrays, calls the module's entry function without the GIL, and wraps the fetched
 * buffers as numpy arrays (or numpy scalars) that give their block back to the buffer pool
 * when collected. It does what runtime/module.py's Executable.call does with cffi, minus
 * the per-call Python work (about 4 us of a 7 us empty step on a 2-core machine).
 *
 * Built on first use by runtime/fastcall.py against this Python's and numpy's headers and
 * cached; where it cannot be built, Executable.call keeps its cffi path. The structs come
 * from runtime/csrc/flowc_rt.h, the modules' own header (ABI_VERSION is checked on load).
 *
 * call(step, arrays, rendezvous, timeout_ms, scalars)
 *   step: what stays the same from call to call, (entry, rt, free, feed_specs, fetch_types):
 *     entry, rt, free: addresses (ints) of the module's flowc_entry, the step's flowc_runtime
 *     and the module's flowc_free;
 *     feed_specs: per feed, (flowc dtype code, rank or -1 when unknown, the shape as a tuple of
 *       ints, -1 for a dim not known, or None when the rank is not known, numpy type number);
 *     fetch_types: a tuple of numpy type numbers, one per fetch;
 *   arrays: a list, the step's feeds in order: numpy arrays or numpy scalars;
 *   rendezvous: the address of the step's rendezvous (0: none); timeout_ms: the deadline;
 *   scalars: rank-0 fetches become numpy scalars when true, 0-d arrays otherwise.
 * Returns the list of fetched values; or, when the entry fails, its status as a tuple (code,
 * node, source location, message); or -(i + 1) when feed i is not a plain array
 * (or numpy scalar) of the spec's dtype, rank and known dims (nothing ran): the caller
 * converts it with its feed check, or reports why it cannot.
 *
 * route(routes, fetches, feed_dict, version): Session.run's shortcut to ``call`` (below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>
#include <string.h>

#include "flowc_rt.h"           /* flowc_tensor and flowc_status: the modules' ABI */

typedef int (*entry_fn)(const flowc_tensor *feeds, flowc_tensor *fetches, const void *rt,
                        void *rendezvous, int64_t timeout_ms, flowc_status *status);
typedef void (*free_fn)(void *p);

/* A numpy scalar's value, aligned for any numeric type (complex128 is the widest fed). */
typedef union scalar_value {
    long double ld;
    int64_t i[2];
    double d[2];
} scalar_value;

#define MAX_RANK FLOWC_MAX_RANK
#define STACK_TENSORS 16

static void release_block(PyObject *capsule) {
    void *data = PyCapsule_GetPointer(capsule, NULL);
    free_fn release = (free_fn)PyCapsule_GetContext(capsule);
    if (data && release) release(data);
}

/* One fetched tensor as a numpy object owning its block (the block is released when the
   array is collected, or now for a scalar or an empty tensor). */
static PyObject *wrap_fetch(flowc_tensor *t, int type_num, int scalars, free_fn release) {
    PyArray_Descr *descr = PyArray_DescrFromType(type_num);
    if (!descr) return NULL;
    int rank = t->rank;
    if (rank < 0 || rank > MAX_RANK) {
        Py_DECREF(descr);
        if (t->data) release(t->data);
        PyErr_Format(PyExc_RuntimeError, "a fetched tensor has rank %d", rank);
        return NULL;
    }
    npy_intp dims[MAX_RANK];
    npy_intp size = 1;
    for (int d = 0; d < rank; d++) {
        dims[d] = (npy_intp)t->dims[d];
        size *= dims[d];
    }
    if (size < 0 || (size > 0 && t->data == NULL)) {
        Py_DECREF(descr);
        if (t->data) release(t->data);
        PyErr_SetString(PyExc_RuntimeError, "a fetched tensor has a negative dim or no data");
        return NULL;
    }
    if (rank == 0 && scalars) {
        PyObject *value = PyArray_Scalar(t->data, descr, NULL);
        Py_DECREF(descr);
        release(t->data);
        return value;
    }
    if (size == 0) {
        if (t->data) release(t->data);
        return PyArray_Empty(rank, dims, descr, 0);          /* steals descr */
    }
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, descr, rank, dims, NULL, t->data,
                                         NPY_ARRAY_CARRAY, NULL); /* steals descr */
    if (!arr) {
        release(t->data);
        return NULL;
    }
    PyObject *owner = PyCapsule_New(t->data, NULL, release_block);
    if (!owner || PyCapsule_SetContext(owner, (void *)release) != 0) {
        Py_XDECREF(owner);
        Py_DECREF(arr);                 /* the array does not own the block: release it */
        release(t->data);
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)arr, owner) != 0) {   /* steals owner */
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

/* The numpy scalar type of a feed spec's type number (np.float32 for NPY_FLOAT32), when its
   values fit a scalar_value: a feed of exactly that type is taken without numpy's scalar
   type lookups (PyArray_DescrFromScalar walks the type's bases). NULL (no error) otherwise. */
#define SCALAR_TYPES 32               /* the builtin type numbers (NPY_NTYPES_LEGACY is 24) */
static PyTypeObject *scalar_types[SCALAR_TYPES];

static PyTypeObject *scalar_type(PyObject *spec) {
    const long type_num = PyLong_AsLong(PyTuple_GET_ITEM(spec, 3));
    if (type_num < 0 || type_num >= SCALAR_TYPES) return NULL;
    PyTypeObject *type = scalar_types[type_num];
    if (!type) {
        PyArray_Descr *descr = PyArray_DescrFromType((int)type_num);
        if (!descr) return NULL;
        if (PyDataType_ELSIZE(descr) <= (npy_intp)sizeof(scalar_value)) {
            type = descr->typeobj;
            Py_INCREF(type);                /* kept for the life of the process */
            scalar_types[type_num] = type;
        }
        Py_DECREF(descr);
    }
    return type;
}

static void *address(PyObject *v) {
    return PyLong_AsVoidPtr(v);
}

static PyObject *fastcall_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 5) {
        PyErr_SetString(PyExc_TypeError, "call takes (step, arrays, rendezvous, timeout_ms, "
                        "scalars) with step = (entry, rt, free, feed_specs, fetch_types)");
        return NULL;
    }
    PyObject *step = args[0];
    entry_fn entry = (entry_fn)address(PyTuple_GET_ITEM(step, 0));
    void *rt = address(PyTuple_GET_ITEM(step, 1));
    free_fn release = (free_fn)address(PyTuple_GET_ITEM(step, 2));
    PyObject *specs = PyTuple_GET_ITEM(step, 3), *types = PyTuple_GET_ITEM(step, 4);
    PyObject *arrays = args[1];
    void *rendezvous = address(args[2]);
    int64_t timeout_ms = PyLong_AsLongLong(args[3]);
    int scalars = PyObject_IsTrue(args[4]);
    if (PyErr_Occurred()) return NULL;
    if (!entry || !release || !PyList_Check(arrays) || !PyTuple_Check(specs)
            || !PyTuple_Check(types) || PyTuple_GET_SIZE(specs) != PyList_GET_SIZE(arrays)) {
        PyErr_SetString(PyExc_TypeError, "call: bad arguments");
        return NULL;
    }
    Py_ssize_t n_feeds = PyList_GET_SIZE(arrays), n_fetches = PyTuple_GET_SIZE(types);
    flowc_tensor stack_feeds[STACK_TENSORS], stack_fetches[STACK_TENSORS];
    scalar_value stack_values[STACK_TENSORS];           /* the values of numpy-scalar feeds */
    flowc_tensor *feeds = stack_feeds, *fetches = stack_fetches;
    scalar_value *values = stack_values;
    if (n_feeds > STACK_TENSORS) {
        feeds = PyMem_Calloc((size_t)n_feeds, sizeof(flowc_tensor));
        values = PyMem_Calloc((size_t)n_feeds, sizeof(scalar_value));
    }
    if (n_fetches > STACK_TENSORS) fetches = PyMem_Calloc((size_t)n_fetches, sizeof(flowc_tensor));
    PyObject *result = NULL;
    if (!feeds || !fetches || !values) {
        PyErr_NoMemory();
        goto done;
    }
    memset(fetches, 0, (size_t)n_fetches * sizeof(flowc_tensor));
    for (Py_ssize_t i = 0; i < n_feeds; i++) {
        PyObject *a = PyList_GET_ITEM(arrays, i);
        PyObject *spec = PyTuple_GET_ITEM(specs, i);
        if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 4) {
            PyErr_SetString(PyExc_TypeError, "call: a feed spec is not (code, rank, shape, type)");
            goto done;
        }
        /* A numpy scalar: its value, rank 0. One of the feed's own scalar type is known
           without numpy's scalar-type lookups (scalar_type); another must have its dtype and
           be one of numpy's own (PyArray_ScalarAsCtype misreads a user type's scalar, such
           as ml_dtypes' bfloat16: the caller's check makes it an array). */
        int scalar = Py_TYPE(a) == scalar_type(spec);
        if (PyErr_Occurred()) goto done;
        if (!scalar && PyArray_IsScalar(a, Generic)) {
            PyArray_Descr *descr = PyArray_DescrFromScalar(a);
            if (!descr) goto done;
            const int type_num = descr->type_num;
            const int itemsize = (int)PyDataType_ELSIZE(descr);
            Py_DECREF(descr);
            if (type_num != (int)PyLong_AsLong(PyTuple_GET_ITEM(spec, 3))
                    || itemsize > (int)sizeof(scalar_value) || type_num >= SCALAR_TYPES) {
                if (PyErr_Occurred()) goto done;
                result = PyLong_FromSsize_t(-(i + 1));
                goto done;
            }
            scalar = 1;
        }
        if (scalar) {
            if (PyLong_AsLong(PyTuple_GET_ITEM(spec, 1)) > 0) {
                if (PyErr_Occurred()) goto done;
                result = PyLong_FromSsize_t(-(i + 1));
                goto done;
            }
            PyArray_ScalarAsCtype(a, &values[i]);
            feeds[i].dtype = (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
            feeds[i].rank = 0;
            feeds[i].data = &values[i];
            continue;
        }
        /* Anything else than a plain, C-contiguous, aligned array in native byte order is
           left to the caller's check, which converts it (or says why it cannot). */
        if (!PyArray_CheckExact(a) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)a)
                || !PyArray_ISALIGNED((PyArrayObject *)a)
                || !PyArray_ISNOTSWAPPED((PyArrayObject *)a)
                || PyArray_NDIM((PyArrayObject *)a) > MAX_RANK) {
            result = PyLong_FromSsize_t(-(i + 1));
            goto done;
        }
        PyArrayObject *arr = (PyArrayObject *)a;
        const long want_rank = PyLong_AsLong(PyTuple_GET_ITEM(spec, 1));
        PyObject *want_shape = PyTuple_GET_ITEM(spec, 2);
        flowc_tensor *t = &feeds[i];
        const int nd = PyArray_NDIM(arr);
        const npy_intp *shape = PyArray_DIMS(arr);
        int fits = (want_rank < 0 || want_rank == nd)
                   && PyArray_TYPE(arr) == (int)PyLong_AsLong(PyTuple_GET_ITEM(spec, 3));
        if (fits && want_shape != Py_None) {
            for (int d = 0; d < nd && fits; d++) {
                const Py_ssize_t want = PyLong_AsSsize_t(PyTuple_GET_ITEM(want_shape, d));
                fits = want < 0 || want == shape[d];
            }
        }
        if (PyErr_Occurred()) goto done;
        if (!fits) {
            result = PyLong_FromSsize_t(-(i + 1));
            goto done;
        }
        t->dtype = (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
        t->rank = nd;
        for (int d = 0; d < nd; d++) t->dims[d] = (int64_t)shape[d];
        t->data = PyArray_SIZE(arr) ? PyArray_DATA(arr) : NULL;
    }
    if (PyErr_Occurred()) goto done;
    int code;
    flowc_status status;
    status.code = 0;
    status.node[0] = status.location[0] = status.message[0] = 0;
    Py_BEGIN_ALLOW_THREADS
    code = entry(feeds, fetches, rt, rendezvous, timeout_ms, &status);
    Py_END_ALLOW_THREADS
    if (code != 0) {
        result = Py_BuildValue(
            "(iNNN)", status.code ? (int)status.code : code,
            PyUnicode_DecodeUTF8(status.node, (Py_ssize_t)strnlen(status.node, sizeof status.node), "replace"),
            PyUnicode_DecodeUTF8(status.location, (Py_ssize_t)strnlen(status.location, sizeof status.location), "replace"),
            PyUnicode_DecodeUTF8(status.message, (Py_ssize_t)strnlen(status.message, sizeof status.message), "replace"));
        goto done;
    }
    result = PyList_New(n_fetches);
    if (!result) goto release_rest;
    for (Py_ssize_t i = 0; i < n_fetches; i++) {
        const int type_num = (int)PyLong_AsLong(PyTuple_GET_ITEM(types, i));
        PyObject *value = PyErr_Occurred() ? NULL
                          : wrap_fetch(&fetches[i], type_num, scalars, release);
        if (!value) {
            for (Py_ssize_t j = i + 1; j < n_fetches; j++)
                if (fetches[j].data) release(fetches[j].data);
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, value);
    }
    goto done;
release_rest:
    for (Py_ssize_t j = 0; j < n_fetches; j++)
        if (fetches[j].data) release(fetches[j].data);
done:
    if (feeds != stack_feeds) PyMem_Free(feeds);
    if (values != stack_values) PyMem_Free(values);
    if (fetches != stack_fetches) PyMem_Free(fetches);
    return result;
}

/* route(routes, fetches, feed_dict, version): Session.run's way to a step it ran before with
 * the same fetches and feed keys and no options (dsl/session.py, _remember_route), without
 * its plan and runner lookups in Python. fetches: a tensor or an operation, or a list or
 * tuple of up to MAX_ROUTED_ITEMS of them.
 *   routes: a dict from id(fetches) (for a list or tuple: the tuple of its items' ids) to
 *     (fetches (for a list or tuple: its items, as a tuple), graph version, feed keys as a
 *     tuple in the feed_dict's order, order, step, rebuild, finish): order: None when the
 *     step takes the values in the feed_dict's order, else a tuple, the feed_dict position of
 *     each step feed; step: as ``call`` takes it; rebuild: None for one tensor fetched (its
 *     value is returned), for a list or tuple a tuple of the fetched value's index per item
 *     (-1: an operation, None), else a function from the list of fetched values to the
 *     user's structure; finish(got, values, step, feed_dict): what the
 *     executable does with a result of ``call`` that is not a list (a feed to convert, a
 *     failed step: it converts and runs again, or raises).
 * Returns the run's result, or MISS (nothing ran) when there is no route for these fetches,
 * these feed keys (the same objects, in the same order) and this graph version. */
static PyObject *miss;
#define MAX_ROUTED_ITEMS 16             /* the longest list or tuple of fetches with a route */

static PyObject *fastcall_route(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "route takes (routes, fetches, feed_dict, version)");
        return NULL;
    }
    PyObject *fetches = args[1], *feed_dict = args[2];
    /* The key: id(fetches), or for a list or tuple the tuple of its items' ids (a new list
       per call, as in sess.run([loss, train_op], feed), finds the route of the same items). */
    const int sequence = PyList_CheckExact(fetches) || PyTuple_CheckExact(fetches);
    const Py_ssize_t n_items = sequence ? PySequence_Fast_GET_SIZE(fetches) : 0;
    if (sequence && (n_items == 0 || n_items > MAX_ROUTED_ITEMS)) return Py_NewRef(miss);
    PyObject *id = sequence ? PyTuple_New(n_items) : PyLong_FromVoidPtr(fetches);
    if (!id) return NULL;
    for (Py_ssize_t k = 0; k < n_items; k++) {
        PyObject *item_id = PyLong_FromVoidPtr(PySequence_Fast_GET_ITEM(fetches, k));
        if (!item_id) {
            Py_DECREF(id);
            return NULL;
        }
        PyTuple_SET_ITEM(id, k, item_id);
    }
    PyObject *route = PyDict_GetItemWithError(args[0], id);
    Py_DECREF(id);
    if (!route) {
        if (PyErr_Occurred()) return NULL;
        return Py_NewRef(miss);
    }
    if (!PyTuple_Check(route) || PyTuple_GET_SIZE(route) != 7)
        return Py_NewRef(miss);
    PyObject *held = PyTuple_GET_ITEM(route, 0);      /* the fetch, or the items, it is for */
    if (sequence) {
        if (!PyTuple_Check(held) || PyTuple_GET_SIZE(held) != n_items)
            return Py_NewRef(miss);
        for (Py_ssize_t k = 0; k < n_items; k++)
            if (PyTuple_GET_ITEM(held, k) != PySequence_Fast_GET_ITEM(fetches, k))
                return Py_NewRef(miss);
    } else if (held != fetches) {
        return Py_NewRef(miss);
    }
    Py_INCREF(route);                   /* another thread may drop it while the step runs */
    PyObject *result = NULL, *values = NULL, *got = NULL;
    int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(route, 1), args[3], Py_EQ);
    if (same < 0) goto done;
    PyObject *keys = PyTuple_GET_ITEM(route, 2);
    const Py_ssize_t n = PyTuple_GET_SIZE(keys);
    if (feed_dict == Py_None || (PyDict_Check(feed_dict) && PyDict_GET_SIZE(feed_dict) == 0)) {
        same = same && n == 0;
    } else if (!PyDict_Check(feed_dict) || PyDict_GET_SIZE(feed_dict) != n) {
        same = 0;
    }
    if (!same) {
        result = Py_NewRef(miss);
        goto done;
    }
    values = PyList_New(n);
    if (!values) goto done;
    if (n) {
        Py_ssize_t pos = 0, i = 0;
        PyObject *key, *value;
        while (PyDict_Next(feed_dict, &pos, &key, &value)) {
            if (i >= n || key != PyTuple_GET_ITEM(keys, i)) {
                result = Py_NewRef(miss);
                goto done;
            }
            PyList_SET_ITEM(values, i, Py_NewRef(value));
            i++;
        }
    }
    PyObject *order = PyTuple_GET_ITEM(route, 3);
    if (order != Py_None) {                     /* the step's feed order */
        PyObject *ordered = PyList_New(n);
        if (!ordered) goto done;
        for (Py_ssize_t j = 0; j < n; j++) {
            const Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(order, j));
            if (at < 0 || at >= n) {
                Py_DECREF(ordered);
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_RuntimeError, "route: a bad feed order");
                goto done;
            }
            PyList_SET_ITEM(ordered, j, Py_NewRef(PyList_GET_ITEM(values, at)));
        }
        Py_SETREF(values, ordered);
    }
    PyObject *step = PyTuple_GET_ITEM(route, 4);
    PyObject *call_args[5] = {step, values, NULL, NULL, Py_True};
    call_args[2] = call_args[3] = PyLong_FromLong(0);
    if (!call_args[2]) goto done;
    got = fastcall_call(NULL, call_args, 5);
    Py_DECREF(call_args[2]);
    if (!got) goto done;
    if (!PyList_CheckExact(got)) {
        PyObject *finished = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(route, 6), got,
                                                          values, step, feed_dict, NULL);
        Py_SETREF(got, finished);
        if (!got) goto done;
    }
    PyObject *rebuild = PyTuple_GET_ITEM(route, 5);
    if (sequence) {                     /* rebuild: per item, its fetch's index or -1 (None) */
        PyObject *built = PyList_CheckExact(fetches) ? PyList_New(n_items) : PyTuple_New(n_items);
        if (!built) goto done;
        for (Py_ssize_t k = 0; k < n_items; k++) {
            const Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(rebuild, k));
            PyObject *item = Py_None;
            if (at >= 0 && PyList_Check(got) && at < PyList_GET_SIZE(got)) {
                item = PyList_GET_ITEM(got, at);
            } else if (at >= 0 || PyErr_Occurred()) {
                Py_DECREF(built);
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_RuntimeError, "route: a fetch index out of range");
                goto done;
            }
            if (PyList_Check(built)) PyList_SET_ITEM(built, k, Py_NewRef(item));
            else PyTuple_SET_ITEM(built, k, Py_NewRef(item));
        }
        result = built;
    } else if (rebuild == Py_None) {
        if (!PyList_Check(got) || PyList_GET_SIZE(got) != 1) {
            PyErr_SetString(PyExc_RuntimeError, "route: the step did not fetch one value");
            goto done;
        }
        result = Py_NewRef(PyList_GET_ITEM(got, 0));
    } else {
        result = PyObject_CallOneArg(rebuild, got);
    }
done:
    Py_XDECREF(got);
    Py_XDECREF(values);
    Py_DECREF(route);
    return result;
}

static PyMethodDef methods[] = {
    {"route", (PyCFunction)(void (*)(void))fastcall_route, METH_FASTCALL,
     "Run the step Session.run ran before for these fetches and feed keys; MISS when there "
     "is none."},
    {"call", (PyCFunction)(void (*)(void))fastcall_call, METH_FASTCALL,
     "Run a compiled step's entry on checked feed arrays; the fetched values, or the status "
     "code."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "flowc_fastcall", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_flowc_fastcall(void) {
    import_array();
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    miss = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (!miss || PyModule_AddObjectRef(m, "MISS", miss) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
