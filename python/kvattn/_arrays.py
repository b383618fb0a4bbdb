# _arrays.py — one view over torch tensors and NumPy arrays (pointer, shape, element strides, dtype, device)
# and the checks the C layer cannot make: array kind and device consistency, dtypes, shapes, contiguity.
# torch is never imported here: a tensor is recognised through sys.modules, so NumPy users never load it.
import ctypes
import sys

import numpy as np

from ._lib import ERR_UNSUPPORTED, F16, F32, BF16, KvattnArgumentError, KvattnError, KvattnTypeError

try:  # NumPy has no bfloat16; ml_dtypes provides one when installed
    import ml_dtypes as _ml_dtypes

    _NP_BF16 = np.dtype(_ml_dtypes.bfloat16)
except Exception:  # pragma: no cover - optional dependency
    _ml_dtypes = None
    _NP_BF16 = None

FLOAT_CODES = {"float16": F16, "bfloat16": BF16, "float32": F32}


# An empty tensor may report a NULL data pointer (torch does). The C layer reads no element of an empty array but
# takes NULL for "absent" (a NULL rotary table turns rotary off; a NULL block table means a contiguous cache), so
# an empty array gets this address instead: 256-byte aligned, never read.
_DUMMY = ctypes.create_string_buffer(512)
DUMMY_ADDR = (ctypes.addressof(_DUMMY) + 255) // 256 * 256


def _torch():
    return sys.modules.get("torch")


def is_torch(x):
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


class Arr:
    """A tensor or array as the C call sees it. Strides are in elements."""

    __slots__ = ("obj", "name", "kind", "dtype", "shape", "strides", "ptr", "device")

    def __init__(self, obj, name):
        self.obj = obj
        self.name = name
        if isinstance(obj, np.ndarray):
            self.kind = "numpy"
            if not obj.dtype.isnative:
                # dtype.name is "float32" / "int32" for big-endian data too; the C layer reads native order
                raise KvattnTypeError(f"{name}: dtype {obj.dtype.str} is not in native byte order "
                                      f"(convert it first: a.astype(a.dtype.newbyteorder('=')))")
            self.dtype = obj.dtype.name
            self.shape = tuple(int(s) for s in obj.shape)
            item = obj.dtype.itemsize
            if any(s % item for s in obj.strides):
                raise KvattnArgumentError(
                    f"{name}: byte strides {obj.strides} are not multiples of the element size {item}")
            self.strides = tuple(int(s) // item for s in obj.strides)
            self.ptr = int(obj.ctypes.data)
            self.device = "cpu"
            itemsize = item
        elif is_torch(obj):
            self.kind = "torch"
            # sparse and nested tensors have no strides to pass (torch would raise its own error, naming nothing)
            if getattr(obj, "is_nested", False) or obj.layout != _torch().strided:
                what = "nested" if getattr(obj, "is_nested", False) else str(obj.layout).replace("torch.", "")
                raise KvattnTypeError(f"{name}: a {what} tensor is not supported; kvattn reads dense strided tensors "
                                      f"(pass a dense one, e.g. .to_dense())")
            self.dtype = str(obj.dtype).replace("torch.", "")
            self.shape = tuple(int(s) for s in obj.shape)
            self.strides = tuple(int(s) for s in obj.stride())
            self.ptr = int(obj.data_ptr())
            itemsize = int(obj.element_size())
            dev = obj.device
            self.device = "cpu" if dev.type == "cpu" else f"{dev.type}:{dev.index if dev.index is not None else 0}"
        else:
            raise KvattnTypeError(f"{name}: expected a torch.Tensor or a numpy.ndarray, got {type(obj).__name__}")
        # a dimension of extent 1 is never stepped, so its stride does not matter: a negative one (np.flip over
        # it) is made positive rather than rejected; any other negative stride is a reversed view, which the C
        # library does not take
        self.strides = tuple(-st if ext == 1 and st < 0 else st for ext, st in zip(self.shape, self.strides))
        if any(st < 0 for st in self.strides):
            raise KvattnArgumentError(f"{name}: negative strides {list(self.strides)} (a reversed view) are not "
                                      f"supported; pass a copy")
        if self.ptr == 0 and self.numel == 0:
            self.ptr = DUMMY_ADDR
        if self.ptr % itemsize:
            # e.g. np.frombuffer(buf, offset=1): the C library reads elements through typed pointers
            raise KvattnArgumentError(f"{name}: its data address {self.ptr:#x} is not a multiple of its element size "
                                      f"{itemsize}; pass an aligned copy")

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def dtype_code(self):
        return FLOAT_CODES[self.dtype]


class Call:
    """Collects the arrays of one call; checks that they are all of one kind and on one device."""

    def __init__(self):
        self.kind = None
        self.device = None
        self.first = None
        self.keep = []  # temporaries that must outlive the C call

    def add(self, obj, name, optional=True):
        if obj is None:
            if not optional:
                raise KvattnArgumentError(f"{name}: required, got None")
            return None
        a = Arr(obj, name)
        if a.kind == "torch" and obj.requires_grad and _torch().is_grad_enabled():
            # kvattn has no backward: an output that silently drops out of the autograd graph would train wrong
            raise KvattnError(ERR_UNSUPPORTED, f"{name}: requires grad, but kvattn computes the forward pass only "
                                               f"(no backward); call it under torch.no_grad() or "
                                               f"torch.inference_mode(), or pass {name}.detach()")
        if self.first is None:
            self.kind, self.device, self.first = a.kind, a.device, a
        else:
            if a.kind != self.kind:
                raise KvattnTypeError(
                    f"{name}: is a {_kind_name(a.kind)} but {self.first.name} is a {_kind_name(self.kind)}; "
                    f"pass all arrays of one kind")
            if a.device != self.device:
                raise KvattnArgumentError(
                    f"{name}: is on {a.device} but {self.first.name} is on {self.device}; all tensors of a call "
                    f"must be on one device (mixed devices are not supported)")
        if a.device != "cpu" and not a.device.startswith("cuda"):
            raise KvattnArgumentError(f"{name}: device {a.device} is not supported (cpu or cuda only)")
        return a

    @property
    def is_cuda(self):
        return self.device is not None and self.device.startswith("cuda")

    @property
    def device_index(self):
        return int(self.device.split(":")[1])

    # ---- new arrays of the call's kind, on its device --------------------------------------------------------
    def empty(self, shape, dtype):
        if self.kind == "torch":
            t = _torch()
            return t.empty(shape, dtype=_torch_dtype(dtype), device=self.device)
        return np.empty(shape, dtype=_np_dtype(dtype))

    def full(self, shape, value, dtype="int32"):
        if self.kind == "torch":
            t = _torch()
            return t.full(shape, value, dtype=_torch_dtype(dtype), device=self.device)
        return np.full(shape, value, dtype=_np_dtype(dtype))


def _kind_name(kind):
    return "torch.Tensor" if kind == "torch" else "numpy.ndarray"


def _torch_dtype(name):
    return getattr(_torch(), name)


def _np_dtype(name):
    if name == "bfloat16":
        if _NP_BF16 is None:
            raise KvattnTypeError("bfloat16 with NumPy needs the ml_dtypes package")
        return _NP_BF16
    return np.dtype(name)


# ---- checks that name the argument ------------------------------------------------------------------------------
def need_float(a, allowed=("float16", "bfloat16", "float32")):
    if a.dtype not in allowed:
        raise KvattnTypeError(f"{a.name}: dtype {a.dtype} is not supported (expected one of {', '.join(allowed)})")


def need_same_dtype(a, ref):
    if a is not None and a.dtype != ref.dtype:
        raise KvattnTypeError(f"{a.name}: dtype {a.dtype} differs from {ref.name}'s dtype {ref.dtype}")


def need_int32(a):
    if a is not None and a.dtype != "int32":
        raise KvattnTypeError(f"{a.name}: dtype {a.dtype} must be int32")


def need_ndim(a, ndim, layout):
    if a.ndim != ndim:
        raise KvattnArgumentError(f"{a.name}: expected {ndim} dimensions {layout}, got shape {list(a.shape)}")


def need_last_contiguous(a):
    if a.ndim and a.shape[-1] > 1 and a.strides[-1] != 1 and a.numel > 0:
        raise KvattnArgumentError(
            f"{a.name}: the last dimension must be contiguous (stride 1), got strides {list(a.strides)} for shape "
            f"{list(a.shape)}")


def need_index_vector(a, length, what):
    """A 1-D int32 vector read through a bare pointer by the C layer: it must be contiguous."""
    if a is None:
        return
    need_int32(a)
    if a.ndim != 1 or a.shape[0] != length:
        raise KvattnArgumentError(f"{a.name}: expected shape [{length}] ({what}), got {list(a.shape)}")
    if length > 1 and a.strides[0] != 1:
        raise KvattnArgumentError(f"{a.name}: must be contiguous, got stride {a.strides[0]}")


def need_writable(a):
    if a is None:
        return
    if a.kind == "numpy" and not a.obj.flags.writeable:
        raise KvattnArgumentError(f"{a.name}: the array is read-only but kvattn writes into it")
    if a.numel and any(st == 0 and ext > 1 for ext, st in zip(a.shape, a.strides)):
        # (an empty array has nothing to write: NumPy 2 gives a [0, H, D] array the strides (0, 0, 0))
        # NumPy's broadcast views are read-only (caught above); torch's expand() views are not
        raise KvattnArgumentError(f"{a.name}: stride 0 in a dimension of extent > 1 (shape {list(a.shape)}, strides "
                                  f"{list(a.strides)}): an expanded view, whose elements share memory, cannot be "
                                  f"written; pass a tensor with its own storage (e.g. .contiguous())")
