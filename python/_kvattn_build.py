# _kvattn_build.py — the setuptools build hook of the kvattn package (named in pyproject.toml): `pip install .`
# builds libkvattn.so with the Makefile (`make lib` into build/pip) and ships it inside the package. Without
# nvcc the library has the CPU backend only; the build says so, and kvattn.cuda_available() returns False.
import os
import shutil
import subprocess
import sys

from setuptools.command.build_py import build_py as _build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel as _bdist_wheel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _nvcc():
    if os.environ.get("KVATTN_CPU_ONLY") == "1":
        return None
    return os.environ.get("NVCC") or shutil.which("nvcc")


class build_py(_build_py):
    def run(self):
        super().run()
        nvcc = _nvcc()
        # one tree per CUDA setting, so that switching between them does not recompile everything (the Makefile's
        # flag files would: objects depend on the flags they were built with, CPU_ARCH from the environment too)
        build = os.path.join("build", "pip-cuda" if nvcc else "pip-cpu")
        cmd = ["make", "-C", ROOT, f"BUILD={build}", "lib"]
        if nvcc is None:
            cmd.append("NVCC=")
            msg = ("kvattn: WARNING: nvcc not found (or KVATTN_CPU_ONLY=1): building the CPU backend only; "
                   "kvattn.cuda_available() will be False and CUDA tensors are rejected with "
                   "KVATTN_ERR_NOT_AVAILABLE. Put nvcc on PATH (or set NVCC) and reinstall for the CUDA backend.")
            print(msg, file=sys.stderr)
            self.warn(msg)
        else:
            cmd.append(f"NVCC={nvcc}")
        subprocess.check_call(cmd)
        dest = os.path.join(self.build_lib, "kvattn")
        os.makedirs(dest, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, build, "libkvattn.so"), os.path.join(dest, "libkvattn.so"))
        with open(os.path.join(dest, "_build_info.py"), "w") as f:
            f.write("# written by the build hook (python/_kvattn_build.py)\n")
            f.write(f"CUDA_BUILT = {nvcc is not None}\n")


class bdist_wheel(_bdist_wheel):
    """The wheel carries a native library: not pure, tagged for this platform, any Python 3."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat
