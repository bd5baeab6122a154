/* tgraphmodule.c - tgraph._tgraph, the CPython extension under the tgraph package, written
 * against the public include/tgraph.h only (plus NumPy's C API for arrays).
 *
 * Types: Tensor (owns one tg_tensor; buffer protocol, __array__, __dlpack__), Graph (a
 * tg_graph, owned or borrowed from a Module), Var (a tg_var with a reference to its Graph),
 * Function (a compiled tg_fn with a reference to the Graph it was compiled from, freed
 * after it) and Module (a parsed .tg file).
 * Invariants:
 * - Arrays cross without copies where dtype and layout allow: an ndarray argument becomes
 *   a tensor borrowing its memory through tg_tensor_from_dlpack (the deleter drops the
 *   array's reference, under the GIL), and an output becomes an ndarray whose base is the
 *   Tensor owning the result.
 * - Every failing tgraph call raises tgraph.Error with tg_last_error() (or the graph's
 *   first error) as its message; the GIL is released around compiling and calling.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <stdlib.h>
#include <string.h>

#include "dlpack_abi.h"
#include "tgraph.h"

static PyObject *Error; /* tgraph.Error */

static PyObject *fail(const char *msg) {
    PyErr_SetString(Error, msg && *msg ? msg : "tgraph: unknown error");
    return NULL;
}

static PyObject *fail_last(void) { return fail(tg_last_error()); }

/* ---- dtypes ------------------------------------------------------------------------ */
static const int npy_of[TG_DT_COUNT] = {
    [TG_DT_BOOL] = NPY_BOOL,   [TG_DT_I8] = NPY_INT8,     [TG_DT_I16] = NPY_INT16,
    [TG_DT_I32] = NPY_INT32,   [TG_DT_I64] = NPY_INT64,   [TG_DT_U8] = NPY_UINT8,
    [TG_DT_F32] = NPY_FLOAT32, [TG_DT_F64] = NPY_FLOAT64,
};

/* The tgraph dtype of a NumPy descriptor in native byte order; TG_DT_COUNT when none. */
static tg_dtype dtype_of_descr(PyArray_Descr *d) {
    if (!PyArray_ISNBO(d->byteorder)) return TG_DT_COUNT;
    switch (d->kind) {
    case 'b':
        return d->elsize == 1 ? TG_DT_BOOL : TG_DT_COUNT;
    case 'u':
        return d->elsize == 1 ? TG_DT_U8 : TG_DT_COUNT;
    case 'i':
        return d->elsize == 1   ? TG_DT_I8
               : d->elsize == 2 ? TG_DT_I16
               : d->elsize == 4 ? TG_DT_I32
               : d->elsize == 8 ? TG_DT_I64
                                : TG_DT_COUNT;
    case 'f':
        return d->elsize == 4 ? TG_DT_F32 : d->elsize == 8 ? TG_DT_F64 : TG_DT_COUNT;
    default:
        return TG_DT_COUNT;
    }
}

/* A dtype from a name ("float32", "f32") or a NumPy dtype-like object. */
static int parse_dtype(PyObject *o, tg_dtype *out) {
    if (PyUnicode_Check(o) && tg_dtype_parse(PyUnicode_AsUTF8(o), out)) return 1;
    PyArray_Descr *d = NULL;
    if (!PyArray_DescrConverter(o, &d)) return 0;
    *out = dtype_of_descr(d);
    Py_DECREF(d);
    if (*out == TG_DT_COUNT) {
        PyErr_Format(Error, "dtype %R has no tgraph equivalent", o);
        return 0;
    }
    return 1;
}

/* ---- Tensor ------------------------------------------------------------------------ */
typedef struct {
    PyObject_HEAD
    tg_tensor *t; /* owned */
} TensorObject;

static PyTypeObject TensorType;

static PyObject *tensor_wrap(tg_tensor *t) { /* steals t */
    TensorObject *o = PyObject_New(TensorObject, &TensorType);
    if (!o) {
        tg_tensor_free(t);
        return NULL;
    }
    o->t = t;
    return (PyObject *)o;
}

static void tensor_dealloc(TensorObject *o) {
    tg_tensor_free(o->t);
    PyObject_Free(o);
}

/* An ndarray viewing t's memory, its base the Tensor `owner` (no copy). */
static PyObject *ndarray_over(PyObject *owner, const tg_tensor *t) {
    int nd = tg_tensor_ndim(t);
    tg_dtype dt = tg_tensor_dtype(t);
    npy_intp dims[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    const int64_t *sh = tg_tensor_shape(t), *st = tg_tensor_strides(t);
    for (int i = 0; i < nd; i++) {
        dims[i] = (npy_intp)sh[i];
        strides[i] = (npy_intp)(st[i] * (int64_t)tg_dtype_size(dt));
    }
    PyArray_Descr *d = PyArray_DescrFromType(npy_of[dt]);
    PyObject *a = PyArray_NewFromDescr(&PyArray_Type, d, nd, dims, strides, tg_tensor_data(t),
                                       NPY_ARRAY_WRITEABLE, NULL);
    if (!a) return NULL;
    Py_INCREF(owner);
    if (PyArray_SetBaseObject((PyArrayObject *)a, owner) < 0) {
        Py_DECREF(a);
        return NULL;
    }
    return a;
}

/* Steals t: the ndarray over a new Tensor owning it. */
static PyObject *ndarray_owning(tg_tensor *t) {
    PyObject *o = tensor_wrap(t);
    if (!o) return NULL;
    PyObject *a = ndarray_over(o, t);
    Py_DECREF(o);
    return a;
}

static const char *buffer_format[TG_DT_COUNT] = {
    [TG_DT_BOOL] = "?", [TG_DT_I8] = "b", [TG_DT_I16] = "h", [TG_DT_I32] = "i",
    [TG_DT_I64] = "q",  [TG_DT_U8] = "B", [TG_DT_F32] = "f", [TG_DT_F64] = "d",
};

static int tensor_getbuffer(TensorObject *o, Py_buffer *view, int flags) {
    const tg_tensor *t = o->t;
    int nd = tg_tensor_ndim(t);
    size_t isz = tg_dtype_size(tg_tensor_dtype(t));
    if (!(flags & PyBUF_STRIDES) && !tg_tensor_is_contiguous(t)) {
        PyErr_SetString(PyExc_BufferError, "tgraph tensor is not contiguous");
        return -1;
    }
    Py_ssize_t *dims = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)(nd ? nd : 1));
    if (!dims) {
        PyErr_NoMemory();
        return -1;
    }
    const int64_t *sh = tg_tensor_shape(t), *st = tg_tensor_strides(t);
    for (int i = 0; i < nd; i++) {
        dims[i] = (Py_ssize_t)sh[i];
        dims[nd + i] = (Py_ssize_t)(st[i] * (int64_t)isz);
    }
    view->buf = tg_tensor_data(t);
    view->obj = (PyObject *)o;
    Py_INCREF(o);
    view->len = (Py_ssize_t)(tg_tensor_size(t) * (int64_t)isz);
    view->itemsize = (Py_ssize_t)isz;
    view->readonly = 0;
    view->ndim = nd;
    view->format = (flags & PyBUF_FORMAT) ? (char *)buffer_format[tg_tensor_dtype(t)] : NULL;
    view->shape = dims;
    view->strides = (flags & PyBUF_STRIDES) ? dims + nd : NULL;
    view->suboffsets = NULL;
    view->internal = dims;
    return 0;
}

static void tensor_releasebuffer(TensorObject *o, Py_buffer *view) { PyMem_Free(view->internal); }

static PyBufferProcs tensor_as_buffer = {(getbufferproc)tensor_getbuffer,
                                         (releasebufferproc)tensor_releasebuffer};

/* The destructor of a capsule we made: a capsule never consumed still owns its tensor. */
static void dltensor_capsule_free(PyObject *cap) {
    if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        if (m->deleter) m->deleter(m);
    } else {
        PyErr_Clear();
    }
}

static PyObject *tensor_dlpack(TensorObject *o, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *maxv = Py_None, *dev = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$OOO", kwlist, &stream, &maxv, &dev, &copy))
        return NULL;
    if (stream != Py_None)
        return fail("__dlpack__: tgraph tensors live in host memory: stream must be None");
    if (copy == Py_True)
        return fail("__dlpack__: copy=True is not supported (export shares memory)");
    DLManagedTensor *m = (DLManagedTensor *)tg_tensor_to_dlpack(o->t);
    if (!m) return fail_last();
    PyObject *cap = PyCapsule_New(m, "dltensor", dltensor_capsule_free);
    if (!cap) m->deleter(m);
    return cap;
}

static PyObject *tensor_dlpack_device(TensorObject *o, PyObject *unused) {
    return Py_BuildValue("(ii)", DL_CPU, 0);
}

static PyObject *tensor_array(TensorObject *o, PyObject *args) {
    PyObject *dtype = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &dtype)) return NULL;
    PyObject *a = ndarray_over((PyObject *)o, o->t);
    if (!a || dtype == Py_None) return a;
    PyArray_Descr *d = NULL;
    if (!PyArray_DescrConverter(dtype, &d)) {
        Py_DECREF(a);
        return NULL;
    }
    PyObject *r = PyArray_CastToType((PyArrayObject *)a, d, 0);
    Py_DECREF(a);
    return r;
}

static PyObject *tensor_numpy(TensorObject *o, PyObject *unused) {
    return ndarray_over((PyObject *)o, o->t);
}

static PyObject *tensor_get_shape(TensorObject *o, void *unused) {
    int nd = tg_tensor_ndim(o->t);
    PyObject *r = PyTuple_New(nd);
    for (int i = 0; r && i < nd; i++)
        PyTuple_SET_ITEM(r, i, PyLong_FromLongLong(tg_tensor_shape(o->t)[i]));
    return r;
}

static PyObject *tensor_get_dtype(TensorObject *o, void *unused) {
    return PyUnicode_FromString(tg_dtype_name(tg_tensor_dtype(o->t)));
}

static PyObject *tensor_repr(TensorObject *o) {
    PyObject *a = ndarray_over((PyObject *)o, o->t);
    if (!a) return NULL;
    PyObject *r = PyObject_Repr(a);
    Py_DECREF(a);
    if (!r) return NULL;
    PyObject *s = PyUnicode_FromFormat("tgraph.Tensor(%U)", r);
    Py_DECREF(r);
    return s;
}

static PyMethodDef tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, METH_VARARGS | METH_KEYWORDS,
     "DLPack capsule sharing this tensor's memory (unversioned 'dltensor')."},
    {"__dlpack_device__", (PyCFunction)tensor_dlpack_device, METH_NOARGS,
     "(kDLCPU, 0): tgraph tensors live in host memory."},
    {"__array__", (PyCFunction)tensor_array, METH_VARARGS, "ndarray view (no copy)."},
    {"numpy", (PyCFunction)tensor_numpy, METH_NOARGS, "ndarray view of the memory (no copy)."},
    {NULL},
};

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)tensor_get_shape, NULL, "extents", NULL},
    {"dtype", (getter)tensor_get_dtype, NULL, "tgraph dtype name", NULL},
    {NULL},
};

static PyTypeObject TensorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tgraph.Tensor",
    .tp_basicsize = sizeof(TensorObject),
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_repr = (reprfunc)tensor_repr,
    .tp_as_buffer = &tensor_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A tgraph tensor: memory owned by tgraph, shared with NumPy and DLPack.",
    .tp_methods = tensor_methods,
    .tp_getset = tensor_getset,
};

/* ---- arrays into tensors ------------------------------------------------------------ */
/* A DLManagedTensor over an ndarray's memory; the array's reference is dropped by the
 * deleter, which may run on any thread (a tensor freed by tgraph), so it takes the GIL. */
typedef struct {
    DLManagedTensor m;
    PyObject *owner;
    int64_t dims[2 * TG_MAX_DIMS];
} borrowed_array;

static void borrowed_array_free(DLManagedTensor *m) {
    borrowed_array *b = (borrowed_array *)m;
    PyGILState_STATE s = PyGILState_Ensure();
    Py_DECREF(b->owner);
    PyGILState_Release(s);
    free(b);
}

static const DLDataType dl_of[TG_DT_COUNT] = {
    [TG_DT_BOOL] = {DL_BOOL, 8, 1},  [TG_DT_I8] = {DL_INT, 8, 1},     [TG_DT_I16] = {DL_INT, 16, 1},
    [TG_DT_I32] = {DL_INT, 32, 1},   [TG_DT_I64] = {DL_INT, 64, 1},   [TG_DT_U8] = {DL_UINT, 8, 1},
    [TG_DT_F32] = {DL_FLOAT, 32, 1}, [TG_DT_F64] = {DL_FLOAT, 64, 1},
};

/* A tensor borrowing a's memory, or NULL without an exception set when the layout does not
 * allow it (byte strides not a multiple of the element size, misaligned data, more than
 * TG_MAX_DIMS axes): the caller copies then. */
static tg_tensor *tensor_borrowing(PyArrayObject *a, tg_dtype dt) {
    int nd = PyArray_NDIM(a);
    size_t isz = tg_dtype_size(dt);
    if (nd > TG_MAX_DIMS || ((uintptr_t)PyArray_DATA(a) % isz) != 0) return NULL;
    borrowed_array *b = malloc(sizeof *b);
    if (!b) return NULL;
    for (int i = 0; i < nd; i++) {
        npy_intp s = PyArray_STRIDES(a)[i];
        if (s % (npy_intp)isz != 0) {
            free(b);
            return NULL;
        }
        b->dims[i] = PyArray_DIMS(a)[i];
        b->dims[TG_MAX_DIMS + i] = s / (npy_intp)isz;
    }
    b->m.dl_tensor = (DLTensor){.data = PyArray_DATA(a),
                                .device = {DL_CPU, 0},
                                .ndim = nd,
                                .dtype = dl_of[dt],
                                .shape = b->dims,
                                .strides = b->dims + TG_MAX_DIMS,
                                .byte_offset = 0};
    b->m.manager_ctx = b;
    b->m.deleter = borrowed_array_free;
    b->owner = (PyObject *)a;
    Py_INCREF(a);
    tg_tensor *t = tg_tensor_from_dlpack(tg_ctx_default(), (struct DLManagedTensor *)&b->m);
    if (!t) {
        Py_DECREF(a);
        free(b);
    }
    return t;
}

/* Imports a DLPack capsule ("dltensor"), renaming it "used_dltensor" once tgraph owns it. */
static tg_tensor *tensor_from_capsule(PyObject *cap) {
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (!m) return NULL;
    tg_tensor *t = tg_tensor_from_dlpack(tg_ctx_default(), (struct DLManagedTensor *)m);
    if (!t) {
        fail_last();
        return NULL;
    }
    if (PyCapsule_SetName(cap, "used_dltensor") < 0) {
        tg_tensor_free(t);
        return NULL;
    }
    return t;
}

/* A tensor from an object with __dlpack__ (no copy). */
static tg_tensor *tensor_from_dlpack_obj(PyObject *obj) {
    PyObject *cap = PyCapsule_CheckExact(obj) ? (Py_INCREF(obj), obj)
                                              : PyObject_CallMethod(obj, "__dlpack__", NULL);
    if (!cap) return NULL;
    tg_tensor *t = tensor_from_capsule(cap);
    Py_DECREF(cap);
    return t;
}

/* The tensor for argument `o` of dtype `dt`: *owned says whether the caller frees it.
 * Zero copy for a Tensor, an ndarray of dtype dt and usable layout, and DLPack producers
 * of dtype dt; anything else is converted by NumPy (a copy, with NumPy's casting rules). */
static tg_tensor *tensor_arg(PyObject *o, tg_dtype dt, bool *owned, int index) {
    *owned = true;
    if (Py_TYPE(o) == &TensorType) {
        *owned = false;
        return ((TensorObject *)o)->t;
    }
    if (PyArray_Check(o) && dtype_of_descr(PyArray_DESCR((PyArrayObject *)o)) == dt) {
        tg_tensor *t = tensor_borrowing((PyArrayObject *)o, dt);
        if (t) return t;
    } else if (!PyArray_Check(o) && PyObject_HasAttrString(o, "__dlpack__")) {
        tg_tensor *t = tensor_from_dlpack_obj(o);
        if (!t) return NULL;
        if (tg_tensor_dtype(t) == dt) return t;
        PyErr_Format(Error, "argument %d: expected dtype %s, got a DLPack tensor of dtype %s",
                     index, tg_dtype_name(dt), tg_dtype_name(tg_tensor_dtype(t)));
        tg_tensor_free(t);
        return NULL;
    }
    PyArrayObject *c = (PyArrayObject *)PyArray_FromAny(o, PyArray_DescrFromType(npy_of[dt]), 0,
                                                        TG_MAX_DIMS, NPY_ARRAY_CARRAY_RO, NULL);
    if (!c) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyErr_Format(Error, "argument %d: cannot convert %.100s to %s: %S", index,
                     Py_TYPE(o)->tp_name, tg_dtype_name(dt), ev ? ev : Py_None);
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        return NULL;
    }
    int64_t shape[TG_MAX_DIMS];
    for (int i = 0; i < PyArray_NDIM(c); i++) shape[i] = PyArray_DIMS(c)[i];
    tg_tensor *t =
        tg_tensor_from_data(tg_ctx_default(), dt, PyArray_NDIM(c), shape, PyArray_DATA(c));
    Py_DECREF(c);
    if (!t) fail_last();
    return t;
}

static PyObject *py_from_dlpack(PyObject *self, PyObject *obj) {
    tg_tensor *t = tensor_from_dlpack_obj(obj);
    return t ? tensor_wrap(t) : NULL;
}

/* tensor(obj, dtype=None): a Tensor holding a copy of obj (ndarray-like). */
static PyObject *py_tensor_copy(PyObject *self, PyObject *args) {
    PyObject *obj, *dtype = Py_None;
    if (!PyArg_ParseTuple(args, "O|O", &obj, &dtype)) return NULL;
    PyArray_Descr *d = NULL;
    if (dtype != Py_None && !PyArray_DescrConverter(dtype, &d)) return NULL;
    PyArrayObject *a = (PyArrayObject *)PyArray_FromAny(obj, d, 0, 0, NPY_ARRAY_CARRAY_RO, NULL);
    if (!a) return NULL;
    tg_dtype dt = dtype_of_descr(PyArray_DESCR(a));
    if (dt == TG_DT_COUNT || PyArray_NDIM(a) > TG_MAX_DIMS) {
        Py_DECREF(a);
        return fail("tensor: dtype or rank has no tgraph equivalent");
    }
    int64_t shape[TG_MAX_DIMS];
    for (int i = 0; i < PyArray_NDIM(a); i++) shape[i] = PyArray_DIMS(a)[i];
    tg_tensor *t =
        tg_tensor_from_data(tg_ctx_default(), dt, PyArray_NDIM(a), shape, PyArray_DATA(a));
    Py_DECREF(a);
    return t ? tensor_wrap(t) : fail_last();
}

/* ---- Graph and Var ------------------------------------------------------------------ */
typedef struct {
    PyObject_HEAD
    tg_graph *g;
    PyObject *module; /* the Module owning g, or NULL when this object owns it */
} GraphObject;

typedef struct {
    PyObject_HEAD
    GraphObject *graph;
    tg_var *v;
} VarObject;

static PyTypeObject GraphType, VarType, FunctionType, ModuleType;

static PyObject *graph_fail(GraphObject *go) {
    const char *e = tg_graph_error(go->g);
    return fail(e && *e ? e : tg_last_error());
}

static PyObject *var_wrap(GraphObject *go, tg_var *v) {
    if (!v) return graph_fail(go);
    VarObject *o = PyObject_New(VarObject, &VarType);
    if (!o) return NULL;
    Py_INCREF(go);
    o->graph = go;
    o->v = v;
    return (PyObject *)o;
}

static void var_dealloc(VarObject *o) {
    Py_DECREF(o->graph);
    PyObject_Free(o);
}

static PyObject *var_get_dtype(VarObject *o, void *unused) {
    return PyUnicode_FromString(tg_dtype_name(tg_var_dtype(o->v)));
}

static PyObject *var_get_shape(VarObject *o, void *unused) {
    int nd = tg_var_ndim(o->v);
    PyObject *r = PyTuple_New(nd);
    for (int i = 0; r && i < nd; i++) {
        int64_t d = tg_var_dim(o->v, i);
        PyObject *e = d < 0 ? (Py_INCREF(Py_None), Py_None) : PyLong_FromLongLong(d);
        PyTuple_SET_ITEM(r, i, e);
    }
    return r;
}

static PyObject *var_get_name(VarObject *o, void *unused) {
    const char *n = tg_var_name(o->v);
    if (!n) Py_RETURN_NONE;
    return PyUnicode_FromString(n);
}

static PyObject *var_set_device(VarObject *o, PyObject *arg) {
    const char *dev = arg == Py_None ? NULL : PyUnicode_AsUTF8(arg);
    if (arg != Py_None && !dev) return NULL;
    if (tg_var_set_device(o->v, dev) != TG_OK) return fail_last();
    Py_RETURN_NONE;
}

static PyMethodDef var_methods[] = {
    {"set_device", (PyCFunction)var_set_device, METH_O, "Annotates the node making this value."},
    {NULL},
};

static PyGetSetDef var_getset[] = {
    {"dtype", (getter)var_get_dtype, NULL, "tgraph dtype name", NULL},
    {"shape", (getter)var_get_shape, NULL, "static shape (None: unknown extent)", NULL},
    {"name", (getter)var_get_name, NULL, "name or None", NULL},
    {NULL},
};

static PyTypeObject VarType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tgraph._tgraph.Var",
    .tp_basicsize = sizeof(VarObject),
    .tp_dealloc = (destructor)var_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A variable of a tgraph graph (low level).",
    .tp_methods = var_methods,
    .tp_getset = var_getset,
};

static PyObject *graph_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    const char *name = "main";
    if (!PyArg_ParseTuple(args, "|s", &name)) return NULL;
    tg_graph *g = tg_graph_new(NULL, name);
    if (!g) return fail_last();
    GraphObject *o = (GraphObject *)type->tp_alloc(type, 0);
    if (!o) {
        tg_graph_free(g);
        return NULL;
    }
    o->g = g;
    o->module = NULL;
    return (PyObject *)o;
}

static void graph_dealloc(GraphObject *o) {
    if (o->module)
        Py_DECREF(o->module);
    else
        tg_graph_free(o->g);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static int var_arg(GraphObject *go, PyObject *o, tg_var **out) {
    if (Py_TYPE(o) != &VarType) {
        PyErr_Format(PyExc_TypeError, "expected a Var, got %.100s", Py_TYPE(o)->tp_name);
        return 0;
    }
    if (((VarObject *)o)->graph != go) {
        PyErr_SetString(Error, "variable belongs to another graph");
        return 0;
    }
    *out = ((VarObject *)o)->v;
    return 1;
}

/* Vars of a sequence into a new array (PyMem_Free it); -1 on error. */
static int vars_arg(GraphObject *go, PyObject *seq, tg_var ***out) {
    PyObject *f = PySequence_Fast(seq, "expected a sequence of Vars");
    if (!f) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    tg_var **vs = PyMem_Malloc(sizeof *vs * (size_t)(n ? n : 1));
    for (Py_ssize_t i = 0; vs && i < n; i++) {
        if (!var_arg(go, PySequence_Fast_GET_ITEM(f, i), &vs[i])) {
            PyMem_Free(vs);
            Py_DECREF(f);
            return -1;
        }
    }
    Py_DECREF(f);
    if (!vs) {
        PyErr_NoMemory();
        return -1;
    }
    *out = vs;
    return (int)n;
}

static int shape_arg(PyObject *shape, int64_t *dims) {
    PyObject *f = PySequence_Fast(shape, "shape must be a sequence");
    if (!f) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    if (n > TG_MAX_DIMS) {
        Py_DECREF(f);
        PyErr_Format(Error, "shape has %zd axes, more than %d", n, TG_MAX_DIMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PySequence_Fast_GET_ITEM(f, i);
        dims[i] = e == Py_None ? TG_DIM_UNKNOWN : PyLong_AsLongLong(e);
        if (dims[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(f);
            return -1;
        }
    }
    Py_DECREF(f);
    return (int)n;
}

static PyObject *graph_input_or_state(GraphObject *go, PyObject *args, bool state) {
    const char *name;
    PyObject *dto, *shape;
    if (!PyArg_ParseTuple(args, "sOO", &name, &dto, &shape)) return NULL;
    tg_dtype dt;
    int64_t dims[TG_MAX_DIMS];
    int nd;
    if (!parse_dtype(dto, &dt) || (nd = shape_arg(shape, dims)) < 0) return NULL;
    tg_var *v = state ? tg_state(go->g, name, dt, nd, dims) : tg_input(go->g, name, dt, nd, dims);
    return var_wrap(go, v);
}

static PyObject *graph_input(GraphObject *go, PyObject *args) {
    return graph_input_or_state(go, args, false);
}

static PyObject *graph_state(GraphObject *go, PyObject *args) {
    return graph_input_or_state(go, args, true);
}

static PyObject *graph_literal(GraphObject *go, PyObject *v) {
    if (PyBool_Check(v)) return var_wrap(go, tg_literal_bool(go->g, v == Py_True));
    if (PyLong_Check(v)) {
        long long i = PyLong_AsLongLong(v);
        if (i == -1 && PyErr_Occurred()) return NULL;
        return var_wrap(go, tg_literal_int(go->g, i));
    }
    double f = PyFloat_AsDouble(v);
    if (f == -1.0 && PyErr_Occurred()) return NULL;
    return var_wrap(go, tg_literal_float(go->g, f));
}

static PyObject *graph_constant(GraphObject *go, PyObject *v) {
    PyObject *args = PyTuple_Pack(1, v);
    PyObject *t = args ? py_tensor_copy(NULL, args) : NULL;
    Py_XDECREF(args);
    if (!t) return NULL;
    PyObject *r = var_wrap(go, tg_constant(go->g, ((TensorObject *)t)->t));
    Py_DECREF(t);
    return r;
}

/* Attributes from a dict; the arrays they point to live in *keep (a list) and *mem. */
typedef struct {
    tg_attr *a;
    int n;
    void **mem; /* PyMem blocks to free */
    int nmem;
} attr_set;

static void attrs_free(attr_set *s) {
    for (int i = 0; i < s->nmem; i++) PyMem_Free(s->mem[i]);
    PyMem_Free(s->mem);
    PyMem_Free(s->a);
}

static void *attrs_keep(attr_set *s, size_t bytes) {
    void *p = PyMem_Calloc(1, bytes ? bytes : 1);
    if (p) s->mem[s->nmem++] = p;
    return p;
}

static int attr_value(attr_set *s, tg_attr *a, PyObject *v) {
    if (v == Py_None) {
        a->kind = TG_ATTR_NONE;
    } else if (PyBool_Check(v)) {
        a->kind = TG_ATTR_BOOL;
        a->i = v == Py_True;
    } else if (PyLong_Check(v)) {
        a->kind = TG_ATTR_INT;
        a->i = PyLong_AsLongLong(v);
    } else if (PyFloat_Check(v)) {
        a->kind = TG_ATTR_FLOAT;
        a->f = PyFloat_AsDouble(v);
    } else if (PyUnicode_Check(v)) {
        a->kind = TG_ATTR_STR;
        a->s = PyUnicode_AsUTF8(v);
    } else if (PyObject_TypeCheck(v, &GraphType)) {
        a->kind = TG_ATTR_FUNC;
        a->func = ((GraphObject *)v)->g;
    } else if (PyList_Check(v) || PyTuple_Check(v)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
        bool floats = false;
        for (Py_ssize_t k = 0; k < n; k++)
            floats |= PyFloat_Check(PySequence_Fast_GET_ITEM(v, k)) != 0;
        if (floats) {
            double *f = attrs_keep(s, sizeof *f * (size_t)n);
            if (!f) return 0;
            for (Py_ssize_t k = 0; k < n; k++)
                f[k] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(v, k));
            *a = (tg_attr){.name = a->name, .kind = TG_ATTR_FLOATS, .floats = f, .n = (int)n};
        } else {
            int64_t *iv = attrs_keep(s, sizeof *iv * (size_t)n);
            bool *none = attrs_keep(s, sizeof *none * (size_t)n), any_none = false;
            if (!iv || !none) return 0;
            for (Py_ssize_t k = 0; k < n; k++) {
                PyObject *e = PySequence_Fast_GET_ITEM(v, k);
                none[k] = e == Py_None;
                any_none |= none[k];
                iv[k] = none[k] ? 0 : PyLong_AsLongLong(e);
            }
            *a = (tg_attr){.name = a->name,
                           .kind = TG_ATTR_INTS,
                           .ints = iv,
                           .n = (int)n,
                           .none = any_none ? none : NULL};
        }
    } else {
        PyErr_Format(PyExc_TypeError, "attribute %s: unsupported value of type %.100s", a->name,
                     Py_TYPE(v)->tp_name);
        return 0;
    }
    return !PyErr_Occurred();
}

static int attrs_arg(PyObject *dict, attr_set *s) {
    memset(s, 0, sizeof *s);
    if (dict == Py_None) return 1;
    if (!PyDict_Check(dict)) {
        PyErr_SetString(PyExc_TypeError, "attributes must be a dict");
        return 0;
    }
    Py_ssize_t n = PyDict_Size(dict), pos = 0;
    s->a = PyMem_Calloc((size_t)(n ? n : 1), sizeof *s->a);
    s->mem = PyMem_Calloc((size_t)(2 * n + 1), sizeof *s->mem);
    if (!s->a || !s->mem) {
        PyErr_NoMemory();
        return 0;
    }
    PyObject *k, *v;
    while (PyDict_Next(dict, &pos, &k, &v)) {
        tg_attr *a = &s->a[s->n++];
        a->name = PyUnicode_AsUTF8(k);
        if (!a->name || !attr_value(s, a, v)) return 0;
    }
    return 1;
}

/* apply(op, inputs, attrs=None, multi=False): the first output, or a list of all. */
static PyObject *graph_apply(GraphObject *go, PyObject *args) {
    const char *op;
    PyObject *ins, *attrs = Py_None;
    int multi = 0;
    if (!PyArg_ParseTuple(args, "sO|Op", &op, &ins, &attrs, &multi)) return NULL;
    tg_var **vs;
    int n = vars_arg(go, ins, &vs);
    if (n < 0) return NULL;
    attr_set s;
    PyObject *r = NULL;
    if (attrs_arg(attrs, &s)) {
        if (!multi) {
            r = var_wrap(go, tg_apply(go->g, op, vs, n, s.a, s.n));
        } else {
            tg_var *outs[64];
            int nout = 64;
            if (tg_apply_multi(go->g, op, vs, n, s.a, s.n, outs, &nout) != TG_OK) {
                r = graph_fail(go);
            } else {
                r = PyList_New(nout);
                for (int i = 0; r && i < nout; i++) {
                    PyObject *e = var_wrap(go, outs[i]);
                    if (!e)
                        Py_CLEAR(r);
                    else
                        PyList_SET_ITEM(r, i, e);
                }
            }
        }
    }
    attrs_free(&s);
    PyMem_Free(vs);
    return r;
}

/* One basic item (start, stop, step, is_index), None for parts left out. */
static int slice_item(PyObject *o, tg_slice *sl) {
    PyObject *st, *sp, *stp;
    int is_index;
    if (!PyArg_ParseTuple(o, "OOOp", &st, &sp, &stp, &is_index)) return 0;
    *sl = (tg_slice){.is_index = is_index};
    sl->omit = (st == Py_None ? TG_SLICE_NO_START : 0) | (sp == Py_None ? TG_SLICE_NO_STOP : 0) |
               (stp == Py_None ? TG_SLICE_NO_STEP : 0);
    sl->start = st == Py_None ? 0 : PyLong_AsLongLong(st);
    sl->stop = sp == Py_None ? 0 : PyLong_AsLongLong(sp);
    sl->step = stp == Py_None ? 1 : PyLong_AsLongLong(stp);
    return !PyErr_Occurred();
}

/* Items of x[...] from a sequence of at most TG_MAX_DIMS: a tuple is a basic item; where
 * arrays are allowed, a Var is an index array or mask, None a new axis and Ellipsis `...`.
 * Returns the count, or -1 with an exception. */
static int index_items(GraphObject *go, PyObject *idx, bool arrays, tg_index *it) {
    PyObject *f = PySequence_Fast(idx, "index: expected a sequence");
    if (!f) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    if (n > TG_MAX_DIMS) {
        Py_DECREF(f);
        fail("index: more indices than axes");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(f, i);
        it[i] = (tg_index){0};
        if (arrays && (o == Py_None || o == Py_Ellipsis)) {
            it[i].slice.omit = o == Py_None ? TG_INDEX_NEWAXIS : TG_INDEX_ELLIPSIS;
            continue;
        }
        bool ok = arrays && Py_TYPE(o) == &VarType ? var_arg(go, o, &it[i].array)
                                                   : slice_item(o, &it[i].slice);
        if (!ok) {
            Py_DECREF(f);
            return -1;
        }
    }
    Py_DECREF(f);
    return (int)n;
}

/* slice(x, [(start, stop, step, is_index), ...]): basic slicing. */
static PyObject *graph_slice(GraphObject *go, PyObject *args) {
    PyObject *xo, *idx;
    tg_var *x;
    tg_index it[TG_MAX_DIMS];
    tg_slice sl[TG_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "OO", &xo, &idx) || !var_arg(go, xo, &x)) return NULL;
    int n = index_items(go, idx, false, it);
    if (n < 0) return NULL;
    for (int i = 0; i < n; i++) sl[i] = it[i].slice;
    return var_wrap(go, tg_slice_apply(go->g, x, sl, n));
}

/* index(x, [item, ...]): NumPy's indexing with index arrays and masks (Vars), None and
 * Ellipsis among the basic items (tg_index_apply). */
static PyObject *graph_index(GraphObject *go, PyObject *args) {
    PyObject *xo, *idx;
    tg_var *x;
    tg_index it[TG_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "OO", &xo, &idx) || !var_arg(go, xo, &x)) return NULL;
    int n = index_items(go, idx, true, it);
    return n < 0 ? NULL : var_wrap(go, tg_index_apply(go->g, x, it, n));
}

/* index_update(x, [item, ...], y, inc): a copy of x with x[items] = y, or += y with
 * repeated places accumulating (tg_index_update). */
static PyObject *graph_index_update(GraphObject *go, PyObject *args) {
    PyObject *xo, *idx, *yo;
    int inc;
    tg_var *x, *y;
    tg_index it[TG_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "OOOp", &xo, &idx, &yo, &inc) || !var_arg(go, xo, &x) ||
        !var_arg(go, yo, &y))
        return NULL;
    int n = index_items(go, idx, true, it);
    return n < 0 ? NULL : var_wrap(go, tg_index_update(go->g, x, it, n, y, inc));
}

static PyObject *vars_list(GraphObject *go, tg_var **vs, int n) {
    PyObject *r = PyList_New(n);
    for (int i = 0; r && i < n; i++) {
        PyObject *e = var_wrap(go, vs[i]);
        if (!e)
            Py_CLEAR(r);
        else
            PyList_SET_ITEM(r, i, e);
    }
    return r;
}

/* grad(cost, wrt, zero_disconnected=False) -> list of Vars. */
static PyObject *graph_grad(GraphObject *go, PyObject *args) {
    PyObject *co, *wrto;
    int zero = 0;
    tg_var *cost, **wrt;
    if (!PyArg_ParseTuple(args, "OO|p", &co, &wrto, &zero) || !var_arg(go, co, &cost)) return NULL;
    int n = vars_arg(go, wrto, &wrt);
    if (n < 0) return NULL;
    tg_var **out = PyMem_Calloc((size_t)(n ? n : 1), sizeof *out);
    PyObject *r = NULL;
    if (!out)
        PyErr_NoMemory();
    else if (tg_grad(go->g, cost, wrt, n, zero ? TG_DISCONNECTED_ZERO : TG_DISCONNECTED_ERROR,
                     out) != TG_OK)
        r = graph_fail(go);
    else
        r = vars_list(go, out, n);
    PyMem_Free(out);
    PyMem_Free(wrt);
    return r;
}

static PyObject *graph_update(GraphObject *go, PyObject *args) {
    PyObject *so, *vo;
    tg_var *s, *v;
    if (!PyArg_ParseTuple(args, "OO", &so, &vo) || !var_arg(go, so, &s) || !var_arg(go, vo, &v))
        return NULL;
    if (tg_update(go->g, s, v) != TG_OK) return graph_fail(go);
    Py_RETURN_NONE;
}

static PyObject *graph_set_outputs(GraphObject *go, PyObject *outs) {
    tg_var **vs;
    int n = vars_arg(go, outs, &vs);
    if (n < 0) return NULL;
    tg_status st = tg_graph_set_outputs(go->g, vs, n);
    PyMem_Free(vs);
    if (st != TG_OK) return graph_fail(go);
    Py_RETURN_NONE;
}

static PyObject *graph_vars(GraphObject *go, bool outputs) {
    int n = outputs ? tg_graph_output_count(go->g) : tg_graph_input_count(go->g);
    PyObject *r = PyList_New(n);
    for (int i = 0; r && i < n; i++) {
        PyObject *e = var_wrap(go, outputs ? tg_graph_output(go->g, i) : tg_graph_input(go->g, i));
        if (!e)
            Py_CLEAR(r);
        else
            PyList_SET_ITEM(r, i, e);
    }
    return r;
}

static PyObject *graph_inputs(GraphObject *go, PyObject *unused) { return graph_vars(go, false); }
static PyObject *graph_outputs(GraphObject *go, PyObject *unused) { return graph_vars(go, true); }

/* call(callee, args) -> list of the callee's outputs applied to args. */
static PyObject *graph_call(GraphObject *go, PyObject *args) {
    PyObject *callee, *argso;
    if (!PyArg_ParseTuple(args, "O!O", &GraphType, &callee, &argso)) return NULL;
    tg_var **vs;
    int n = vars_arg(go, argso, &vs);
    if (n < 0) return NULL;
    tg_var *outs[64];
    int nout = 64;
    PyObject *r = tg_call(go->g, ((GraphObject *)callee)->g, vs, n, outs, &nout) == TG_OK
                      ? vars_list(go, outs, nout)
                      : graph_fail(go);
    PyMem_Free(vs);
    return r;
}

/* in_axes / out_axes of vectorize: a list of ints and Nones (TG_AXIS_NONE), n entries. */
static int *axes_arg(PyObject *seq, Py_ssize_t n, const char *what) {
    PyObject *f = PySequence_Fast(seq, "expected a list of axes");
    if (!f) return NULL;
    if (PySequence_Fast_GET_SIZE(f) != n) {
        PyErr_Format(PyExc_ValueError, "vectorize: %zd %s for %zd entries",
                     PySequence_Fast_GET_SIZE(f), what, n);
        Py_DECREF(f);
        return NULL;
    }
    int *ax = PyMem_Malloc(sizeof *ax * (size_t)(n ? n : 1));
    for (Py_ssize_t i = 0; ax && i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(f, i);
        long v = o == Py_None ? (long)TG_AXIS_NONE : PyLong_AsLong(o);
        if (v == -1 && PyErr_Occurred()) {
            PyMem_Free(ax);
            ax = NULL;
            break;
        }
        ax[i] = (int)v;
    }
    Py_DECREF(f);
    if (!ax && !PyErr_Occurred()) PyErr_NoMemory();
    return ax;
}

/* vectorize(f, args, in_axes, out_axes) -> list: tg_vectorize; out_axes None: every 0. */
static PyObject *graph_vectorize(GraphObject *go, PyObject *args) {
    PyObject *f, *argso, *ino, *outo;
    if (!PyArg_ParseTuple(args, "O!OOO", &GraphType, &f, &argso, &ino, &outo)) return NULL;
    tg_graph *fg = ((GraphObject *)f)->g;
    tg_var **vs;
    int n = vars_arg(go, argso, &vs);
    if (n < 0) return NULL;
    int *in_axes = axes_arg(ino, n, "in_axes");
    int *out_axes =
        in_axes && outo != Py_None ? axes_arg(outo, tg_graph_output_count(fg), "out_axes") : NULL;
    PyObject *r = NULL;
    if (in_axes && (outo == Py_None || out_axes)) {
        tg_var *outs[64];
        int nout = 64;
        r = tg_vectorize(go->g, fg, vs, n, in_axes, out_axes, outs, &nout) == TG_OK
                ? vars_list(go, outs, nout)
                : graph_fail(go);
    }
    PyMem_Free(vs);
    PyMem_Free(in_axes);
    PyMem_Free(out_axes);
    return r;
}

/* Text written by a printer into a memory stream. */
static PyObject *printed(tg_status (*print)(const tg_graph *, FILE *), const tg_graph *g) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return PyErr_SetFromErrno(PyExc_OSError);
    tg_status st = print(g, f);
    fclose(f);
    PyObject *r = st == TG_OK ? PyUnicode_FromStringAndSize(buf, (Py_ssize_t)len) : fail_last();
    free(buf);
    return r;
}

static PyObject *graph_text(GraphObject *go, PyObject *unused) {
    return printed(tg_graph_print, go->g);
}

static PyObject *graph_dot(GraphObject *go, PyObject *unused) {
    return printed(tg_graph_print_dot, go->g);
}

static PyObject *graph_set_device(GraphObject *go, PyObject *arg) {
    const char *dev = arg == Py_None ? NULL : PyUnicode_AsUTF8(arg);
    if (arg != Py_None && !dev) return NULL;
    if (tg_graph_set_device(go->g, dev) != TG_OK) return fail_last();
    Py_RETURN_NONE;
}

static PyObject *graph_get_device(GraphObject *go, void *unused) {
    const char *d = tg_graph_device(go->g);
    if (!d) Py_RETURN_NONE;
    return PyUnicode_FromString(d);
}

static PyObject *graph_set_mapped(GraphObject *go, PyObject *args) {
    const char *axis;
    PyObject *mo;
    if (!PyArg_ParseTuple(args, "sO", &axis, &mo)) return NULL;
    PyObject *f = PySequence_Fast(mo, "mapped: expected a sequence of bools");
    if (!f) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    bool *m = PyMem_Calloc((size_t)(n ? n : 1), sizeof *m);
    for (Py_ssize_t i = 0; m && i < n; i++)
        m[i] = PyObject_IsTrue(PySequence_Fast_GET_ITEM(f, i)) == 1;
    Py_DECREF(f);
    if (!m) return PyErr_NoMemory();
    tg_status st = tg_graph_set_mapped(go->g, axis, m, (int)n);
    PyMem_Free(m);
    if (st != TG_OK) return fail_last();
    Py_RETURN_NONE;
}

static PyObject *graph_get_error(GraphObject *go, void *unused) {
    if (tg_graph_status(go->g) == TG_OK) Py_RETURN_NONE;
    return PyUnicode_FromString(tg_graph_error(go->g));
}

static PyObject *graph_get_node_count(GraphObject *go, void *unused) {
    return PyLong_FromLong(tg_graph_node_count(go->g));
}

static PyObject *graph_get_name(GraphObject *go, void *unused) {
    return PyUnicode_FromString(tg_graph_name(go->g));
}

/* ---- Function ----------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall; /* function_call */
    tg_fn *fn;
    PyObject *graph; /* the compiled graph (freed after fn) */
    int nin, nout;
    bool single; /* return the one output itself, not a list */
    tg_dtype in_dt[];
} FunctionObject;

static const struct {
    const char *name;
    tg_mode mode;
} modes[] = {{"vm", TG_MODE_VM},
             {"c", TG_MODE_C},
             {"reference", TG_MODE_REFERENCE},
             {"debug", TG_MODE_DEBUG}};

static PyObject *function_call(PyObject *self, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames);

/* compile(mode="vm", single=True, nthreads=0, no_rewrite=False, profile=False) */
static PyObject *graph_compile(GraphObject *go, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"mode", "single", "nthreads", "no_rewrite", "profile", NULL};
    const char *mname = "vm";
    int single = 1, nthreads = 0, no_rewrite = 0, profile = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|spipp", kwlist, &mname, &single, &nthreads,
                                     &no_rewrite, &profile))
        return NULL;
    int m = -1;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(modes[i].name, mname) == 0) m = (int)i;
    if (m < 0) return PyErr_Format(Error, "unknown mode '%s' (vm, c, reference or debug)", mname);
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = modes[m].mode, .nthreads = nthreads,
                                        .no_rewrite = no_rewrite, .profile = profile);
    tg_fn *fn = NULL;
    tg_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tg_graph_compile(go->g, &o, &fn);
    Py_END_ALLOW_THREADS
    if (st != TG_OK) return fail_last();
    int nin = 0;
    for (int i = 0; i < tg_graph_input_count(go->g); i++)
        nin += !tg_var_is_state(tg_graph_input(go->g, i));
    FunctionObject *f = PyObject_NewVar(FunctionObject, &FunctionType, nin);
    if (!f) {
        tg_fn_free(fn);
        return NULL;
    }
    f->vectorcall = function_call;
    f->fn = fn;
    Py_INCREF(go);
    f->graph = (PyObject *)go;
    f->nin = nin;
    f->nout = tg_graph_output_count(go->g);
    f->single = single && f->nout == 1;
    for (int i = 0, k = 0; i < tg_graph_input_count(go->g); i++)
        if (!tg_var_is_state(tg_graph_input(go->g, i)))
            f->in_dt[k++] = tg_var_dtype(tg_graph_input(go->g, i));
    return (PyObject *)f;
}

static void function_dealloc(FunctionObject *f) {
    tg_fn_free(f->fn);
    Py_DECREF(f->graph);
    PyObject_Free(f);
}

#define SMALL 16 /* inputs and outputs on the stack */

/* The call: positional arrays in, an array (or a list) out (vectorcall: no tuple). */
static PyObject *function_call(PyObject *self, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
    FunctionObject *f = (FunctionObject *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames && PyTuple_GET_SIZE(kwnames) > 0)
        return fail("a compiled function takes positional arguments only");
    if (nargs != f->nin)
        return PyErr_Format(Error, "function takes %d inputs, got %zd", f->nin, nargs);
    tg_tensor *in_s[SMALL], *out_s[SMALL];
    bool owned_s[SMALL];
    tg_tensor **in = f->nin <= SMALL ? in_s : PyMem_Malloc(sizeof *in * (size_t)f->nin);
    bool *owned = f->nin <= SMALL ? owned_s : PyMem_Malloc(sizeof *owned * (size_t)f->nin);
    tg_tensor **out = f->nout <= SMALL ? out_s : PyMem_Malloc(sizeof *out * (size_t)f->nout);
    PyObject *r = NULL;
    int got = 0;
    if (!in || !owned || !out) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < f->nin; got++) {
        in[got] = tensor_arg(args[got], f->in_dt[got], &owned[got], got);
        if (!in[got]) goto done;
    }
    for (int i = 0; i < f->nout; i++) out[i] = NULL;
    tg_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tg_fn_call(f->fn, in, f->nin, out, f->nout);
    Py_END_ALLOW_THREADS
    if (st != TG_OK) {
        fail_last();
        goto done;
    }
    if (f->single) {
        r = ndarray_owning(out[0]);
    } else {
        r = PyList_New(f->nout);
        for (int i = 0; i < f->nout; i++) {
            PyObject *a = r ? ndarray_owning(out[i]) : (tg_tensor_free(out[i]), NULL);
            if (r && !a)
                Py_CLEAR(r);
            else if (r)
                PyList_SET_ITEM(r, i, a);
        }
    }
done:
    for (int i = 0; i < got; i++)
        if (owned[i]) tg_tensor_free(in[i]);
    if (in != in_s) PyMem_Free(in);
    if (owned != owned_s) PyMem_Free(owned);
    if (out != out_s) PyMem_Free(out);
    return r;
}

static PyObject *function_state_names(FunctionObject *f, PyObject *unused) {
    int n = tg_fn_state_count(f->fn);
    PyObject *r = PyList_New(n);
    for (int i = 0; r && i < n; i++)
        PyList_SET_ITEM(r, i, PyUnicode_FromString(tg_fn_state_name(f->fn, i)));
    return r;
}

static int state_index(FunctionObject *f, PyObject *key) {
    int i = PyUnicode_Check(key) ? tg_fn_state_find(f->fn, PyUnicode_AsUTF8(key))
                                 : (int)PyLong_AsLong(key);
    if (PyErr_Occurred()) return -1;
    if (i < 0 || i >= tg_fn_state_count(f->fn)) {
        PyErr_Format(Error, "no state %R in this function", key);
        return -1;
    }
    return i;
}

/* state(i or name) -> Tensor sharing the state's current buffer (valid as data until the
 * next call, which may update it in place). */
static PyObject *function_state(FunctionObject *f, PyObject *key) {
    int i = state_index(f, key);
    if (i < 0) return NULL;
    tg_tensor *t = tg_fn_state(f->fn, i);
    if (!t) return fail_last();
    tg_tensor *v = tg_tensor_view(t, tg_tensor_ndim(t), tg_tensor_shape(t), tg_tensor_strides(t),
                                  tg_tensor_offset(t));
    return v ? tensor_wrap(v) : fail_last();
}

static PyObject *function_state_set(FunctionObject *f, PyObject *args) {
    PyObject *key, *val;
    if (!PyArg_ParseTuple(args, "OO", &key, &val)) return NULL;
    int i = state_index(f, key);
    if (i < 0) return NULL;
    tg_tensor *cur = tg_fn_state(f->fn, i);
    tg_dtype dt = cur ? tg_tensor_dtype(cur) : TG_DT_COUNT;
    if (dt == TG_DT_COUNT) {
        /* a state with '?' extents not set yet: its dtype from the graph */
        GraphObject *go = (GraphObject *)f->graph;
        const char *name = tg_fn_state_name(f->fn, i);
        for (int k = 0; k < tg_graph_input_count(go->g); k++) {
            const char *vn = tg_var_name(tg_graph_input(go->g, k));
            if (vn && strcmp(vn, name) == 0) dt = tg_var_dtype(tg_graph_input(go->g, k));
        }
    }
    if (dt == TG_DT_COUNT)
        return PyErr_Format(Error, "state '%s' has no input of that name in the graph",
                            tg_fn_state_name(f->fn, i));
    bool owned;
    tg_tensor *t = tensor_arg(val, dt, &owned, 0);
    if (!t) return NULL;
    tg_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tg_fn_state_set(f->fn, i, t);
    Py_END_ALLOW_THREADS
    if (owned) tg_tensor_free(t);
    if (st != TG_OK) return fail_last();
    Py_RETURN_NONE;
}

static PyObject *function_profile(FunctionObject *f, PyObject *unused) {
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    if (!fp) return PyErr_SetFromErrno(PyExc_OSError);
    tg_status st = tg_fn_profile_print(f->fn, fp);
    fclose(fp);
    PyObject *r = st == TG_OK ? PyUnicode_FromStringAndSize(buf, (Py_ssize_t)len) : fail_last();
    free(buf);
    return r;
}

static PyObject *function_get_graph(FunctionObject *f, void *unused) {
    Py_INCREF(f->graph);
    return f->graph;
}

static PyObject *function_get_nin(FunctionObject *f, void *unused) {
    return PyLong_FromLong(f->nin);
}

static PyMethodDef function_methods[] = {
    {"state_names", (PyCFunction)function_state_names, METH_NOARGS, "names of the states"},
    {"state", (PyCFunction)function_state, METH_O, "current value of a state (shared)"},
    {"state_set", (PyCFunction)function_state_set, METH_VARARGS, "copies a value into a state"},
    {"profile", (PyCFunction)function_profile, METH_NOARGS, "per-node profile (profile=True)"},
    {NULL},
};

static PyGetSetDef function_getset[] = {
    {"graph", (getter)function_get_graph, NULL, "the compiled graph", NULL},
    {"nin", (getter)function_get_nin, NULL, "inputs taken by a call", NULL},
    {NULL},
};

static PyTypeObject FunctionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tgraph.CompiledFunction",
    .tp_basicsize = sizeof(FunctionObject),
    .tp_itemsize = sizeof(tg_dtype),
    .tp_dealloc = (destructor)function_dealloc,
    .tp_vectorcall_offset = offsetof(FunctionObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A compiled tgraph function: call it with arrays, get arrays back.",
    .tp_methods = function_methods,
    .tp_getset = function_getset,
};

static PyMethodDef graph_methods[] = {
    {"input", (PyCFunction)graph_input, METH_VARARGS, "input(name, dtype, shape) -> Var"},
    {"state", (PyCFunction)graph_state, METH_VARARGS, "state(name, dtype, shape) -> Var"},
    {"literal", (PyCFunction)graph_literal, METH_O, "weak literal from a Python scalar"},
    {"constant", (PyCFunction)graph_constant, METH_O, "constant holding a copy of an array"},
    {"apply", (PyCFunction)graph_apply, METH_VARARGS, "apply(op, inputs, attrs, multi)"},
    {"slice", (PyCFunction)graph_slice, METH_VARARGS, "basic slicing"},
    {"index", (PyCFunction)graph_index, METH_VARARGS, "indexing with index arrays and masks"},
    {"index_update", (PyCFunction)graph_index_update, METH_VARARGS,
     "a copy of x with x[items] set to y, or incremented by it"},
    {"grad", (PyCFunction)graph_grad, METH_VARARGS, "grad(cost, wrt, zero) -> list"},
    {"update", (PyCFunction)graph_update, METH_VARARGS, "update(state, value)"},
    {"set_outputs", (PyCFunction)graph_set_outputs, METH_O, "sets the returned values"},
    {"inputs", (PyCFunction)graph_inputs, METH_NOARGS, "the inputs, states included"},
    {"outputs", (PyCFunction)graph_outputs, METH_NOARGS, "the returned values"},
    {"call", (PyCFunction)graph_call, METH_VARARGS, "call(callee, args) -> list"},
    {"vectorize", (PyCFunction)graph_vectorize, METH_VARARGS,
     "vectorize(f, args, in_axes, out_axes) -> list"},
    {"set_mapped", (PyCFunction)graph_set_mapped, METH_VARARGS, "declares a pmap body"},
    {"set_device", (PyCFunction)graph_set_device, METH_O, "device scope (None ends it)"},
    {"text", (PyCFunction)graph_text, METH_NOARGS, ".tg text"},
    {"dot", (PyCFunction)graph_dot, METH_NOARGS, "Graphviz text"},
    {"compile", (PyCFunction)(void (*)(void))graph_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(mode='vm', single=True, nthreads=0, no_rewrite=False, profile=False)"},
    {NULL},
};

static PyGetSetDef graph_getset[] = {
    {"error", (getter)graph_get_error, NULL, "first error, or None", NULL},
    {"name", (getter)graph_get_name, NULL, "name", NULL},
    {"node_count", (getter)graph_get_node_count, NULL, "nodes in the graph", NULL},
    {"device", (getter)graph_get_device, NULL, "current device scope", NULL},
    {NULL},
};

static PyTypeObject GraphType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tgraph._tgraph.Graph",
    .tp_basicsize = sizeof(GraphObject),
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A tgraph graph (low level): builders, gradients, compilation.",
    .tp_methods = graph_methods,
    .tp_getset = graph_getset,
    .tp_new = graph_new,
};

/* ---- Module ------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    tg_module *m;
} ModuleObject;

static void module_dealloc(ModuleObject *o) {
    tg_module_free(o->m);
    PyObject_Free(o);
}

static PyObject *module_wrap(tg_module *m) {
    ModuleObject *o = PyObject_New(ModuleObject, &ModuleType);
    if (!o) {
        tg_module_free(m);
        return NULL;
    }
    o->m = m;
    return (PyObject *)o;
}

static PyObject *module_names(ModuleObject *o, PyObject *unused) {
    int n = tg_module_func_count(o->m);
    PyObject *r = PyList_New(n);
    for (int i = 0; r && i < n; i++)
        PyList_SET_ITEM(r, i, PyUnicode_FromString(tg_graph_name(tg_module_func(o->m, i))));
    return r;
}

static PyObject *module_graph(ModuleObject *o, PyObject *name) {
    const char *s = PyUnicode_AsUTF8(name);
    if (!s) return NULL;
    tg_graph *g = tg_module_find(o->m, s);
    if (!g) return PyErr_Format(PyExc_KeyError, "no function '%s' in this module", s);
    GraphObject *go = (GraphObject *)GraphType.tp_alloc(&GraphType, 0);
    if (!go) return NULL;
    go->g = g;
    Py_INCREF(o);
    go->module = (PyObject *)o;
    return (PyObject *)go;
}

static PyObject *module_text(ModuleObject *o, PyObject *unused) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return PyErr_SetFromErrno(PyExc_OSError);
    tg_status st = tg_module_print(o->m, f);
    fclose(f);
    PyObject *r = st == TG_OK ? PyUnicode_FromStringAndSize(buf, (Py_ssize_t)len) : fail_last();
    free(buf);
    return r;
}

static PyMethodDef module_methods[] = {
    {"names", (PyCFunction)module_names, METH_NOARGS, "the functions' names, in order"},
    {"graph", (PyCFunction)module_graph, METH_O, "the function of that name, as a Graph"},
    {"text", (PyCFunction)module_text, METH_NOARGS, ".tg text"},
    {NULL},
};

static PyTypeObject ModuleType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tgraph._tgraph.Module",
    .tp_basicsize = sizeof(ModuleObject),
    .tp_dealloc = (destructor)module_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Functions parsed from .tg text.",
    .tp_methods = module_methods,
};

static PyObject *py_load(PyObject *self, PyObject *arg) {
    PyObject *path;
    if (!PyUnicode_FSConverter(arg, &path)) return NULL;
    tg_module *m = NULL;
    tg_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tg_module_load(NULL, PyBytes_AS_STRING(path), &m);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    return st == TG_OK ? module_wrap(m) : fail_last();
}

static PyObject *py_parse(PyObject *self, PyObject *args) {
    const char *src, *name = "<string>";
    Py_ssize_t len;
    if (!PyArg_ParseTuple(args, "s#|s", &src, &len, &name)) return NULL;
    tg_module *m = NULL;
    if (tg_module_parse(NULL, src, (size_t)len, name, &m) != TG_OK) return fail_last();
    return module_wrap(m);
}

/* ---- devices ------------------------------------------------------------------------ */
static PyObject *py_devices(PyObject *self, PyObject *unused) {
    int n = tg_devices_count();
    if (n < 0) return fail_last();
    PyObject *r = PyList_New(n);
    for (int i = 0; r && i < n; i++)
        PyList_SET_ITEM(r, i, PyUnicode_FromString(tg_devices_name(i)));
    return r;
}

static PyObject *py_devices_configure(PyObject *self, PyObject *args) {
    int host = -1, sim = -1;
    if (!PyArg_ParseTuple(args, "|ii", &host, &sim)) return NULL;
    if (tg_devices_configure(host, sim) != TG_OK) return fail_last();
    Py_RETURN_NONE;
}

static PyObject *py_blas_guard(PyObject *self, PyObject *unused) {
    const char *g;
    Py_BEGIN_ALLOW_THREADS
    g = tg_blas_guard(); /* may run a probe product */
    Py_END_ALLOW_THREADS
    return PyUnicode_FromString(g);
}

static PyMethodDef module_functions[] = {
    {"blas_guard", py_blas_guard, METH_NOARGS,
     "how concurrent BLAS calls are kept safe (docs/hardening.md)"},
    {"from_dlpack", py_from_dlpack, METH_O, "Tensor sharing a DLPack producer's memory"},
    {"tensor_copy", py_tensor_copy, METH_VARARGS, "Tensor holding a copy of an array"},
    {"load", py_load, METH_O, "parses a .tg file into a Module"},
    {"parse", py_parse, METH_VARARGS, "parses .tg text into a Module"},
    {"devices", py_devices, METH_NOARGS, "names of the devices"},
    {"devices_configure", py_devices_configure, METH_VARARGS,
     "devices_configure(host, sim): -1 reads the environment"},
    {NULL},
};

static struct PyModuleDef tgraph_module = {
    PyModuleDef_HEAD_INIT, .m_name = "_tgraph",           .m_doc = "tgraph's C core (low level).",
    .m_size = -1,          .m_methods = module_functions,
};

PyMODINIT_FUNC PyInit__tgraph(void) {
    import_array();
    PyTypeObject *types[] = {&TensorType, &GraphType, &VarType, &FunctionType, &ModuleType};
    const char *names[] = {"Tensor", "Graph", "Var", "CompiledFunction", "Module"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (PyType_Ready(types[i]) < 0) return NULL;
    PyObject *m = PyModule_Create(&tgraph_module);
    if (!m) return NULL;
    Error = PyErr_NewExceptionWithDoc("tgraph.Error", "A tgraph error, with its message.",
                                      PyExc_RuntimeError, NULL);
    if (!Error || PyModule_AddObject(m, "Error", Error) < 0) return NULL;
    Py_INCREF(Error);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], (PyObject *)types[i]) < 0) return NULL;
    }
    PyModule_AddStringConstant(m, "version", TG_VERSION);
    return m;
}
