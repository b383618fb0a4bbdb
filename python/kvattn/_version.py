# _version.py — the package version; it must equal the C library's kvattn_version_string() (checked at
# import, and against include/kvattn.h by tests/python/test_package.py).
__version__ = "0.2.0"
