/* SPDX-License-Identifier: MIT */
/* train_opts.c — parsing the command line of `nmt-edge-train` (train_opts.h). */
#include "train_opts.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

#define PROG TRAIN_PROG
#define EXIT_USAGE TRAIN_EXIT_USAGE

static void defaults(train_opts *o) {
    memset(o, 0, sizeof *o);
    o->arch = "transformer";
    o->mg_tag_lambda = 0.1;
    o->d_model = 256;
    o->heads = 4;
    o->ff = 1024;
    o->enc_layers = 2;
    o->dec_layers = 2;
    o->vocab = 0;
    o->gate_r = 0; /* 4, or 16 with --gate shared (train_opts_parse) */
    o->gate = "branch";
    o->ffn_act = "relu";
    o->pos_enc = "sinusoid";
    o->norm = "post";
    o->enc_branches = "global fw bw local:3";
    o->dec_branches = "global local:3";
    o->fusion = "gate";
    o->schedule = "t2t";
    o->lr = -1; /* schedule default */
    o->dropout = 0.1;
    o->label_smoothing = 0.1;
    o->clip_norm = 0;
    o->adam_beta1 = 0.9;
    o->adam_beta2 = 0.98;
    o->adam_eps = 1e-9;
    o->warmup = 4000;
    o->max_tokens = 4096;
    o->max_seqs = 512;
    o->accum = 1;
    o->max_steps = 0;
    o->max_epochs = 0;
    o->max_time = 0;
    o->seed = 1;
    o->max_len = 100;
    o->max_ratio = 3.0;
    o->spm_vocab = 8000;
    o->log_every = 20;
    o->eval_every = 1000;
    o->save_every = 500;
    o->keep = 5;
    o->beam = 4;
    o->dev_bleu_max = 500;
    o->dist_timeout = 1800;
    o->bucket_mb = 4;
}

void train_opts_usage(FILE *f) {
    fprintf(f,
"Usage: nmt-edge-train --train-src FILE --train-tgt FILE --out DIR [options]\n"
"       nmt-edge-train plot LOG.jsonl -o PLOT.svg\n"
"       nmt-edge-train bleu REF HYP        (sacreBLEU-compatible corpus BLEU of the\n"
"                      hypotheses HYP against the references REF; also\n"
"                      --ref REF --hyp HYP, or REF < HYP as sacrebleu REF < HYP)\n"
"       nmt-edge-train attention MODEL SRC TGT   (interleaved phrase attention shares)\n"
"       nmt-edge-train parse-spans SRC -o SPANS (--spm FILE | --model MODEL)\n"
"                      (MG-SA phrase spans of English text, link-grammar)\n"
"\n"
"Train a Transformer/HySAN translation model on the runtime's OpenCL kernels.\n"
"DIR receives checkpoints (ckpt-STEP.nmt, loadable by nmt-edge), model.nmt (the\n"
"deployment model, written at the end), log.jsonl, plot.svg and spm.model.\n"
"Ctrl-C (SIGINT) or SIGTERM writes a checkpoint and exits; --resume continues\n"
"from the newest valid checkpoint in DIR exactly as if never stopped.\n"
"\n"
"Data:\n"
"  --train-src FILE, --train-tgt FILE  parallel text, one sentence per line\n"
"  --dev-src FILE, --dev-tgt FILE      development set (dev loss and BLEU)\n"
"  --spm FILE          SentencePiece model shared by both sides (default: train\n"
"                      one with spm_train into DIR/spm.model)\n"
"  --spm-vocab N       vocabulary of the trained SentencePiece model (8000)\n"
"  --ids               the files hold whitespace-separated token ids (no tokenizer;\n"
"                      needs --vocab); pad 0, bos 1, eos 2, unk 3\n"
"  --vocab N           vocabulary size for --ids\n"
"  --max-len N         drop pairs with more than N tokens on a side (100)\n"
"  --max-ratio R       drop pairs whose length ratio exceeds R; 0 = off (3)\n"
"\n"
"Model (a new model; ignored with --resume or --init):\n"
"  --init FILE         start from this model file instead of random weights\n"
"  --arch NAME         transformer (HySAN; vanilla with global branches), mgsa\n"
"                      (MG-SA: phrase heads in chosen encoder layers) or phrase\n"
"                      (phrase-based attentions: needs --ph-enc, --ph-dec or\n"
"                      --ph-cross); for mgsa and phrase the encoder and decoder\n"
"                      branches default to global (transformer)\n"
"  --mg-layers S       MG-SA: encoder layers with phrase heads, 1-based (\"1\")\n"
"  --mg-heads S        MG-SA: one partition per head, word, ngram:N or syntax\n"
"                      (\"word word ngram:2 ngram:3\")\n"
"  --mg-compose C      MG-SA: phrase composition, max (max-pooling), san\n"
"                      (self-attention inside each phrase, then max-pooling) or\n"
"                      lstm (last state of an LSTM over each phrase) (max)\n"
"  --mg-interact R     MG-SA: phrase interaction over each phrase sequence, none,\n"
"                      lstm or onlstm (ordered neurons) (none)\n"
"  --mg-chunk N        MG-SA ON-LSTM: chunk size of the master gates (8)\n"
"  --train-src-spans FILE, --dev-src-spans FILE   MG-SA syntax heads: phrase\n"
"                      spans of the source files, START-END:LABEL in pieces, one\n"
"                      line per sentence (nmt-edge-train parse-spans writes them)\n"
"  --mg-tag-lambda L   MG-SA syntax heads: weight of the phrase-tag loss (0.1)\n"
"  --ph-enc S          phrase: the encoder self-attention, none or\n"
"                      METHOD:STRUCTURE:DIGITS, METHOD convkv or queryk; homo:\n"
"                      heads per n-gram size from 1 (homo:22 = 2 unigram + 2\n"
"                      bigram heads), hetero: n-gram sizes in one softmax\n"
"                      (hetero:12) (none; --arch phrase needs at least one of\n"
"                      --ph-enc, --ph-dec, --ph-cross other than none)\n"
"  --ph-dec S          phrase: the decoder self-attention (causal), as --ph-enc\n"
"  --ph-cross S        phrase: the cross-attention, as --ph-enc\n"
"  --arch banmt        BA-NMT (RNNsearch + history attention, ARCHITECTURES.md):\n"
"                      bi-GRU encoder, conditional-GRU decoder; initial weights\n"
"                      U(-0.1, 0.1) and --dropout 0.2 on the readout (the paper's)\n"
"  --emb N --hidden N  BA-NMT: embedding and GRU widths (--d-model each)\n"
"  --att N --readout N --hist N   BA-NMT: attention, readout, history GRU widths\n"
"                      (hidden, emb, hidden)\n"
"  --history H         BA-NMT: none (RNNsearch), sa, ta or ba (both) (ba)\n"
"  --maxout            BA-NMT: maxout readout instead of tanh\n"
"  --max-act-bytes N   BA-NMT keeps every target step's history states: its\n"
"                      activations grow as O(sentences x src len x tgt len x\n"
"                      hist), planned from the largest batch (--max-tokens,\n"
"                      --max-len); a plan above N bytes (0: device memory) is\n"
"                      refused with the numbers (lower --max-tokens) (0)\n"
"  --d-model N (256)  --heads N (4)  --ff N (1024)  --enc-layers N (2)  --dec-layers N (2)\n"
"  --norm pre|post (post)  --fusion sum|concat|gate (gate)  --gate-reduction N (4;\n"
"                      16 with --gate shared)\n"
"  --gate branch|shared  a squeeze gate per branch, or one per sub-layer shared by\n"
"                      its branches (the HySAN paper's parameter counts) (branch)\n"
"  --ffn-activation relu|gelu|swish (relu)\n"
"  --position-encoding sinusoid|sinusoid-2i|sinusoid-interleaved|none (sinusoid;\n"
"                      none: the HySAN paper's no-position ablation)\n"
"  --enc-branches S    HySAN encoder branches (\"global fw bw local:3\"; \"global\" =\n"
"                      the vanilla Transformer)\n"
"  --dec-branches S    decoder branches (\"global local:3\")\n"
"  --separate-embeddings  source and target embeddings not shared (default shared\n"
"                      and tied to the output projection)\n"
"\n"
"Optimisation:\n"
"  --schedule t2t|inverse-sqrt|constant  learning-rate schedule (t2t)\n"
"  --lr X              t2t: scale (2.0); others: peak rate (5e-4)\n"
"  --warmup N          warm-up steps (4000)\n"
"  --max-tokens N      padded tokens per micro-batch (4096)\n"
"  --max-seqs N        sentences per micro-batch (512)\n"
"  --accum N           micro-batches per optimiser step (1)\n"
"  --dropout P (0.1)  --label-smoothing E (0.1)  --clip-norm X (0 = off)\n"
"  --weight-decay X    decoupled weight decay (0)\n"
"  --adam-betas B1,B2  Adam's moment decays, each in [0, 1) (0.9,0.98)\n"
"  --adam-eps X        Adam's epsilon (1e-9)\n"
"  --max-steps N  --max-epochs N  --max-time SECONDS   stop at the first reached\n"
"  --seed N            data order and dropout (1; --resume: the checkpoint's)\n"
"\n"
"Reporting:\n"
"  --log-every N (20)  --eval-every N (1000)  --save-every N (500)  --keep K (5)\n"
"                      with a dev set, it is also evaluated at the last step\n"
"                      (--eval-every 0: only there); --save-every 0: a\n"
"                      checkpoint at the end only\n"
"  --beam N            beam of the dev BLEU decoding (4)\n"
"  --dev-bleu-max N    dev sentences decoded for BLEU, 0 = all (500)\n"
"  --resume            continue the run in DIR\n"
"  --overwrite         start a new run in a DIR that holds another one, removing\n"
"                      its checkpoints, last.nmt, model.nmt, log.jsonl and plot.svg\n"
"                      (without --resume or --overwrite such a DIR is refused)\n"
"  --device SPEC       OpenCL device (as nmt-edge; default $NMT_EDGE_DEVICE)\n"
"  --no-cache          do not cache compiled kernels\n"
"\n"
"Several devices and machines (under mpirun / srun; builds with MPI):\n"
"  --dist-timeout S    stop the job when a collective waits longer (1800)\n"
"  --bucket-mb X       gradient all-reduce bucket size in MiB (4)\n"
"  --no-overlap        start the all-reduce after the backward, not during it\n"
"  --quiet             no progress line\n"
"  --help              show this help\n");
}

enum {
    O_TRAIN_SRC = 256, O_TRAIN_TGT, O_DEV_SRC, O_DEV_TGT, O_OUT, O_SPM, O_SPM_VOCAB, O_IDS, O_VOCAB, O_MAX_LEN,
    O_MAX_RATIO, O_INIT, O_D_MODEL, O_HEADS, O_FF, O_ENC_LAYERS, O_DEC_LAYERS, O_NORM, O_FUSION, O_GATE_R,
    O_ENC_BR, O_DEC_BR, O_SEP_EMB, O_SCHED, O_LR, O_WARMUP, O_MAX_TOKENS, O_MAX_SEQS, O_ACCUM, O_DROPOUT,
    O_LS, O_CLIP, O_WD, O_MAX_STEPS, O_MAX_EPOCHS, O_MAX_TIME, O_SEED, O_LOG_EVERY, O_EVAL_EVERY,
    O_SAVE_EVERY, O_KEEP, O_BEAM, O_DEV_BLEU_MAX, O_RESUME, O_OVERWRITE, O_DEVICE, O_NO_CACHE, O_QUIET, O_HELP, O_ARCH,
    O_MG_LAYERS, O_MG_HEADS, O_MG_COMPOSE, O_MG_INTERACT, O_MG_CHUNK, O_PH_ENC, O_PH_DEC, O_PH_CROSS,
    O_TRAIN_SPANS, O_DEV_SPANS, O_MG_TAG_LAMBDA, O_BA_FIRST, O_BA_LAST = O_BA_FIRST + 6, O_MAX_ACT_BYTES,
    O_DIST_TIMEOUT, O_BUCKET_MB, O_NO_OVERLAP, O_ADAM_BETAS, O_ADAM_EPS, O_GATE, O_FFN_ACT, O_POS_ENC
};

/* BA-NMT's options: the flags of its hyper-parameter table (banmt_cfg.c). */
const char *const train_opts_ba_keys[7] = {"emb", "hidden", "att", "readout", "hist", "history", "maxout"};

static const struct option LONG_OPTS[] = {
    {"train-src", required_argument, 0, O_TRAIN_SRC}, {"train-tgt", required_argument, 0, O_TRAIN_TGT},
    {"dev-src", required_argument, 0, O_DEV_SRC}, {"dev-tgt", required_argument, 0, O_DEV_TGT},
    {"out", required_argument, 0, O_OUT}, {"spm", required_argument, 0, O_SPM},
    {"spm-vocab", required_argument, 0, O_SPM_VOCAB}, {"ids", no_argument, 0, O_IDS},
    {"vocab", required_argument, 0, O_VOCAB}, {"max-len", required_argument, 0, O_MAX_LEN},
    {"max-ratio", required_argument, 0, O_MAX_RATIO}, {"init", required_argument, 0, O_INIT},
    {"d-model", required_argument, 0, O_D_MODEL}, {"heads", required_argument, 0, O_HEADS},
    {"ff", required_argument, 0, O_FF}, {"enc-layers", required_argument, 0, O_ENC_LAYERS},
    {"dec-layers", required_argument, 0, O_DEC_LAYERS}, {"norm", required_argument, 0, O_NORM},
    {"fusion", required_argument, 0, O_FUSION}, {"gate-reduction", required_argument, 0, O_GATE_R},
    {"gate", required_argument, 0, O_GATE}, {"ffn-activation", required_argument, 0, O_FFN_ACT},
    {"position-encoding", required_argument, 0, O_POS_ENC},
    {"enc-branches", required_argument, 0, O_ENC_BR}, {"dec-branches", required_argument, 0, O_DEC_BR},
    {"separate-embeddings", no_argument, 0, O_SEP_EMB}, {"schedule", required_argument, 0, O_SCHED},
    {"lr", required_argument, 0, O_LR}, {"warmup", required_argument, 0, O_WARMUP},
    {"max-tokens", required_argument, 0, O_MAX_TOKENS}, {"max-seqs", required_argument, 0, O_MAX_SEQS},
    {"accum", required_argument, 0, O_ACCUM}, {"dropout", required_argument, 0, O_DROPOUT},
    {"label-smoothing", required_argument, 0, O_LS}, {"clip-norm", required_argument, 0, O_CLIP},
    {"weight-decay", required_argument, 0, O_WD}, {"max-steps", required_argument, 0, O_MAX_STEPS},
    {"adam-betas", required_argument, 0, O_ADAM_BETAS}, {"adam-eps", required_argument, 0, O_ADAM_EPS},
    {"max-epochs", required_argument, 0, O_MAX_EPOCHS}, {"max-time", required_argument, 0, O_MAX_TIME},
    {"seed", required_argument, 0, O_SEED}, {"log-every", required_argument, 0, O_LOG_EVERY},
    {"eval-every", required_argument, 0, O_EVAL_EVERY}, {"save-every", required_argument, 0, O_SAVE_EVERY},
    {"keep", required_argument, 0, O_KEEP}, {"beam", required_argument, 0, O_BEAM},
    {"dev-bleu-max", required_argument, 0, O_DEV_BLEU_MAX}, {"resume", no_argument, 0, O_RESUME},
    {"overwrite", no_argument, 0, O_OVERWRITE}, {"dist-timeout", required_argument, 0, O_DIST_TIMEOUT},
    {"bucket-mb", required_argument, 0, O_BUCKET_MB}, {"no-overlap", no_argument, 0, O_NO_OVERLAP},
    {"device", required_argument, 0, O_DEVICE}, {"no-cache", no_argument, 0, O_NO_CACHE},
    {"quiet", no_argument, 0, O_QUIET}, {"help", no_argument, 0, O_HELP}, {"arch", required_argument, 0, O_ARCH},
    {"mg-layers", required_argument, 0, O_MG_LAYERS}, {"mg-heads", required_argument, 0, O_MG_HEADS},
    {"mg-compose", required_argument, 0, O_MG_COMPOSE}, {"mg-interact", required_argument, 0, O_MG_INTERACT}, {"mg-chunk", required_argument, 0, O_MG_CHUNK},
    {"train-src-spans", required_argument, 0, O_TRAIN_SPANS}, {"dev-src-spans", required_argument, 0, O_DEV_SPANS},
    {"mg-tag-lambda", required_argument, 0, O_MG_TAG_LAMBDA},
    {"ph-enc", required_argument, 0, O_PH_ENC}, {"ph-dec", required_argument, 0, O_PH_DEC},
    {"ph-cross", required_argument, 0, O_PH_CROSS},
    {"emb", required_argument, 0, O_BA_FIRST}, {"hidden", required_argument, 0, O_BA_FIRST + 1},
    {"att", required_argument, 0, O_BA_FIRST + 2}, {"readout", required_argument, 0, O_BA_FIRST + 3},
    {"hist", required_argument, 0, O_BA_FIRST + 4}, {"history", required_argument, 0, O_BA_FIRST + 5},
    {"maxout", no_argument, 0, O_BA_LAST}, {"max-act-bytes", required_argument, 0, O_MAX_ACT_BYTES},
    {0, 0, 0, 0}};

static int bad_value(const char *name, const char *val, const char *why) {
    fprintf(stderr, PROG ": invalid value '%s' for --%s (%s)\n", val, name, why);
    return EXIT_USAGE;
}

/* Integer in [lo, hi]. */
static int parse_long(const char *name, const char *val, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < lo || v > hi) {
        char why[96];
        snprintf(why, sizeof why, "expected an integer in [%ld, %ld]", lo, hi);
        return bad_value(name, val, why);
    }
    *out = v;
    return 0;
}

static int parse_double(const char *name, const char *val, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end || !(v >= lo && v <= hi)) {
        char why[96];
        snprintf(why, sizeof why, "expected a number in [%g, %g]", lo, hi);
        return bad_value(name, val, why);
    }
    *out = v;
    return 0;
}

/* B1,B2: two numbers in [0, 1) (Adam's beta1 and beta2). */
static int parse_betas(const char *name, const char *val, double *b1, double *b2) {
    char *end;
    errno = 0;
    const double x = strtod(val, &end);
    int ok = !errno && end != val && *end == ',' && x >= 0 && x < 1;
    double y = 0;
    if (ok) {
        const char *v2 = end + 1;
        y = strtod(v2, &end);
        ok = !errno && end != v2 && *end == '\0' && y >= 0 && y < 1;
    }
    if (!ok) return bad_value(name, val, "expected B1,B2 with each in [0, 1), e.g. 0.9,0.98");
    *b1 = x;
    *b2 = y;
    return 0;
}

int train_opts_parse(int argc, char **argv, train_opts *o, int *help) {
    defaults(o);
    *help = 0;
    opterr = 0;
    int c, idx = 0, br_set = 0, drop_set = 0;
    const long BIG = 1L << 30;
    while ((c = getopt_long(argc, argv, "", LONG_OPTS, &idx)) != -1) {
        const char *name = NULL;
        for (const struct option *lo = LONG_OPTS; lo->name; lo++)
            if (lo->val == c) name = lo->name;
        int r = 0;
        switch (c) {
        case O_TRAIN_SRC: o->train_src = optarg; break;
        case O_TRAIN_TGT: o->train_tgt = optarg; break;
        case O_DEV_SRC: o->dev_src = optarg; break;
        case O_DEV_TGT: o->dev_tgt = optarg; break;
        case O_OUT: o->out_dir = optarg; break;
        case O_SPM: o->spm = optarg; break;
        case O_SPM_VOCAB: r = parse_long(name, optarg, 300, 1000000, &o->spm_vocab); break;
        case O_IDS: o->ids = 1; break;
        case O_VOCAB: r = parse_long(name, optarg, 5, 1 << 22, &o->vocab); break;
        case O_MAX_LEN: r = parse_long(name, optarg, 1, 4096, &o->max_len); break;
        case O_MAX_RATIO: r = parse_double(name, optarg, 0, 1e6, &o->max_ratio); break;
        case O_INIT: o->init = optarg; break;
        case O_D_MODEL: r = parse_long(name, optarg, 2, 65536, &o->d_model); break;
        case O_HEADS: r = parse_long(name, optarg, 1, 1024, &o->heads); break;
        case O_FF: r = parse_long(name, optarg, 1, 1 << 20, &o->ff); break;
        case O_ENC_LAYERS: r = parse_long(name, optarg, 1, 64, &o->enc_layers); break;
        case O_DEC_LAYERS: r = parse_long(name, optarg, 1, 64, &o->dec_layers); break;
        case O_NORM: o->norm = optarg; break;
        case O_FUSION: o->fusion = optarg; break;
        case O_GATE: o->gate = optarg; break;
        case O_FFN_ACT: o->ffn_act = optarg; break;
        case O_POS_ENC: o->pos_enc = optarg; break;
        case O_GATE_R: r = parse_long(name, optarg, 1, 65536, &o->gate_r); break;
        case O_ENC_BR: o->enc_branches = optarg, br_set |= 1; break;
        case O_DEC_BR: o->dec_branches = optarg, br_set |= 2; break;
        case O_ARCH: o->arch = optarg; break;
        case O_MG_LAYERS: o->mg_layers = optarg; break;
        case O_MG_HEADS: o->mg_heads = optarg; break;
        case O_MG_COMPOSE: o->mg_compose = optarg; break;
        case O_MG_INTERACT: o->mg_interact = optarg; break;
        case O_MG_CHUNK: o->mg_chunk = optarg; break;
        case O_TRAIN_SPANS: o->train_spans = optarg; break;
        case O_DEV_SPANS: o->dev_spans = optarg; break;
        case O_MG_TAG_LAMBDA: r = parse_double(name, optarg, 0, 1e3, &o->mg_tag_lambda); break;
        case O_PH_ENC: o->ph_enc = optarg; break;
        case O_PH_DEC: o->ph_dec = optarg; break;
        case O_PH_CROSS: o->ph_cross = optarg; break;
        case O_BA_LAST: o->ba[6] = "1"; break;
        case O_MAX_ACT_BYTES: r = parse_double(name, optarg, 0, 1e18, &o->max_act_bytes); break;
        case O_DIST_TIMEOUT: r = parse_double(name, optarg, 1, 1e7, &o->dist_timeout); break;
        case O_BUCKET_MB: r = parse_double(name, optarg, 0.001, 1024, &o->bucket_mb); break;
        case O_NO_OVERLAP: o->no_overlap = 1; break;
        case O_SEP_EMB: o->separate_embeddings = 1; break;
        case O_SCHED: o->schedule = optarg; break;
        case O_LR: r = parse_double(name, optarg, 0, 1e3, &o->lr); break;
        case O_WARMUP: r = parse_long(name, optarg, 1, BIG, &o->warmup); break;
        case O_MAX_TOKENS: r = parse_long(name, optarg, 8, 1 << 24, &o->max_tokens); break;
        case O_MAX_SEQS: r = parse_long(name, optarg, 1, 1 << 20, &o->max_seqs); break;
        case O_ACCUM: r = parse_long(name, optarg, 1, 4096, &o->accum); break;
        case O_DROPOUT: r = parse_double(name, optarg, 0, 0.95, &o->dropout), drop_set = 1; break;
        case O_LS: r = parse_double(name, optarg, 0, 0.99, &o->label_smoothing); break;
        case O_CLIP: r = parse_double(name, optarg, 0, 1e9, &o->clip_norm); break;
        case O_WD: r = parse_double(name, optarg, 0, 1, &o->weight_decay); break;
        case O_ADAM_BETAS: r = parse_betas(name, optarg, &o->adam_beta1, &o->adam_beta2); break;
        case O_ADAM_EPS: r = parse_double(name, optarg, 0, 1, &o->adam_eps); break;
        case O_MAX_STEPS: r = parse_long(name, optarg, 0, BIG, &o->max_steps); break;
        case O_MAX_EPOCHS: r = parse_long(name, optarg, 0, BIG, &o->max_epochs); break;
        case O_MAX_TIME: r = parse_double(name, optarg, 0, 1e9, &o->max_time); break;
        case O_SEED: r = parse_long(name, optarg, 0, BIG, &o->seed); break;
        case O_LOG_EVERY: r = parse_long(name, optarg, 1, BIG, &o->log_every); break;
        case O_EVAL_EVERY: r = parse_long(name, optarg, 0, BIG, &o->eval_every); break;
        case O_SAVE_EVERY: r = parse_long(name, optarg, 0, BIG, &o->save_every); break;
        case O_KEEP: r = parse_long(name, optarg, 1, 100000, &o->keep); break;
        case O_BEAM: r = parse_long(name, optarg, 1, 64, &o->beam); break;
        case O_DEV_BLEU_MAX: r = parse_long(name, optarg, 0, BIG, &o->dev_bleu_max); break;
        case O_RESUME: o->resume = 1; break;
        case O_OVERWRITE: o->overwrite = 1; break;
        case O_DEVICE: o->device = optarg; break;
        case O_NO_CACHE: o->no_cache = 1; break;
        case O_QUIET: o->quiet = 1; break;
        case O_HELP: *help = 1; return 0;
        case ':':
            fprintf(stderr, PROG ": option '%s' needs a value\n", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            if (c >= O_BA_FIRST && c < O_BA_LAST) { /* values checked by the family's table */
                o->ba[c - O_BA_FIRST] = optarg;
                break;
            }
            fprintf(stderr, PROG ": unknown option '%s' (see --help)\n", argv[optind - 1]);
            return EXIT_USAGE;
        }
        if (r) return r;
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s' (see --help)\n", argv[optind]);
        return EXIT_USAGE;
    }
    if (!o->train_src || !o->train_tgt || !o->out_dir) {
        fprintf(stderr, PROG ": --train-src, --train-tgt and --out are required (see --help)\n");
        return EXIT_USAGE;
    }
    if ((o->dev_src == NULL) != (o->dev_tgt == NULL)) {
        fprintf(stderr, PROG ": give both --dev-src and --dev-tgt, or neither\n");
        return EXIT_USAGE;
    }
    if (o->ids && o->vocab == 0 && !o->resume && !o->init) {
        fprintf(stderr, PROG ": --ids needs --vocab N (the vocabulary size)\n");
        return EXIT_USAGE;
    }
    if (o->resume && o->overwrite) {
        fprintf(stderr, PROG ": --resume and --overwrite exclude each other\n");
        return EXIT_USAGE;
    }
    if (o->ids && o->spm) {
        fprintf(stderr, PROG ": --ids and --spm exclude each other\n");
        return EXIT_USAGE;
    }
    if (sched_parse(o->schedule) < 0) return bad_value("schedule", o->schedule, "t2t, inverse-sqrt or constant");
    if (strcmp(o->norm, "pre") && strcmp(o->norm, "post")) return bad_value("norm", o->norm, "pre or post");
    if (strcmp(o->fusion, "sum") && strcmp(o->fusion, "concat") && strcmp(o->fusion, "gate"))
        return bad_value("fusion", o->fusion, "sum, concat or gate");
    if (strcmp(o->gate, "branch") && strcmp(o->gate, "shared")) return bad_value("gate", o->gate, "branch or shared");
    if (strcmp(o->ffn_act, "relu") && strcmp(o->ffn_act, "gelu") && strcmp(o->ffn_act, "swish"))
        return bad_value("ffn-activation", o->ffn_act, "relu, gelu or swish");
    if (strcmp(o->pos_enc, "sinusoid") && strcmp(o->pos_enc, "sinusoid-2i") &&
        strcmp(o->pos_enc, "sinusoid-interleaved") && strcmp(o->pos_enc, "none"))
        return bad_value("position-encoding", o->pos_enc, "sinusoid, sinusoid-2i, sinusoid-interleaved or none");
    if (o->gate_r == 0) o->gate_r = strcmp(o->gate, "shared") ? 4 : 16;
    if (o->d_model % o->heads) return bad_value("heads", "", "must divide --d-model");
    const int mgsa = !strcmp(o->arch, "mgsa"), phrase = !strcmp(o->arch, "phrase");
    if (!mgsa && !phrase && strcmp(o->arch, "transformer") && strcmp(o->arch, "banmt"))
        return bad_value("arch", o->arch, "transformer, mgsa, phrase or banmt");
    if (!phrase && (o->ph_enc || o->ph_dec || o->ph_cross)) {
        fprintf(stderr, PROG ": the --ph-* options need --arch phrase\n");
        return EXIT_USAGE;
    }
    int ph_any = 0; /* a phrase attention somewhere: else a plain Transformer labelled phrase */
    for (int k = 0; k < 3; k++) {
        const char *v = k == 0 ? o->ph_enc : k == 1 ? o->ph_dec : o->ph_cross;
        ph_any |= v != NULL && strcmp(v, "none") != 0;
    }
    if (phrase && !ph_any) {
        fprintf(stderr, PROG ": --arch phrase needs a phrase attention: give at least one of --ph-enc S, "
                             "--ph-dec S, --ph-cross S other than none (METHOD:STRUCTURE:DIGITS, e.g. --ph-enc "
                             "queryk:homo:11; see --help); without one the model is a plain Transformer "
                             "(--arch transformer)\n");
        return EXIT_USAGE;
    }
    const int banmt = !strcmp(o->arch, "banmt");
    for (int k = 0; k < 7 && !banmt; k++)
        if (o->ba[k]) {
            fprintf(stderr, PROG ": --%s needs --arch banmt\n", train_opts_ba_keys[k]);
            return EXIT_USAGE;
        }
    if (banmt && !drop_set) o->dropout = 0.2; /* the paper's output-layer dropout */
    if (!mgsa && (o->mg_layers || o->mg_heads || o->mg_compose || o->mg_interact || o->mg_chunk)) {
        fprintf(stderr, PROG ": the --mg-* options need --arch mgsa\n");
        return EXIT_USAGE;
    }
    if (mgsa && o->mg_heads && strstr(o->mg_heads, "syntax") && !o->train_spans) {
        fprintf(stderr, PROG ": --mg-heads: syntax heads need the phrase spans of the training corpus "
                             "(--train-src-spans FILE; nmt-edge-train parse-spans writes one)\n");
        return EXIT_USAGE;
    }
    if (o->dev_spans && !o->dev_src) {
        fprintf(stderr, PROG ": --dev-src-spans needs --dev-src\n");
        return EXIT_USAGE;
    }
    /* MG-SA and the phrase attentions are built on the vanilla Transformer */
    if ((mgsa || phrase) && !(br_set & 1)) o->enc_branches = "global";
    if ((mgsa || phrase) && !(br_set & 2)) o->dec_branches = "global";
    if (o->lr < 0) o->lr = sched_parse(o->schedule) == SCHED_T2T ? 2.0 : 5e-4;
    return 0;
}


int train_opts_warn(const train_opts *o, FILE *f) {
    if (o->max_steps <= 0) return 0;
    int n = 0;
    if (o->max_steps < o->warmup && sched_parse(o->schedule) != SCHED_CONSTANT)
        n += fprintf(f, PROG ": warning: --max-steps %ld is below --warmup %ld: the run ends inside the warm-up "
                         "(the learning rate never reaches its peak)\n", o->max_steps, o->warmup) > 0;
    if (o->max_steps < o->log_every)
        n += fprintf(f, PROG ": warning: --max-steps %ld is below --log-every %ld: no training loss is logged\n",
                     o->max_steps, o->log_every) > 0;
    if (o->dev_src && o->max_steps < o->eval_every)
        n += fprintf(f, PROG ": warning: --max-steps %ld is below --eval-every %ld: the dev set is evaluated at "
                         "the last step only\n", o->max_steps, o->eval_every) > 0;
    if (o->max_steps < o->save_every)
        n += fprintf(f, PROG ": warning: --max-steps %ld is below --save-every %ld: the only checkpoint is the "
                         "one at the last step\n", o->max_steps, o->save_every) > 0;
    return n;
}

/* ---- the options as JSON (log.jsonl's config record) --------------------- */

void train_opts_json_str(FILE *f, const char *s) {
    if (s == NULL) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* A finite number, shortest of %.15g and %.17g that reads back as v (0.1, not 0.10000000000000001). */
static void json_num(FILE *f, double v) {
    char buf[40];
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
    fputs(buf, f);
}

void train_opts_write_json(const train_opts *o, FILE *f) {
    const struct { const char *key, *val; } strs[] = {
        {"train-src", o->train_src}, {"train-tgt", o->train_tgt}, {"dev-src", o->dev_src},
        {"dev-tgt", o->dev_tgt}, {"out", o->out_dir}, {"spm", o->spm}, {"init", o->init},
        {"device", o->device}, {"arch", o->arch}, {"norm", o->norm}, {"fusion", o->fusion}, {"gate", o->gate},
        {"ffn-activation", o->ffn_act}, {"position-encoding", o->pos_enc},
        {"enc-branches", o->enc_branches}, {"dec-branches", o->dec_branches}, {"mg-layers", o->mg_layers},
        {"mg-heads", o->mg_heads}, {"mg-compose", o->mg_compose}, {"mg-interact", o->mg_interact},
        {"mg-chunk", o->mg_chunk}, {"train-src-spans", o->train_spans}, {"dev-src-spans", o->dev_spans},
        {"ph-enc", o->ph_enc}, {"ph-dec", o->ph_dec}, {"ph-cross", o->ph_cross}, {"emb", o->ba[0]},
        {"hidden", o->ba[1]}, {"att", o->ba[2]}, {"readout", o->ba[3]}, {"hist", o->ba[4]},
        {"history", o->ba[5]}, {"schedule", o->schedule}};
    const struct { const char *key; long val; } ints[] = {
        {"spm-vocab", o->spm_vocab}, {"vocab", o->vocab}, {"max-len", o->max_len}, {"d-model", o->d_model},
        {"heads", o->heads}, {"ff", o->ff}, {"enc-layers", o->enc_layers}, {"dec-layers", o->dec_layers},
        {"gate-reduction", o->gate_r}, {"warmup", o->warmup}, {"max-tokens", o->max_tokens},
        {"max-seqs", o->max_seqs}, {"accum", o->accum}, {"max-steps", o->max_steps},
        {"max-epochs", o->max_epochs}, {"seed", o->seed}, {"log-every", o->log_every},
        {"eval-every", o->eval_every}, {"save-every", o->save_every}, {"keep", o->keep}, {"beam", o->beam},
        {"dev-bleu-max", o->dev_bleu_max}};
    const struct { const char *key; double val; } nums[] = {
        {"max-ratio", o->max_ratio}, {"mg-tag-lambda", o->mg_tag_lambda}, {"max-act-bytes", o->max_act_bytes},
        {"lr", o->lr}, {"dropout", o->dropout}, {"label-smoothing", o->label_smoothing},
        {"clip-norm", o->clip_norm}, {"weight-decay", o->weight_decay}, {"adam-eps", o->adam_eps},
        {"max-time", o->max_time}, {"dist-timeout", o->dist_timeout}, {"bucket-mb", o->bucket_mb}};
    const struct { const char *key; int val; } flags[] = {
        {"ids", o->ids}, {"separate-embeddings", o->separate_embeddings}, {"maxout", o->ba[6] != NULL},
        {"resume", o->resume}, {"overwrite", o->overwrite}, {"no-cache", o->no_cache}, {"quiet", o->quiet},
        {"no-overlap", o->no_overlap}};
    const char *sep = "{";
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++, sep = ",") {
        fprintf(f, "%s\"%s\":", sep, strs[i].key);
        train_opts_json_str(f, strs[i].val);
    }
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) fprintf(f, ",\"%s\":%ld", ints[i].key, ints[i].val);
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        fprintf(f, ",\"%s\":", nums[i].key);
        json_num(f, nums[i].val);
    }
    fputs(",\"adam-betas\":[", f);
    json_num(f, o->adam_beta1);
    fputc(',', f);
    json_num(f, o->adam_beta2);
    fputc(']', f);
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        fprintf(f, ",\"%s\":%s", flags[i].key, flags[i].val ? "true" : "false");
    fputc('}', f);
}
