# The Python package's _cuda.py before the fifty-first session (one workspace per device, shared by every stream):
# kept to show that tests/python/test_cuda.py::test_two_streams_at_once fails on it (docs/perf/s51/run2.sh).
# _cuda.py — what a CUDA call needs from torch: the per-device workspace (cached, grown as needed, never
# allocated while a CUDA graph is being captured), the launch on torch's current stream, and the reading of
# the device-side status record that the CUDA backend writes into the workspace on every call.
import ctypes
import sys

from ._lib import (BACKEND_CUDA, DEVICE_FLAGS, ERR_WORKSPACE, DeviceStatusRecord, KvattnArgumentError,
                   KvattnError, check, lib)

_MIB = 1 << 20
_workspaces = {}  # CUDA device index -> torch.uint8 tensor (the cached workspace of that device)
_ws_streams = {}  # CUDA device index -> the streams (cuda_stream handles) the cached workspace was used on
_captured = []    # workspaces a captured CUDA graph refers to: kept alive for as long as the process runs


def _torch():
    torch = sys.modules.get("torch")
    if torch is None:
        import torch  # noqa: F811 - only reached by CUDA users, who have torch
    return torch


def _device_index(device):
    torch = _torch()
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "cuda":
        raise KvattnArgumentError(f"device: {d} is not a CUDA device")
    return d.index if d.index is not None else torch.cuda.current_device()


def _workspace(torch, index, nbytes):
    """The cached workspace of device `index`, grown to at least nbytes. During CUDA graph capture it is never
    (re)allocated: an allocation made inside a capture belongs to the graph's private pool and must not be
    cached, so a too small workspace there is an error that says how to avoid it."""
    ws = _workspaces.get(index)
    if ws is not None and ws.numel() >= nbytes:
        return ws
    if torch.cuda.is_current_stream_capturing():
        have = 0 if ws is None else ws.numel()
        raise KvattnError(
            ERR_WORKSPACE,
            f"this call needs a workspace of {nbytes} bytes on cuda:{index} but the cached one has {have} and a "
            f"CUDA graph is being captured, when kvattn never allocates: run the same call once before the "
            f"capture (warm-up) or call kvattn.reserve_workspace({nbytes}, device={index}) first",
            "kvattn_forward")
    size = max(_MIB, (nbytes + _MIB - 1) // _MIB * _MIB)
    # the old workspace may still be read by kernels queued on the streams that used it: launch() marked it
    # with record_stream for each of them, so the caching allocator reuses its memory only after that work. A
    # workspace that a captured graph uses stays alive in _captured: replays keep using it, eager calls use the
    # new one.
    ws = torch.empty(size, dtype=torch.uint8, device=f"cuda:{index}")
    _workspaces[index] = ws
    _ws_streams[index] = set()
    return ws


def reserve_workspace(nbytes, device=None):
    """Makes sure the cached workspace of `device` (default: the current CUDA device) has at least `nbytes`
    bytes, allocating it now. Call it before capturing a CUDA graph when the first captured call would need
    a larger workspace than any call made before (kvattn never allocates during a capture).
    Returns the workspace tensor (torch.uint8, 1-D)."""
    torch = _torch()
    index = _device_index(device)
    return _workspace(torch, index, int(nbytes))


def workspace(device=None):
    """Returns the cached workspace tensor of `device` (torch.uint8), or None before the first CUDA call."""
    return _workspaces.get(_device_index(device))


def launch(params_ref, device_index):
    """kvattn_forward on the CUDA backend, on torch's current stream of that device."""
    torch = _torch()
    with torch.cuda.device(device_index):
        nbytes = ctypes.c_size_t(0)
        check(lib.kvattn_workspace_size(params_ref, BACKEND_CUDA, ctypes.byref(nbytes)), "kvattn_workspace_size")
        ws = _workspace(torch, device_index, nbytes.value)
        current = torch.cuda.current_stream(device_index)
        stream = current.cuda_stream
        if torch.cuda.is_current_stream_capturing():
            if not any(w is ws for w in _captured):
                _captured.append(ws)
        else:
            seen = _ws_streams.setdefault(device_index, set())
            if stream not in seen:
                # the workspace may be dropped (grown) later while this stream still has work queued that uses it
                ws.record_stream(current)
                seen.add(stream)
        check(lib.kvattn_forward(params_ref, BACKEND_CUDA, ctypes.c_void_p(ws.data_ptr()), ws.numel(),
                                 ctypes.c_void_p(stream)), "kvattn_forward")


class DeviceStatus:
    """The device-side status record of the last CUDA call on a device (kvattn_device_status).

    flags: OR of the failure reasons (see `reasons`); num_failed: sequences skipped; first_failed: smallest
    index of a skipped sequence or -1. ``ok`` is True when no sequence failed."""

    __slots__ = ("flags", "num_failed", "first_failed")

    def __init__(self, flags, num_failed, first_failed):
        self.flags, self.num_failed, self.first_failed = int(flags), int(num_failed), int(first_failed)

    @property
    def ok(self):
        return self.flags == 0 and self.num_failed == 0

    @property
    def reasons(self):
        return [name for bit, name in DEVICE_FLAGS.items() if self.flags & bit]

    def __repr__(self):
        return (f"DeviceStatus(flags={self.flags:#x} {self.reasons}, num_failed={self.num_failed}, "
                f"first_failed={self.first_failed})")


def _cached(index, ws=None):
    if ws is not None:
        return ws
    ws = _workspaces.get(index)
    if ws is None:
        raise KvattnArgumentError(f"device: no kvattn CUDA call has run on cuda:{index} yet, so there is no status")
    return ws


def device_status(device=None, workspace=None, stream=None):
    """Reads the status record of the last CUDA call on `device` (default: current device). This waits for
    `stream` (default: torch's current stream of that device) to reach that point (a stream synchronization):
    pass the stream the call ran on if it is not the current one, or the read may not wait for the call.
    Returns a DeviceStatus. workspace: read this workspace tensor instead of the device's cached one (e.g. the
    one a CUDA graph was captured with, `kvattn.workspace()` taken right after the capture, if the cache grew
    since)."""
    torch = _torch()
    index = _device_index(device)
    ws = _cached(index, workspace)
    rec = DeviceStatusRecord()
    with torch.cuda.device(index):
        if stream is None:
            stream = torch.cuda.current_stream(index)
        if not isinstance(stream, torch.cuda.Stream):
            raise KvattnArgumentError(f"stream: expected a torch.cuda.Stream, got {type(stream).__name__}")
        if stream.device.index != index:
            raise KvattnArgumentError(f"stream: is on cuda:{stream.device.index} but the status is read on cuda:{index}")
        stream = stream.cuda_stream
        check(lib.kvattn_device_status_read(ctypes.c_void_p(ws.data_ptr()), ctypes.c_void_p(stream),
                                            ctypes.byref(rec)), "kvattn_device_status_read")
    return DeviceStatus(rec.flags, rec.num_failed, rec.first_failed)


def device_status_tensor(device=None, workspace=None):
    """Non-blocking: returns an int32 CUDA tensor of 4 elements [flags, num_failed, first_failed, reserved]
    that is a VIEW of the status record inside the cached workspace (at kvattn_device_status_offset()).
    Every later CUDA call on the device overwrites it (stream-ordered), so copy it (e.g.
    ``.clone()`` or ``.to('cpu', non_blocking=True)`` into pinned memory) right after the call you want to
    check. A view taken before the workspace grew keeps pointing at the old one: take it after the call."""
    index = _device_index(device)
    ws = _cached(index, workspace)
    off = int(lib.kvattn_device_status_offset())
    return ws[off:off + ctypes.sizeof(DeviceStatusRecord)].view(_torch().int32)


def check_device_status(device=None, workspace=None, stream=None):
    """Reads the status (synchronizing `stream`, as device_status) and raises KvattnError(KVATTN_ERR_BAD_DATA) if
    any sequence of the last CUDA call on `device` failed its data checks and was skipped. Returns the
    DeviceStatus otherwise."""
    st = device_status(device, workspace, stream)
    if not st.ok:
        from ._lib import ERR_BAD_DATA

        raise KvattnError(ERR_BAD_DATA, f"the last CUDA call skipped {st.num_failed} sequence(s) "
                                        f"(first: {st.first_failed}; reasons: {', '.join(st.reasons)})",
                          "kvattn_device_status")
    return st
