# SPDX-License-Identifier: MIT
"""errors.py: the importer's one exception: a source it refuses, with the
message printed as "nmt-edge-convert import: MESSAGE" (exit status 1)."""


class Refused(Exception):
    pass
