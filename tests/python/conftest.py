# conftest.py — makes the working tree's package importable (python/ before any installed kvattn, unless
# KVATTN_TEST_INSTALLED=1) and provides the array backends: NumPy, torch on the CPU, torch on CUDA. Torch
# and CUDA backends skip with a reason when torch or a usable CUDA device is absent. Inputs are fresh on every
# run (harness.SEED, from KVATTN_TEST_SEED or random); the seed is printed at the end of the run.
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
if os.environ.get("KVATTN_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(REPO, "python"))


def torch_or_skip():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed")
    import harness

    torch.manual_seed(harness.SEED)  # tests that draw with torch's generator replay with the session seed too
    return torch


def pytest_terminal_summary(terminalreporter):
    """The session seed (inputs are fresh on every run) and how close the checks came to their bounds."""
    import harness

    w = harness.WORST
    terminalreporter.write_line(f"kvattn tests: seed={harness.SEED} (replay with KVATTN_TEST_SEED={harness.SEED}); "
                                f"worst error / bound: out {w['out']:.3f}, lse {w['lse']:.3f}"
                                + ("  [KVATTN_TEST_MUTANT: the reference drops a key]" if harness.MUTANT else ""))


def cuda_or_skip():
    torch = torch_or_skip()
    import kvattn

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch")
    if not kvattn.cuda_available():
        pytest.skip("libkvattn's CUDA backend is not available: " + kvattn.last_error())
    return torch


@pytest.fixture(params=["numpy", "torch-cpu", "torch-cuda"])
def backend(request):
    import harness

    if request.param == "numpy":
        return harness.NumpyBackend()
    if request.param == "torch-cpu":
        torch_or_skip()
        return harness.TorchBackend("cpu")
    cuda_or_skip()
    return harness.TorchBackend("cuda")


@pytest.fixture
def kvattn():
    import kvattn as k

    return k
