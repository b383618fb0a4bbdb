# _cuda.py — what a CUDA call needs from torch: the workspaces (one per device and stream for eager calls, one
# per device for calls captured in CUDA graphs; cached, grown as needed), the launch on torch's current stream,
# and the reading of the device-side status record that the CUDA backend writes into the workspace of every call.
import ctypes
import sys

from ._lib import (BACKEND_CUDA, DEVICE_FLAGS, ERR_NOT_AVAILABLE, DeviceStatusRecord, KvattnArgumentError,
                   KvattnError, check, lib, names_errors)

_MIB = 1 << 20
# A workspace holds a call's split partials, work lists and status record, so two calls that may run at the same
# time must not share one. Eager calls on one stream run one after another: each (device, stream) has its own.
# Captured calls replay on whatever stream replay() is called on, so they never use an eager workspace: the calls
# captured on a device share that device's graph workspace (replays of graphs on one device must then not
# overlap, which is already so for any tensor a graph reads and writes).
_workspaces = {}  # (device index, cuda_stream handle) -> torch.uint8 tensor: the eager workspace of that stream
_graph_ws = {}    # device index -> torch.uint8 tensor: the workspace of the calls captured in CUDA graphs
_last = {}        # (device index, cuda_stream handle) -> the workspace the last call on that stream used
_captured = []    # workspaces a captured CUDA graph refers to: kept alive for as long as the process runs


def _torch():
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch  # noqa: F811 - only reached by CUDA users, who have torch
        except ImportError:
            raise KvattnError(ERR_NOT_AVAILABLE, "the CUDA workspace and device-status helpers work on torch CUDA "
                                                 "tensors, and torch is not installed") from None
    return torch


def _torch_cuda():
    """torch, for the public helpers (workspace, status), which need a CUDA device: KVATTN_ERR_NOT_AVAILABLE when
    torch sees none, rather than torch's own error (launch() is only reached with CUDA tensors, so it skips this)."""
    torch = _torch()
    if not torch.cuda.is_available():
        raise KvattnError(ERR_NOT_AVAILABLE, "the CUDA workspace and device-status helpers need a CUDA device, and "
                                             "torch sees none")
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


def _stream(torch, index, stream):
    """The torch.cuda.Stream named by `stream` (default: the current stream of device `index`), checked."""
    if stream is None:
        return torch.cuda.current_stream(index)
    if not isinstance(stream, torch.cuda.Stream):
        raise KvattnArgumentError(f"stream: expected a torch.cuda.Stream, got {type(stream).__name__}")
    if stream.device.index != index:
        raise KvattnArgumentError(f"stream: is on cuda:{stream.device.index} but the device is cuda:{index}")
    return stream


def _workspace(torch, index, stream, nbytes, graph):
    """The cached workspace for a call on `stream` of device `index` (graph: the device's graph workspace),
    grown to at least nbytes. The torch allocator ties a block to the stream current when it was allocated and
    reuses a freed block on that stream only, in stream order: an eager workspace, allocated and used on its
    own stream, can be dropped when it grows while its last calls are still queued. A graph workspace is never
    dropped once a capture used it (_captured). Allocated during a capture, it comes from the graph's private
    memory pool and stays allocated for the graph's replays."""
    cache, key = (_graph_ws, index) if graph else (_workspaces, (index, stream.cuda_stream))
    ws = cache.get(key)
    if ws is not None and ws.numel() >= nbytes:
        return ws
    size = max(_MIB, (nbytes + _MIB - 1) // _MIB * _MIB)
    with torch.cuda.stream(stream):  # allocated on the stream that uses it (see above)
        ws = torch.empty(size, dtype=torch.uint8, device=f"cuda:{index}")
    cache[key] = ws
    return ws


@names_errors
def reserve_workspace(nbytes, device=None, stream=None, graph=False):
    """Makes sure a workspace of at least `nbytes` bytes is allocated now: the one of `stream` (default: the
    current stream) of `device` (default: the current CUDA device), or with graph=True the device's graph
    workspace, which every call captured in a CUDA graph uses. A capture that finds the graph workspace too
    small allocates a larger one from the graph's private memory pool; reserving it first keeps that memory out
    of the pool. Returns the workspace tensor (torch.uint8, 1-D)."""
    torch = _torch_cuda()
    index = _device_index(device)
    with torch.cuda.device(index):
        return _workspace(torch, index, _stream(torch, index, stream), int(nbytes), bool(graph))


@names_errors
def workspace(device=None, stream=None, graph=False):
    """The workspace tensor (torch.uint8) of `stream` (default: the current stream) of `device`, or with
    graph=True the device's graph workspace; None before the first call that used it."""
    torch = _torch_cuda()
    index = _device_index(device)
    if graph:
        return _graph_ws.get(index)
    with torch.cuda.device(index):
        return _workspaces.get((index, _stream(torch, index, stream).cuda_stream))


def launch(params_ref, device_index):
    """kvattn_forward on the CUDA backend, on torch's current stream of that device."""
    torch = _torch()
    with torch.cuda.device(device_index):
        nbytes = ctypes.c_size_t(0)
        check(lib.kvattn_workspace_size(params_ref, BACKEND_CUDA, ctypes.byref(nbytes)), "kvattn_workspace_size")
        current = torch.cuda.current_stream(device_index)
        capturing = torch.cuda.is_current_stream_capturing()
        ws = _workspace(torch, device_index, current, nbytes.value, capturing)
        if capturing and not any(w is ws for w in _captured):
            _captured.append(ws)
        check(lib.kvattn_forward(params_ref, BACKEND_CUDA, ctypes.c_void_p(ws.data_ptr()), ws.numel(),
                                 ctypes.c_void_p(current.cuda_stream)), "kvattn_forward")
        # only a call that was enqueued wrote a status record: a failed one leaves device_status() on the last one
        _last[(device_index, current.cuda_stream)] = ws


class DeviceStatus:
    """The device-side status record of one CUDA call (kvattn_device_status).

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


def _status_workspace(torch, index, workspace, stream, graph):
    """The workspace whose status record is read: `workspace` if given, else the device's graph workspace
    (graph=True), else the one the last call on `stream` used (an eager call's, or during a capture the graph
    workspace)."""
    if workspace is not None:
        return workspace
    if graph:
        ws = _graph_ws.get(index)
        if ws is None:
            raise KvattnArgumentError(f"graph: no kvattn call has been captured on cuda:{index}, so there is no "
                                      f"graph status")
        return ws
    ws = _last.get((index, stream.cuda_stream))
    if ws is None:
        raise KvattnArgumentError(f"stream: no kvattn CUDA call has run on this stream of cuda:{index} yet, so "
                                  f"there is no status (pass stream= the stream the call ran on)")
    return ws


@names_errors
def device_status(device=None, workspace=None, stream=None, graph=False):
    """Reads the status record of the last CUDA call on `stream` (default: torch's current stream) of `device`
    (default: the current device), waiting for that stream to reach that point (a stream synchronization).
    graph=True reads the status of the last replayed graph call on the device instead (the graph workspace;
    still synchronizing `stream`: pass the stream the graph was replayed on). workspace: read this workspace
    tensor's record instead (e.g. one that `kvattn.workspace(graph=True)` returned right after a capture, if the
    graph workspace grew since). Returns a DeviceStatus."""
    torch = _torch_cuda()
    index = _device_index(device)
    rec = DeviceStatusRecord()
    with torch.cuda.device(index):
        st = _stream(torch, index, stream)
        ws = _status_workspace(torch, index, workspace, st, graph)
        check(lib.kvattn_device_status_read(ctypes.c_void_p(ws.data_ptr()), ctypes.c_void_p(st.cuda_stream),
                                            ctypes.byref(rec)), "kvattn_device_status_read")
    return DeviceStatus(rec.flags, rec.num_failed, rec.first_failed)


@names_errors
def device_status_tensor(device=None, workspace=None, stream=None, graph=False):
    """Non-blocking: returns an int32 CUDA tensor of 4 elements [flags, num_failed, first_failed, reserved]
    that is a VIEW of the status record inside a workspace: the one the last call on `stream` (default: the
    current stream) used (during a capture, the graph workspace), or as device_status() says for graph= and
    workspace=. Every later call that uses that workspace overwrites it (stream-ordered), so copy it (e.g.
    ``.clone()`` or ``.to('cpu', non_blocking=True)`` into pinned memory) right after the call you want to
    check. A view taken before the workspace grew keeps pointing at the old one: take it after the call."""
    torch = _torch_cuda()
    index = _device_index(device)
    with torch.cuda.device(index):
        ws = _status_workspace(torch, index, workspace, _stream(torch, index, stream), graph)
    off = int(lib.kvattn_device_status_offset())
    return ws[off:off + ctypes.sizeof(DeviceStatusRecord)].view(torch.int32)


@names_errors
def check_device_status(device=None, workspace=None, stream=None, graph=False):
    """Reads the status (synchronizing `stream`, as device_status) and raises KvattnError(KVATTN_ERR_BAD_DATA) if
    any sequence of that call failed its data checks and was skipped. Returns the DeviceStatus otherwise."""
    st = device_status(device, workspace, stream, graph)
    if not st.ok:
        from ._lib import ERR_BAD_DATA

        raise KvattnError(ERR_BAD_DATA, f"the last CUDA call skipped {st.num_failed} sequence(s) "
                                        f"(first: {st.first_failed}; reasons: {', '.join(st.reasons)})",
                          "kvattn_device_status")
    return st
