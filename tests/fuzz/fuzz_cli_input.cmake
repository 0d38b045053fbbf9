# SPDX-License-Identifier: MIT
# fuzz_cli_input links the CLI's input parser, which is part of the nmt-edge
# program, not of libnmtedge.
target_sources(${FUZZ_TARGET} PRIVATE ${CMAKE_SOURCE_DIR}/cli/cli_input.c)
