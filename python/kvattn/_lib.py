# _lib.py — loads libkvattn.so through ctypes, mirrors the C structs, checks version and struct size at
# import, and turns every failing C status into a KvattnError carrying the status and the C message.
import ctypes
import functools
import os

from ._version import __version__

# ---- status codes (stable numbers, as in kvattn.h) ------------------------------------------------------
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_UNSUPPORTED = 2
ERR_WORKSPACE = 3
ERR_BAD_DATA = 4
ERR_NOT_AVAILABLE = 5
ERR_OUT_OF_PAGES = 6
ERR_OUT_OF_MEMORY = 7
ERR_CUDA = 8
ERR_INTERNAL = 9

_STATUS_NAMES = {
    0: "KVATTN_OK", 1: "KVATTN_ERR_INVALID_ARGUMENT", 2: "KVATTN_ERR_UNSUPPORTED", 3: "KVATTN_ERR_WORKSPACE",
    4: "KVATTN_ERR_BAD_DATA", 5: "KVATTN_ERR_NOT_AVAILABLE", 6: "KVATTN_ERR_OUT_OF_PAGES",
    7: "KVATTN_ERR_OUT_OF_MEMORY", 8: "KVATTN_ERR_CUDA", 9: "KVATTN_ERR_INTERNAL",
}

F32, F16, BF16 = 0, 1, 2
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1  # the C library's int32 arguments and fields
BACKEND_CPU, BACKEND_CUDA = 0, 1

# device status flags (kvattn.h KVATTN_FLAG_*)
DEVICE_FLAGS = {
    1 << 0: "BAD_CU_SEQLENS",
    1 << 1: "BAD_LEFTPAD",
    1 << 2: "CAPACITY",
    1 << 3: "PAGE_INDEX",
    1 << 4: "ROTARY_RANGE",
    1 << 5: "BATCH_IDX",
}


def _rebuild_error(cls, status, message, function):
    # unpickling (an error raised in a worker process): the subclasses' constructors take other arguments
    e = cls.__new__(cls)
    KvattnError.__init__(e, status, message, function)
    return e


class KvattnError(RuntimeError):
    """An error reported by kvattn.

    Attributes: ``status`` (the C status number, see kvattn.h), ``status_name`` ("KVATTN_ERR_BAD_DATA"),
    ``message`` (the detail: for a C failure the text of kvattn_last_error(), which names the argument and
    its values, followed by "(Python: <field> is <argument>)" where it names a kvattn_params field that is not a
    Python argument; for a check made in Python, the same kind of sentence) and ``function`` (the C function that
    failed, e.g. "kvattn_forward", or for a check made in Python the public function or method it failed in,
    e.g. "flash_attn_with_kvcache", "PagedKVCache.step", "check_device_status"; None only outside the public
    functions, e.g. from the params struct's own field checks).
    """

    def __init__(self, status, message, function=None):
        self.status = int(status)
        self.status_name = status_name(self.status)
        self.message = message
        self.function = function
        # the C page manager's messages start with the function's name already: not twice
        where = f"{function}: " if function and not str(message).startswith(f"{function}: ") else ""
        super().__init__(f"{where}{self.status_name}: {message}")

    def __reduce__(self):
        return _rebuild_error, (type(self), self.status, self.message, self.function)

    def _name_function(self, function):
        """Names the public function a check made in Python failed in (those checks raise with function=None)."""
        if self.function is None:
            KvattnError.__init__(self, self.status, self.message, function)


class KvattnArgumentError(KvattnError, ValueError):
    """An argument problem (shape, device, contiguity, a value out of range, ...), found in Python before
    calling the library or reported by the library as KVATTN_ERR_INVALID_ARGUMENT. Also a ValueError."""

    def __init__(self, message, function=None):
        super().__init__(ERR_INVALID_ARGUMENT, message, function)


class KvattnTypeError(KvattnError, TypeError):
    """A wrong dtype or array type found in Python (also a TypeError; status KVATTN_ERR_INVALID_ARGUMENT)."""

    def __init__(self, message, function=None):
        super().__init__(ERR_INVALID_ARGUMENT, message, function)


def names_errors(fn):
    """Puts the public function's (or method's) own name on every KvattnError raised while it runs that carries
    none: the library's errors name their C function, the checks made in Python named none. The message then
    starts with it, e.g. "flash_attn_with_kvcache: KVATTN_ERR_INVALID_ARGUMENT: k: ..."."""
    @functools.wraps(fn)
    def named(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KvattnError as e:
            name = fn.__qualname__
            e._name_function(name[:-len(".__init__")] if name.endswith(".__init__") else name)
            raise
    return named


def status_name(status):
    return _STATUS_NAMES.get(int(status), "KVATTN_ERR_UNKNOWN")


# ---- the params struct: mirrors include/kvattn.h field by field (checked with kvattn_params_size) -------
_p = ctypes.c_void_p
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_i32p = ctypes.POINTER(ctypes.c_int32)


class Params(ctypes.Structure):
    _fields_ = [
        ("struct_size", _i64),
        ("dtype", _i32), ("batch", _i32), ("num_heads", _i32), ("num_kv_heads", _i32), ("head_dim", _i32),
        ("q", _p), ("cu_seqlens_q", _p), ("seqlen_q", _i32), ("total_q", _i32),
        ("q_batch_stride", _i64), ("q_row_stride", _i64), ("q_head_stride", _i64),
        ("k_new", _p), ("v_new", _p), ("cu_seqlens_knew", _p), ("seqlen_knew", _i32), ("total_knew", _i32),
        ("knew_batch_stride", _i64), ("knew_row_stride", _i64), ("knew_head_stride", _i64),
        ("vnew_batch_stride", _i64), ("vnew_row_stride", _i64), ("vnew_head_stride", _i64),
        ("k_cache", _p), ("v_cache", _p),
        ("k_batch_stride", _i64), ("k_row_stride", _i64), ("k_head_stride", _i64),
        ("v_batch_stride", _i64), ("v_row_stride", _i64), ("v_head_stride", _i64),
        ("cache_batch", _i32), ("cache_capacity", _i32),
        ("cache_batch_idx", _p), ("block_table", _p), ("block_table_batch_stride", _i64),
        ("max_pages_per_seq", _i32), ("num_pages", _i32), ("page_size", _i32),
        ("cache_seqlens", _p), ("cache_leftpad", _p),
        ("rotary_cos", _p), ("rotary_sin", _p), ("rotary_dtype", _i32), ("rotary_dim", _i32),
        ("rotary_max_pos", _i32), ("rotary_interleaved", _i32), ("rotary_row_stride", _i64),
        ("alibi_slopes", _p), ("alibi_batch_stride", _i64),
        ("softmax_scale", ctypes.c_float), ("softcap", ctypes.c_float), ("causal", _i32),
        ("window_left", _i32), ("window_right", _i32), ("num_splits", _i32), ("batch_invariant", _i32),
        ("out", _p), ("out_batch_stride", _i64), ("out_row_stride", _i64), ("out_head_stride", _i64),
        ("softmax_lse", _p), ("lse_batch_stride", _i64), ("lse_head_stride", _i64), ("lse_row_stride", _i64),
    ]

    def __setattr__(self, name, value):
        # ctypes wraps an out-of-range Python int silently; a shape past the C library's int32 (or a stride past
        # int64) must be an error naming the field instead
        bits = _INT_BITS.get(name)
        if bits and isinstance(value, int) and not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise KvattnArgumentError(f"{name}: {value} does not fit the C library's int{bits} field")
        super().__setattr__(name, value)


_INT_BITS = {name: (32 if t is _i32 else 64) for name, t in Params._fields_ if t in (_i32, _i64)}


class DeviceStatusRecord(ctypes.Structure):
    _fields_ = [("flags", _i32), ("num_failed", _i32), ("first_failed", _i32), ("reserved", _i32)]


# ---- loading ----------------------------------------------------------------------------------------------
_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("KVATTN_LIBRARY")
    if env:
        if os.path.isdir(env):
            env = os.path.join(env, "libkvattn.so")
        return [env], True
    repo_build = os.path.normpath(os.path.join(_HERE, "..", "..", "build", "libkvattn.so"))
    return [os.path.join(_HERE, "libkvattn.so"), repo_build], False


def _load():
    paths, from_env = _candidates()
    if from_env:
        if not os.path.isfile(paths[0]):
            raise ImportError(f"kvattn: KVATTN_LIBRARY={paths[0]!r} does not exist")
        path = paths[0]
    else:
        found = [p for p in paths if os.path.isfile(p)]
        if not found:
            raise ImportError(
                "kvattn: libkvattn.so not found (looked in "
                + ", ".join(repr(p) for p in paths)
                + "); build it with `make lib` or `pip install .`, or set KVATTN_LIBRARY to its path")
        path = found[0]
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"kvattn: cannot load {path!r}: {e}") from e
    return lib, path


lib, library_path = _load()


def _sig(name, restype, *argtypes):
    try:
        f = getattr(lib, name)
    except AttributeError:
        raise ImportError(f"kvattn: {library_path!r} is not a kvattn library (it has no {name})") from None
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_sig("kvattn_version_number", ctypes.c_uint)
_sig("kvattn_version_string", ctypes.c_char_p)
_sig("kvattn_status_string", ctypes.c_char_p, ctypes.c_int)
_sig("kvattn_last_error", ctypes.c_char_p)
_sig("kvattn_backend_available", ctypes.c_int, ctypes.c_int)
_sig("kvattn_params_size", ctypes.c_size_t)
_sig("kvattn_params_default", Params)
_sig("kvattn_validate", ctypes.c_int, ctypes.POINTER(Params), ctypes.c_int)
_sig("kvattn_workspace_size", ctypes.c_int, ctypes.POINTER(Params), ctypes.c_int, ctypes.POINTER(ctypes.c_size_t))
_sig("kvattn_forward", ctypes.c_int, ctypes.POINTER(Params), ctypes.c_int, _p, ctypes.c_size_t, _p)
_sig("kvattn_device_status_offset", ctypes.c_size_t)
_sig("kvattn_device_status_read", ctypes.c_int, _p, _p, ctypes.POINTER(DeviceStatusRecord))
_sig("kvattn_pages_create", ctypes.c_int, ctypes.POINTER(_p), _i32, _i32)
_sig("kvattn_pages_destroy", None, _p)
_sig("kvattn_pages_add_seq", ctypes.c_int, _p, _i32p)
_sig("kvattn_pages_fork", ctypes.c_int, _p, _i32, _i32, _i32p)
_sig("kvattn_pages_append", ctypes.c_int, _p, _i32, _i32)
_sig("kvattn_pages_release", ctypes.c_int, _p, _i32)
_sig("kvattn_pages_truncate", ctypes.c_int, _p, _i32, _i32)
_sig("kvattn_pages_fill", ctypes.c_int, _p, _p, _i32, _p, _p, _i64, _i32, _p)
_sig("kvattn_pages_free_count", _i32, _p)
_sig("kvattn_pages_used_count", _i32, _p)
_sig("kvattn_pages_seq_len", _i32, _p, _i32)
_sig("kvattn_pages_seq_num_pages", _i32, _p, _i32)


def _version_number(version):
    major, minor, patch = (int(x) for x in version.split("."))
    return major * 10000 + minor * 100 + patch


_lib_version = lib.kvattn_version_number()
if _lib_version != _version_number(__version__):
    raise ImportError(
        f"kvattn: the library {library_path!r} is version {lib.kvattn_version_string().decode()} "
        f"({_lib_version}) but this Python package is {__version__}; rebuild the library (`make lib`) or "
        f"reinstall the package (`pip install .`)")
if lib.kvattn_params_size() != ctypes.sizeof(Params):
    raise ImportError(
        f"kvattn: the library {library_path!r} has sizeof(kvattn_params) = {lib.kvattn_params_size()} bytes "
        f"but the Python mirror has {ctypes.sizeof(Params)}: the package and the library come from different "
        f"sources; rebuild both from one checkout")


def last_error():
    return lib.kvattn_last_error().decode("utf-8", "replace")


def check(status, function):
    """Raises KvattnError(status, kvattn_last_error()) when a C call failed: KvattnArgumentError (also a
    ValueError) for KVATTN_ERR_INVALID_ARGUMENT, so that an argument error is the same exception whether Python
    or the C library found it."""
    if status != OK:
        if status == ERR_INVALID_ARGUMENT:
            raise KvattnArgumentError(last_error(), function)
        raise KvattnError(status, last_error(), function)
    return status


def version():
    """Returns the C library's version string ("0.2.0")."""
    return lib.kvattn_version_string().decode()


def cuda_available():
    """True when the library was built with the CUDA backend and the current CUDA device can run its kernels
    (the build's CUDA_ARCH, sm_90a by default, runs on it). When False, kvattn.last_error() says why. Creates no
    CUDA context."""
    return bool(lib.kvattn_backend_available(BACKEND_CUDA))
