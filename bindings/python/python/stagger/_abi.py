"""The native library (``stagger-abi``'s cdylib, shipped in the wheel as
``stagger/_native/lib_native.so``) through cffi's ABI mode: maturin generated the declarations
from the crate with cbindgen when the wheel was built, so they are the Rust ones.

Everything here is a thin, checked call: a status other than ``STAGGER_OK`` becomes the
matching exception with the library's error JSON, and every answer is copied out of the
library's buffer before anything else is called (docs/abi.md, "Buffers and memory"). cffi
releases the GIL during each call.
"""

from __future__ import annotations

import json
import threading
from typing import Any, NoReturn, Optional

from . import _wire
from .errors import AbiError, AbiVersionError, error_from_status

try:
    from ._native import ffi, lib
except ImportError as e:  # pragma: no cover - a broken install
    raise ImportError(f"stagger: the native library of this wheel could not be loaded: {e}") from e

STATUS_OK = 0


def _check_version(found: int, expected: int = _wire.ABI_VERSION) -> None:
    """The ABI version check every host makes when it loads the library (docs/abi.md)."""
    if found != expected:
        raise AbiVersionError(
            f"the stagger native library speaks ABI version {found}, this Python package "
            f"version {expected}: install a wheel built from one checkout"
        )


_check_version(lib.stagger_abi_version())


def _copy(out: Any) -> bytes:
    return bytes(ffi.buffer(out.ptr, out.len)) if out.len else b""


def _raise(status: int, out: Any) -> NoReturn:
    payload = _copy(out)
    try:
        error = json.loads(payload) if payload else {}
    except ValueError:
        error = {"message": payload.decode(errors="replace")}
    raise error_from_status(status, error if isinstance(error, dict) else {})


class Handle:
    """One native session: its handle, its answer buffer and the lock that keeps a call and
    the read of its answer together (the buffer is per handle). Freed by ``free()`` or when
    garbage collected."""

    __slots__ = ("handle", "_out", "_lock", "__weakref__")

    def __init__(self, config_json: bytes, now_ns: int, seed: int) -> None:
        self._lock = threading.Lock()
        self._out = ffi.new("StaggerBuf *")
        handle = lib.stagger_session_new(config_json, len(config_json), now_ns, seed & 0xFFFF_FFFF_FFFF_FFFF)
        if handle == 0:
            # The error slot is per thread; cffi runs the call on this thread, and nothing
            # else ran on it since.
            status = lib.stagger_last_error(self._out)
            _raise(status if status != STATUS_OK else 1, self._out)
        self.handle: int = handle

    def step(self, now_ns: int, batch: bytes) -> bytes:
        with self._lock:
            self._alive()
            status = lib.stagger_step(self.handle, now_ns, batch, len(batch), self._out)
            if status != STATUS_OK:
                _raise(status, self._out)
            return _copy(self._out)

    def metadata_json(self) -> bytes:
        with self._lock:
            self._alive()
            status = lib.stagger_metadata(self.handle, self._out)
            if status != STATUS_OK:
                _raise(status, self._out)
            return _copy(self._out)

    def report_json(self) -> bytes:
        with self._lock:
            self._alive()
            status = lib.stagger_report(self.handle, self._out)
            if status != STATUS_OK:
                _raise(status, self._out)
            return _copy(self._out)

    def free(self) -> None:
        with self._lock:
            if self.handle:
                handle, self.handle = self.handle, 0
                lib.stagger_session_free(handle)

    def _alive(self) -> None:
        if not self.handle:
            raise AbiError("the session is closed", status=3, error="unknown_handle")

    def __del__(self) -> None:
        handle = getattr(self, "handle", 0)
        if handle:
            lib.stagger_session_free(handle)


def abi_version() -> int:
    """The ABI version of the loaded native library."""
    return int(lib.stagger_abi_version())


def native_constant(name: str) -> Optional[int]:
    """A ``STAGGER_*`` constant as the native library's header defines it (for the tests that
    check the pure-Python codec against it)."""
    return getattr(lib, name, None)
