/* SPDX-License-Identifier: MIT */
/* train_model.c — the trainer's family registry and the ntm_* calls
 * (train_model.h): one indirection through the family's record
 * (train/families/train_family.h). */
#include "train_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "device.h"
#include "family.h"
#include "format.h"
#include "param_store.h"
#include "tf_train.h"
#include "banmt_train.h"

/* Every family the trainer can train, by the runtime family's arch. */
static const nmt_train_family *const registry[] = {
    &nmt_tf_train_family,
    &nmt_mgsa_train_family,
    &nmt_phrase_train_family,
    &nmt_banmt_train_family,
};

const nmt_train_family *nmt_train_family_find(const char *arch) {
    if (arch == NULL) return NULL;
    for (size_t i = 0; i < NMT_ARRAY_LEN(registry); i++)
        if (strcmp(registry[i]->arch, arch) == 0) return registry[i];
    return NULL;
}

struct ntm_model {
    const nmt_train_family *fam;
    void *impl;
};

nmt_status ntm_create(nmt_device *dev, const void *image, size_t size, const nmt_train_limits *lim,
                      ntm_model **out) {
    NMT_CHECK(out != NULL, NMT_ERR_INVALID_ARGUMENT);
    *out = NULL;
    NMT_CHECK(dev != NULL && image != NULL && lim != NULL, NMT_ERR_INVALID_ARGUMENT);
    /* the structure only: the family's create verifies every checksum */
    nmt_file f;
    NMT_TRY(nmt_file_open(&f, image, size, 0));
    const nmt_family *rt;
    NMT_TRY(nmt_family_of(&f, &rt));
    const nmt_train_family *fam = nmt_train_family_find(rt->arch);
    NMT_CHECK(fam != NULL, NMT_ERR_MODEL_ARCH);
    ntm_model *m = calloc(1, sizeof *m);
    NMT_CHECK(m != NULL, NMT_ERR_IO);  /* the writer's convention for host memory */
    m->fam = fam;
    nmt_status s = fam->create(dev, image, size, lim, &m->impl);
    if (s != NMT_OK) {
        free(m);
        return s;
    }
    *out = m;
    return NMT_OK;
}

size_t ntm_act_bytes(const void *image, size_t size, const nmt_train_limits *lim) {
    nmt_file f;
    const nmt_family *rt;
    if (image == NULL || lim == NULL || nmt_file_open(&f, image, size, 0) != NMT_OK || nmt_family_of(&f, &rt) != NMT_OK)
        return 0;
    const nmt_train_family *fam = nmt_train_family_find(rt->arch);
    return fam && fam->act_bytes ? fam->act_bytes(image, size, lim) : 0;
}

void ntm_destroy(ntm_model *m) {
    if (m == NULL) return;
    m->fam->destroy(m->impl);
    free(m);
}

const nmt_train_family *ntm_family(const ntm_model *m) { return m ? m->fam : NULL; }
void *ntm_impl(ntm_model *m) { return m ? m->impl : NULL; }
size_t ntm_n_params(const ntm_model *m) { return m ? m->fam->n_params(m->impl) : 0; }

const char *ntm_missing_train_tensor(ntm_model *m, const void *image, size_t size) {
    nmt_pstore *s = (m != NULL && m->fam->store != NULL) ? m->fam->store(m->impl) : NULL;
    nmt_file f;
    if (s == NULL || nmt_file_open(&f, image, size, 0) != NMT_OK) return NULL;
    return nmt_pstore_missing_train_only(s, &f);
}
uint32_t ntm_d_model(const ntm_model *m) { return m ? m->fam->d_model(m->impl) : 0; }

nmt_status ntm_add_to_writer(ntm_model *m, nmtw_writer *w, int optimizer) {
    NMT_CHECK(m != NULL, NMT_ERR_INVALID_ARGUMENT);
    return m->fam->add_to_writer(m->impl, w, optimizer);
}

nmt_status ntm_zero_grad(ntm_model *m) {
    NMT_CHECK(m != NULL, NMT_ERR_INVALID_ARGUMENT);
    return m->fam->zero_grad(m->impl);
}

nmt_status ntm_forward_backward(ntm_model *m, const nmt_train_batch *b, const nmt_train_step_opts *o,
                                double *loss_sum, double *nll_sum) {
    NMT_CHECK(m != NULL, NMT_ERR_INVALID_ARGUMENT);
    return m->fam->forward_backward(m->impl, b, o, loss_sum, nll_sum);
}

nmt_status ntm_forward_loss(ntm_model *m, const nmt_train_batch *b, float label_smoothing, double *loss_sum,
                            double *nll_sum) {
    NMT_CHECK(m != NULL, NMT_ERR_INVALID_ARGUMENT);
    return m->fam->forward_loss(m->impl, b, label_smoothing, loss_sum, nll_sum);
}

nmt_status ntm_token_logprobs(ntm_model *m, const nmt_train_batch *b, float *lp) {
    NMT_CHECK(m != NULL, NMT_ERR_INVALID_ARGUMENT);
    return m->fam->token_logprobs(m->impl, b, lp);
}

nmt_status ntm_attention_mass(ntm_model *m, const nmt_train_batch *b, ntm_attn_mass *out, uint32_t cap, uint32_t *n) {
    NMT_CHECK(m != NULL && out != NULL && n != NULL, NMT_ERR_INVALID_ARGUMENT);
    *n = 0;
    if (m->fam->attention_mass == NULL) return NMT_ERR_UNSUPPORTED;
    return m->fam->attention_mass(m->impl, b, out, cap, n);
}

nmt_status ntm_grad_norm(ntm_model *m, double *norm) {
    NMT_CHECK(m != NULL, NMT_ERR_INVALID_ARGUMENT);
    return m->fam->grad_norm(m->impl, norm);
}

nmt_status ntm_adam_step(ntm_model *m, const nmt_adam_params *ap) {
    NMT_CHECK(m != NULL, NMT_ERR_INVALID_ARGUMENT);
    return m->fam->adam_step(m->impl, ap);
}

/* The store of m and whether [off, off + n) lies in its gradients. */
static nmt_pstore *grads_range(ntm_model *m, size_t off, size_t n) {
    nmt_pstore *s = (m != NULL && m->fam->store != NULL) ? m->fam->store(m->impl) : NULL;
    return (s != NULL && off <= s->n_params && n <= s->n_params - off) ? s : NULL;
}

nmt_status ntm_grads_read(ntm_model *m, size_t off, size_t n, float *dst) {
    nmt_pstore *s = grads_range(m, off, n);
    NMT_CHECK(s != NULL && (dst != NULL || n == 0), NMT_ERR_INVALID_ARGUMENT);
    if (n == 0) return NMT_OK;
    return nmt_device_read(s->dev, s->G.mem, (s->G.off + off) * sizeof(float), n * sizeof(float), dst);
}

nmt_status ntm_grads_write(ntm_model *m, size_t off, size_t n, const float *src) {
    nmt_pstore *s = grads_range(m, off, n);
    NMT_CHECK(s != NULL && (src != NULL || n == 0), NMT_ERR_INVALID_ARGUMENT);
    if (n == 0) return NMT_OK;
    return nmt_device_write(s->dev, s->G.mem, (s->G.off + off) * sizeof(float), n * sizeof(float), src);
}

nmt_status ntm_grads_read_async(ntm_model *m, size_t off, size_t n, float *dst, void **ev) {
    nmt_pstore *s = grads_range(m, off, n);
    NMT_CHECK(s != NULL && dst != NULL && n > 0 && ev != NULL, NMT_ERR_INVALID_ARGUMENT);
    cl_event e = NULL;
    NMT_TRY(nmt_device_read_async(s->dev, s->G.mem, (s->G.off + off) * sizeof(float), n * sizeof(float), dst, &e));
    *ev = e;
    return NMT_OK;
}
