# test_package.py — the binding itself: version and struct checks at import (and the ctypes mirror's field
# offsets against the C compiler's), clear ImportErrors, documented differences from flash-attention.
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import REPO


def test_version_matches_header(kvattn):
    header = open(os.path.join(REPO, "include", "kvattn.h")).read()
    parts = [re.search(rf"#define KVATTN_VERSION_{k} (\d+)", header).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    assert kvattn.__version__ == ".".join(parts) == kvattn.version()


def test_spec_copy_is_current():
    """docs/SPEC.md is the repository's copy of the project's contract, ../shared/SPEC.md (present in the
    project's workspace, not in a clone): they must be the same text."""
    shared = os.path.join(REPO, "..", "shared", "SPEC.md")
    if not os.path.isfile(shared):
        pytest.skip("../shared/SPEC.md is not beside this checkout")
    with open(shared, "rb") as a, open(os.path.join(REPO, "docs", "SPEC.md"), "rb") as b:
        assert a.read() == b.read(), "docs/SPEC.md differs from ../shared/SPEC.md: copy it again"


def test_params_mirror_matches_c_offsets(kvattn):
    """Every field of the ctypes mirror sits at the offset the C compiler gives it."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to compute offsetof")
    from kvattn._lib import Params

    lines = [f'printf("{n} %zu\\n", offsetof(kvattn_params, {n}));' for n, _ in Params._fields_]
    src = "#include <stddef.h>\n#include <stdio.h>\n#include \"kvattn.h\"\nint main(void){\n" + "\n".join(lines) + \
          '\nprintf("sizeof %zu\\n", sizeof(kvattn_params));\nreturn 0;}\n'
    with tempfile.TemporaryDirectory() as tmp:
        c, exe = os.path.join(tmp, "o.c"), os.path.join(tmp, "o")
        open(c, "w").write(src)
        subprocess.run([cc, "-std=c11", "-I", os.path.join(REPO, "include"), c, "-o", exe], check=True)
        got = dict(line.split() for line in subprocess.run([exe], capture_output=True, text=True,
                                                           check=True).stdout.splitlines())
    for n, _ in Params._fields_:
        assert int(got[n]) == getattr(Params, n).offset, n
    assert int(got["sizeof"]) == ctypes.sizeof(Params)


def _import_with(env_extra):
    env = dict(os.environ, **env_extra)
    code = "import kvattn"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=os.path.join(REPO, "python"))


def test_missing_library_is_a_clear_import_error():
    r = _import_with({"KVATTN_LIBRARY": "/nonexistent/libkvattn.so"})
    assert r.returncode != 0 and "ImportError" in r.stderr and "KVATTN_LIBRARY" in r.stderr


def test_not_a_library_is_a_clear_import_error(tmp_path):
    bad = tmp_path / "libkvattn.so"
    bad.write_text("not a shared object")
    r = _import_with({"KVATTN_LIBRARY": str(bad)})
    assert r.returncode != 0 and "ImportError" in r.stderr and "cannot load" in r.stderr


def test_cuda_available_is_bool(kvattn):
    assert kvattn.cuda_available() in (True, False)


def test_cuda_unavailable_says_why(kvattn):
    # True leaves no error; False leaves the reason (no device, no CUDA in the build, another arch)
    if kvattn.cuda_available():
        assert kvattn.last_error() == ""
    else:
        assert kvattn.last_error() != ""


def test_docstrings_state_differences(kvattn):
    for f in (kvattn.flash_attn_with_kvcache, kvattn.flash_attn_varlen_func_with_kvcache,
              kvattn.flash_attn_varlen_func):
        doc = f.__doc__
        for words in ("bottom-right", "lse = -inf", "page_size", "device status", "CUDA graph"):
            assert words in doc, (f.__name__, words)


def test_batch_of_zero_is_a_no_op(kvattn):
    import numpy as np

    q = np.zeros((0, 2, 8), np.float16)
    kc = np.ones((1, 4, 1, 8), np.float16)
    out = kvattn.flash_attn_varlen_func_with_kvcache(q, kc, kc.copy(), np.zeros(1, np.int32), 0, cache_seqlens=0)
    assert out.shape == (0, 2, 8)


def test_varlen_func_dropout_is_rejected(kvattn):
    import numpy as np

    q = np.zeros((1, 2, 8), np.float16)
    cu = np.array([0, 1], np.int32)
    with pytest.raises(NotImplementedError):
        kvattn.flash_attn_varlen_func(q, q[:, :1], q[:, :1], cu, cu, 1, 1, dropout_p=0.1)
    out, lse, probs = kvattn.flash_attn_varlen_func(q, q[:, :1].copy(), q[:, :1].copy(), cu, cu, 1, 1,
                                                    return_attn_probs=True)
    assert probs is None and lse.shape == (2, 1)


def test_out_int_seqlens_and_batch_invariant(kvattn, backend):
    """out= is written and returned; an int cache_seqlens equals the tensor; batch_invariant keeps values."""
    import numpy as np

    from harness import fresh_rng, rounded

    rng = fresh_rng(3001)
    dt = "float16"
    q = backend.array(rounded(backend, rng.standard_normal((2, 3, 4, 32)), dt), dt)
    kc64 = rounded(backend, rng.standard_normal((2, 20, 2, 32)), dt)
    kc, vc = backend.array(kc64, dt), backend.array(kc64[::-1].copy(), dt)
    out = backend.array(np.zeros((2, 3, 4, 32)), dt)
    res = kvattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=11, causal=True, out=out)
    assert res is out
    ref = kvattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=backend.index([11, 11]), causal=True,
                                         batch_invariant=True)
    np.testing.assert_allclose(backend.to64(out), backend.to64(ref), atol=2e-3, rtol=2e-3)
