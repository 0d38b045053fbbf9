# SPDX-License-Identifier: MIT
# fuzz_file maps a SentencePiece fixture from a file it then truncates.
target_compile_definitions(${FUZZ_TARGET} PRIVATE
  NMT_FUZZ_SPM_MODEL="${CMAKE_SOURCE_DIR}/tests/fixtures/spm/uni_nfkc.model")
