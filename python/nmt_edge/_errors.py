# SPDX-License-Identifier: MIT
"""_errors.py — nmt_edge.Error: an nmt_status with the library's words."""

import ctypes
import os

from . import _lib


class Error(RuntimeError):
    """A call of libnmtedge failed, or the package refused a request the
    library would refuse.

    Attributes:
      status:      the nmt_status value (int), e.g. 3
      name:        its name in include/nmt_edge.h, e.g. "NMT_ERR_IO"
      description: nmt_status_str(status), e.g. "file input/output error"
      reason:      what else is known ("" if nothing): the reason
                   nmt_model_explain gives for a refused model, the errno
                   text of an I/O error, the library's logged error, or the
                   package's own words
      cl_error:    the raw cl_int of the last failing OpenCL call (0 if none)
    """

    def __init__(self, status, reason="", cl_error=0):
        self.status = int(status)
        if 0 <= self.status < len(_lib.STATUS_NAMES):
            self.name = _lib.STATUS_NAMES[self.status]
        else:
            self.name = "NMT_STATUS_%d" % self.status
        try:
            self.description = _lib.load().nmt_status_str(self.status).decode()
        except OSError:  # the package's own refusal with no library at hand
            self.description = self.name
        self.reason = reason or ""
        self.cl_error = int(cl_error)
        text = "%s: %s" % (self.name, self.description)
        if self.reason:
            text += ": " + self.reason
        if self.cl_error:
            text += " (OpenCL error %d)" % self.cl_error
        super().__init__(text)


def explain_model(path_bytes, status):
    """The reason text for `status` of the model at `path_bytes`: why
    nmt_model_explain_file refuses it, or the errno text of an I/O error."""
    lib = _lib.load()
    if status == _lib.ERR_IO:
        err = lib.nmt_model_explain_file(path_bytes, None, 0)
        errno = ctypes.get_errno()
        where = os.fsdecode(path_bytes)
        return "%s: %s" % (where, os.strerror(errno)) if errno and err == status else where
    if status in _lib.MODEL_STATUSES:
        why = ctypes.create_string_buffer(_lib.MODEL_WHY_BYTES)
        lib.nmt_model_explain_file(path_bytes, why, len(why))
        return why.value.decode("utf-8", "replace")
    return ""


def check(status, reason="", cl_error=0):
    """Raise Error unless status is NMT_OK."""
    if status != _lib.OK:
        raise Error(status, reason, cl_error)
