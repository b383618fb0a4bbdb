# kvattn — exact attention over ragged batches and in-place (paged) KV caches, from Python: the
# flash-attention-compatible functions over the C library (libkvattn.so, loaded with ctypes), for torch
# tensors (CPU or CUDA) and NumPy arrays (CPU). See python/README.md for the differences from flash-attention.
from ._version import __version__
from ._lib import (KvattnArgumentError, KvattnError, KvattnTypeError, cuda_available, last_error, library_path,
                   status_name, version)
from ._cuda import (DeviceStatus, check_device_status, device_status, device_status_tensor, reserve_workspace,
                    workspace)
from .attention import flash_attn_varlen_func, flash_attn_varlen_func_with_kvcache, flash_attn_with_kvcache
from .paged import PagedKVCache

__all__ = [
    "__version__", "KvattnError", "KvattnArgumentError", "KvattnTypeError", "cuda_available", "version",
    "last_error", "library_path", "status_name", "DeviceStatus", "device_status", "device_status_tensor",
    "check_device_status", "reserve_workspace", "workspace", "flash_attn_varlen_func",
    "flash_attn_varlen_func_with_kvcache", "flash_attn_with_kvcache", "PagedKVCache",
]
