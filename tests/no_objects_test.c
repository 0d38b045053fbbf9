/* SPDX-License-Identifier: MIT */
/* no_objects_test.c — after nmt_session_create() returns, translating and
 * scoring create no OpenCL objects.  The OpenCL creation entry points are
 * wrapped at link time (-Wl,--wrap, see tests/CMakeLists.txt) and counted;
 * the runtime's own objects are checked for allocator imports separately
 * (no_allocator_symbols). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "device.h"
#include "random_model.h"
#include "test_util.h"

static int n_created;

#define WRAP(ret, name, params, args)                                          \
    ret __real_##name params;                                                  \
    ret __wrap_##name params;                                                  \
    ret __wrap_##name params {                                                 \
        n_created++;                                                           \
        return __real_##name args;                                             \
    }

WRAP(cl_mem, clCreateBuffer, (cl_context c, cl_mem_flags f, size_t s, void *h, cl_int *e), (c, f, s, h, e))
WRAP(cl_kernel, clCreateKernel, (cl_program p, const char *n, cl_int *e), (p, n, e))
WRAP(cl_program, clCreateProgramWithSource,
     (cl_context c, cl_uint n, const char **s, const size_t *l, cl_int *e), (c, n, s, l, e))
WRAP(cl_program, clCreateProgramWithBinary,
     (cl_context c, cl_uint n, const cl_device_id *d, const size_t *l, const unsigned char **b,
      cl_int *st, cl_int *e),
     (c, n, d, l, b, st, e))
WRAP(cl_command_queue, clCreateCommandQueue,
     (cl_context c, cl_device_id d, cl_command_queue_properties p, cl_int *e), (c, d, p, e))

static void test_translate_creates_nothing(void **state) {
    (void)state;
    void *dmem;
    nmt_device *dev = nmt_test_device_open(&dmem);
    assert_non_null(dev);
    nmt_random_transformer_config cfg;
    nmt_random_transformer_defaults(&cfg);
    cfg.enc_branches = "global fw local:2";
    cfg.dec_branches = "global local:1";
    cfg.fusion = "gate";
    void *img;
    size_t size;
    assert_int_equal(nmt_random_transformer_image(&cfg, &img, &size), NMT_OK);
    nmt_session_params p = {.model_data = img, .model_size = size,
                            .limits = {.max_src_len = 8, .max_batch = 2, .max_beam = 3}};
    size_t need;
    assert_int_equal(nmt_session_arena_size(&p, &need, NULL), NMT_OK);
    void *arena = aligned_alloc(64, nmt_test_round_up(need, 64));
    nmt_session *s;
    int before = n_created;
    assert_int_equal(nmt_session_create(dev, &p, arena, need, &s), NMT_OK);
    assert_true(n_created > before); /* the wrappers do see the session's objects */

    before = n_created;
    const int32_t a[] = {4, 5, 6}, b[] = {7, 8};
    const int32_t *toks[2] = {a, b};
    const uint32_t lens[2] = {3, 2};
    nmt_batch src = {toks, lens, 2};
    nmt_decode_opts o = {.beam = 3, .n_best = 2};
    for (int rep = 0; rep < 2; rep++) assert_int_equal(nmt_session_translate(s, &src, &o), NMT_OK);
    float lp[2];
    assert_int_equal(nmt_session_score(s, &src, &src, lp), NMT_OK);
    assert_int_equal(n_created, before);

    /* a session with alignments: translating and reading them creates nothing either */
    nmt_session_params pa = p;
    pa.alignment = 1;
    size_t need_a;
    assert_int_equal(nmt_session_arena_size(&pa, &need_a, NULL), NMT_OK);
    void *arena_a = aligned_alloc(64, nmt_test_round_up(need_a, 64));
    nmt_session *sa;
    assert_int_equal(nmt_session_create(dev, &pa, arena_a, need_a, &sa), NMT_OK);
    before = n_created;
    for (int rep = 0; rep < 2; rep++) assert_int_equal(nmt_session_translate(sa, &src, &o), NMT_OK);
    int32_t links[64];
    uint32_t n_links;
    assert_int_equal(nmt_session_result_links(sa, 1, 0, links, 64, &n_links), NMT_OK);
    assert_int_equal(n_created, before);
    nmt_session_destroy(sa);
    free(arena_a);

    nmt_session_destroy(s);
    free(arena);
    free(img);
    nmt_test_device_close(dev, dmem);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_translate_creates_nothing)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
