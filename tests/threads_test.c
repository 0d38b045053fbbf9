/* SPDX-License-Identifier: MIT */
/* threads_test.c — the threading contract of include/nmt_edge.h ("Threads"):
 * one device handle per thread, each with its own sessions, translate at
 * the same time.  Four threads each open a device, create a session on the
 * same (shared, read-only) model image and translate the same batch,
 * greedy and beam, several rounds; every result equals the single-threaded
 * one bit for bit (tokens, score, log-probability).  The devices' program
 * caches are one directory written by all four at once (atomic renames).
 * scripts/tsan.sh runs this test under ThreadSanitizer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "random_model.h"
#include "test_util.h"

#define VOCAB 41
#define NSENT 4
#define MAXT 10
#define THREADS 4
#define ROUNDS 3
static const int32_t src0[] = {5, 9, 11, 4, 30}, src1[] = {7}, src2[] = {12, 3, 8, 20, 6, 15, 10, 4},
                     src3[] = {6, 13, 33};
static const int32_t *const srcs[NSENT] = {src0, src1, src2, src3};
static const uint32_t src_lens[NSENT] = {5, 1, 8, 3};
static const nmt_limits limits = {.max_src_len = 9, .max_tgt_len = MAXT, .max_batch = NSENT, .max_beam = 3};

typedef struct result {
    uint32_t len[2][NSENT];
    int32_t tok[2][NSENT][MAXT + 1];
    float score[2][NSENT], logprob[2][NSENT];
} result;

typedef struct job {
    const void *image;
    size_t size;
    result got[ROUNDS];
    nmt_status st;   /* the first failure, NMT_OK if none */
    char what[128];  /* where it failed */
} job;

/* Open a device and a session, translate ROUNDS times (greedy then beam
 * each round) into j->got; no cmocka calls (they are not thread-safe). */
static void run_job(job *j) {
    j->st = NMT_OK;
    void *dev_mem = NULL, *arena = NULL;
    nmt_device *dev = NULL;
    nmt_session *s = NULL;
    nmt_status st = nmt_test_device_open_with(NULL, &dev_mem, &dev);
    const char *what = "device open";
    const nmt_session_params p = {.model_data = j->image, .model_size = j->size, .limits = limits};
    size_t need = 0;
    if (st == NMT_OK) st = nmt_session_arena_size(&p, &need, NULL), what = "arena size";
    if (st == NMT_OK) {
        arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(need, NMT_ARENA_ALIGNMENT));
        st = arena ? nmt_session_create(dev, &p, arena, need, &s) : NMT_ERR_ARENA_TOO_SMALL;
        what = "session create";
    }
    const nmt_batch src = {srcs, src_lens, NSENT};
    for (int r = 0; r < ROUNDS && st == NMT_OK; r++) {
        memset(&j->got[r], 0, sizeof j->got[r]);
        for (int b = 0; b < 2 && st == NMT_OK; b++) {
            const nmt_decode_opts o = {.beam = b ? 3 : 1, .alpha_set = 1, .max_len = MAXT};
            st = nmt_session_translate(s, &src, &o), what = "translate";
            for (uint32_t i = 0; i < NSENT && st == NMT_OK; i++) {
                const int32_t *t;
                st = nmt_session_result(s, i, 0, &t, &j->got[r].len[b][i], &j->got[r].score[b][i],
                                        &j->got[r].logprob[b][i]);
                what = "result";
                if (st == NMT_OK) memcpy(j->got[r].tok[b][i], t, sizeof(int32_t) * j->got[r].len[b][i]);
            }
        }
    }
    if (st != NMT_OK) {
        j->st = st;
        snprintf(j->what, sizeof j->what, "%s: %s", what, nmt_status_str(st));
    }
    if (s) nmt_session_destroy(s);
    free(arena);
    nmt_test_device_close(dev, dev_mem);
}

static void *thread_main(void *arg) {
    run_job(arg);
    return NULL;
}

static void test_threads_match_single_thread(void **state) {
    (void)state;
    nmt_random_transformer_config rc;
    nmt_random_transformer_defaults(&rc);
    rc.src_vocab = rc.tgt_vocab = VOCAB;
    rc.enc_branches = "global fw bw local:1";
    rc.dec_branches = "global fw";
    rc.fusion = "gate";
    rc.weight_scale = 2.0f;
    rc.seed = 12;
    void *image = NULL;
    size_t size = 0;
    assert_int_equal(nmt_random_transformer_image(&rc, &image, &size), NMT_OK);

    job *ref = calloc(1, sizeof *ref), *jobs = calloc(THREADS, sizeof *jobs);
    assert_non_null(ref);
    assert_non_null(jobs);
    ref->image = image;
    ref->size = size;
    run_job(ref); /* single-threaded, first: its rounds agree with each other too */
    if (ref->st != NMT_OK) fail_msg("single thread: %s", ref->what);
    for (int r = 1; r < ROUNDS; r++) assert_memory_equal(&ref->got[r], &ref->got[0], sizeof(result));

    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i].image = image;
        jobs[i].size = size;
        assert_int_equal(pthread_create(&th[i], NULL, thread_main, &jobs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < THREADS; i++) {
        if (jobs[i].st != NMT_OK) fail_msg("thread %d: %s", i, jobs[i].what);
        for (int r = 0; r < ROUNDS; r++)
            if (memcmp(&jobs[i].got[r], &ref->got[0], sizeof(result)) != 0)
                fail_msg("thread %d round %d: results differ from the single-threaded run", i, r);
    }
    free(ref);
    free(jobs);
    free(image);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_match_single_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
