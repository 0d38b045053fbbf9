# SPDX-License-Identifier: MIT
"""_translator.py — nmt_edge.Translator: a device and a session of one model,
with translate_batch, score_batch and generate_tokens as CTranslate2's
Python API has them."""

import ctypes
import logging
import os
import queue
import threading
from ctypes import POINTER, byref, c_char_p, c_float, c_int, c_int32, c_size_t, c_uint32, c_uint64, c_void_p

from . import _lib
from ._errors import Error, check, explain_model
from ._tokenizer import TokenizerView, id_array, struct_dict, to_bytes

_log = logging.getLogger("nmt_edge")
_LEVELS = {"error": _lib.LOG_ERROR, "warning": _lib.LOG_WARN, "info": _lib.LOG_INFO, "debug": _lib.LOG_DEBUG}
_PY_LEVELS = (logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG)
_GEMM = {"auto": _lib.GEMM_AUTO, "own": _lib.GEMM_OWN, "clblast": _lib.GEMM_CLBLAST}
_COMPUTE = {"auto": _lib.FP16_AUTO, "float16": _lib.FP16_ON, "float32": _lib.FP16_OFF}
_FROM_ENV = object()  # cache_dir's default: the programs' directory


def _env(name):
    v = os.environ.get(name)
    return v if v else None


def _env_flag(name):
    v = _env(name)
    return v is not None and v != "0"


def default_cache_dir():
    """The compiled-kernel cache the programs use (tools/tool_env.c):
    $NMT_EDGE_CACHE_DIR, else $XDG_CACHE_HOME/nmt-edge, else
    $HOME/.cache/nmt-edge; None when none of them is set."""
    v = _env("NMT_EDGE_CACHE_DIR")
    if v:
        return v
    if _env("XDG_CACHE_HOME"):
        return os.path.join(os.environ["XDG_CACHE_HOME"], "nmt-edge")
    if _env("HOME"):
        return os.path.join(os.environ["HOME"], ".cache", "nmt-edge")
    return None


def _u32(name, value):
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise Error(_lib.ERR_INVALID_ARGUMENT, "%s must be an integer, got %r" % (name, value)) from None
    if not 0 <= v < (1 << 32):
        raise Error(_lib.ERR_INVALID_ARGUMENT, "%s must be in [0, 2^32), got %d" % (name, v))
    return v


def _log_to(errors):
    """The log callback of a device: the library's messages to the logger
    "nmt_edge", its errors also into `errors` (for the Error raised)."""
    def log(_user, level, msg):
        text = msg.decode("utf-8", "replace") if msg else ""
        if level == _lib.LOG_ERROR:
            errors.append(text)
        _log.log(_PY_LEVELS[level] if 0 <= level < 4 else logging.DEBUG, "%s", text)
    return log


class TranslationResult:
    """One source sentence's hypotheses, best first.

    hypotheses: str (text sources) or lists of ids (id sources)
    token_ids:  each hypothesis's target ids (EOS excluded)
    scores:     the length-normalised scores the list is ranked by
                (return_scores=True; else [])
    logprobs:   the raw sums of the token log-probabilities, EOS included
                (return_scores=True; else [])
    """

    __slots__ = ("hypotheses", "token_ids", "scores", "logprobs")

    def __init__(self, hypotheses, token_ids, scores, logprobs):
        self.hypotheses, self.token_ids, self.scores, self.logprobs = hypotheses, token_ids, scores, logprobs

    def __repr__(self):
        return "TranslationResult(hypotheses=%r, scores=%r)" % (self.hypotheses, self.scores)


class GenerationStepResult:
    """One token of generate_tokens, as it is decoded.

    step:     the decoding step that chose it (0-based)
    token_id: its id
    token:    its piece (e.g. "▁Paket"), None without a tokenizer
    text:     the text it adds to the translation ("".join over the tokens
              gives translate_batch's text); None without a tokenizer
    is_last:  True for the last token of the translation (EOS is not given)
    """

    __slots__ = ("step", "batch_id", "hypothesis_id", "token_id", "token", "text", "is_last")

    def __init__(self, step, token_id, token, text):
        self.step, self.token_id, self.token, self.text = step, token_id, token, text
        self.batch_id = self.hypothesis_id = 0
        self.is_last = False

    def __repr__(self):
        return "GenerationStepResult(step=%d, token_id=%d, token=%r, text=%r, is_last=%r)" % (
            self.step, self.token_id, self.token, self.text, self.is_last)


class _Stream:
    """The tokens each sentence of a translate call adds from one decoding
    step to the next (read with nmt_session_partial in the on_step
    callback), as GenerationStepResults with their text."""

    def __init__(self, n, tok, offset=0):
        self.tok, self.offset = tok, offset
        self.ids = [[] for _ in range(n)]
        self.emitted = [b""] * n  # text given out so far, per sentence

    def step(self, lib, sess, step):
        out = []
        ptr, n, done = POINTER(c_int32)(), c_uint32(), c_int()
        for i in range(len(self.ids)):
            check(lib.nmt_session_partial(sess, i, byref(ptr), byref(n), byref(done)))
            ids = ptr[:n.value]
            prev = self.ids[i]
            if ids[:len(prev)] != prev:  # beam search changed its best hypothesis: not a stream
                continue
            for k in range(len(prev), len(ids)):
                out.append(self._token(i, step, ids, k))
            self.ids[i] = ids
        return out

    def _token(self, i, step, ids, k):
        t = ids[k]
        if self.tok is None:
            r = GenerationStepResult(step, t, None, None)
        else:
            text = self.tok.decode_bytes(ids[:k + 1])
            add = b""
            if text.startswith(self.emitted[i]):
                add = text[len(self.emitted[i]):]
                # hold back an incomplete UTF-8 sequence (byte fallback) until it completes
                while add.endswith(b"\xef\xbf\xbd"):
                    add = add[:-3]
                for cut in range(len(add), max(len(add) - 4, -1), -1):
                    try:
                        add[:cut].decode("utf-8")
                        add = add[:cut]
                        break
                    except UnicodeDecodeError:
                        continue
                self.emitted[i] += add
            r = GenerationStepResult(step, t, self.tok.piece(t), add.decode("utf-8"))
        r.batch_id = self.offset + i
        return r

    def rest(self, i):
        """The text sentence i's final tokens still owe (what was held back)."""
        if self.tok is None:
            return None
        final = self.tok.decode_bytes(self.ids[i])
        if not final.startswith(self.emitted[i]):
            return ""
        return final[len(self.emitted[i]):].decode("utf-8", "replace")


class _Batch:
    """A source (or target) batch in the form its C call takes, with the
    memory it points at kept alive."""

    def __init__(self, items):
        self.text = all(isinstance(x, (str, bytes)) for x in items)
        if self.text:
            data = [to_bytes(x) for x in items]
            self._keep = data
            n = len(data)
            self.c = _lib.nmt_text_batch((c_char_p * max(n, 1))(*data), (c_size_t * max(n, 1))(*map(len, data)), n)
        else:
            if any(isinstance(x, (str, bytes)) for x in items):
                raise TypeError("a batch is all text (str) or all token ids (lists of ints), not both")
            arrays = [id_array(x) for x in items]
            self._keep = arrays
            n = len(arrays)
            ptrs = (POINTER(c_int32) * max(n, 1))(*[ctypes.cast(a, POINTER(c_int32)) for a, _ in arrays])
            self.c = _lib.nmt_batch(ptrs, (c_uint32 * max(n, 1))(*[k for _, k in arrays]), n)
        self._keep_c = self.c


def _sentences(batch):
    """A batch as a list (a lone string is a mistake: a list of its characters)."""
    if isinstance(batch, (str, bytes)):
        raise TypeError("a batch is a list of sentences (str) or of token-id lists, not one %s"
                        % type(batch).__name__)
    return list(batch)


def _prefix_arrays(opts, prefixes, keep):
    """Fill the forced target prefix fields of opts (None entries: none):
    prefix_text for text prefixes, prefix for id lists (either form with a
    text source; ids only with an id source, as the library has it)."""
    if prefixes is None:
        return
    n = len(prefixes)
    given = [p for p in prefixes if p is not None]
    text = all(isinstance(p, (str, bytes)) for p in given)
    if not text and any(isinstance(p, (str, bytes)) for p in given):
        raise TypeError("target_prefix is all text or all token ids, not both")
    if text:
        data = [to_bytes(p) if p is not None else b"" for p in prefixes]
        arr = (c_char_p * n)(*data)
        lens = (c_size_t * n)(*map(len, data))
        keep.extend([data, arr, lens])
        opts.prefix_text, opts.prefix_text_len = ctypes.cast(arr, POINTER(c_char_p)), lens
    else:
        arrays = [id_array(p if p is not None else []) for p in prefixes]
        ptrs = (POINTER(c_int32) * n)(*[ctypes.cast(a, POINTER(c_int32)) for a, _ in arrays])
        lens = (c_uint32 * n)(*[k for _, k in arrays])
        keep.extend([arrays, ptrs, lens])
        opts.prefix, opts.prefix_len = ptrs, lens


def plan_token_batches(lengths, max_tokens, max_batch):
    """Token batches (nmt_batch_plan_tokens): the indices of `lengths`
    (source tokens per sentence, no EOS) sorted shortest first, ties in
    input order, cut into batches of at most max_tokens padded tokens
    (sentences x (longest + 1)) and max_batch sentences; a sentence over the
    budget is a batch of its own.  Returns a list of index lists."""
    lengths = [_u32("lengths", x) for x in lengths]
    n = len(lengths)
    lens = (c_uint32 * max(n, 1))(*lengths)
    order, sizes, nb = (c_uint32 * max(n, 1))(), (c_uint32 * max(n, 1))(), c_uint32()
    check(_lib.load().nmt_batch_plan_tokens(lens, n, _u32("max_tokens", max_tokens), _u32("max_batch", max_batch),
                                            order, sizes, byref(nb)))
    out, at = [], 0
    for b in range(nb.value):
        out.append(order[at:at + sizes[b]])
        at += sizes[b]
    return out


class Translator:
    """A model loaded on an OpenCL device, ready to translate.

    model_path:   an .nmt file (read at creation only)
    device:       "P:D", "gpu", "cpu", "accelerator" or a substring of the
                  device or platform name; None: $NMT_EDGE_DEVICE, else the
                  library's default (the first GPU, else the first device),
                  as the nmt-edge program does
    max_batch, max_beam, max_src_len, max_tgt_len, max_text_bytes:
                  the session's limits (nmt_limits; 0 = the library's
                  default); every buffer is planned from them at creation
    compute_type: "default" (fp16 compute where the model and device have
                  it, unless $NMT_EDGE_NO_FP16, as nmt-edge), "auto",
                  "float16" or "float32" (nmt_session_params.fp16_compute)
    cache_dir:    the compiled-kernel cache; default the programs' one
                  ($NMT_EDGE_CACHE_DIR, $XDG_CACHE_HOME/nmt-edge or
                  ~/.cache/nmt-edge); None: no cache
    gemm:         "auto", "own" or "clblast"
    kernel_pack, binaries_only: nmt_device_params's; default
                  $NMT_EDGE_KERNEL_PACK / $NMT_EDGE_BINARIES_ONLY
    log_level:    "error", "warning" (default), "info" or "debug": the
                  library's log, sent to the Python logger "nmt_edge"

    A translator is one device handle and one session: calls on it are
    serialised by a lock (the library's contract: one thread at a time);
    translators in different threads run in parallel.  close() (or a
    `with` block, or garbage collection) releases both.
    """

    def __init__(self, model_path, device=None, *, max_batch=8, max_beam=4, max_src_len=256, max_tgt_len=0,
                 max_text_bytes=2048, compute_type="default", cache_dir=_FROM_ENV, gemm="auto", kernel_pack=None,
                 binaries_only=None, log_level="warning"):
        self._session = None
        self._device = None
        self._lock = threading.Lock()
        self._streaming = None  # the thread consuming a live generate_tokens, if any
        self._cancel = c_int(0)
        self._errors = []  # the library's error messages of the call in progress
        lib = _lib.load()
        if log_level not in _LEVELS:
            raise Error(_lib.ERR_INVALID_ARGUMENT, "log_level must be one of %s" % ", ".join(_LEVELS))
        if gemm not in _GEMM:
            raise Error(_lib.ERR_INVALID_ARGUMENT, "gemm must be one of %s" % ", ".join(_GEMM))
        if compute_type == "default":
            fp16 = _lib.FP16_OFF if _env_flag("NMT_EDGE_NO_FP16") else _lib.FP16_AUTO
        elif compute_type in _COMPUTE:
            fp16 = _COMPUTE[compute_type]
        else:
            raise Error(_lib.ERR_INVALID_ARGUMENT, "compute_type must be default, auto, float16 or float32")
        self._path = os.fsencode(model_path)
        limits = _lib.nmt_limits(_u32("max_src_len", max_src_len), _u32("max_tgt_len", max_tgt_len),
                                 _u32("max_batch", max_batch), _u32("max_beam", max_beam),
                                 _u32("max_text_bytes", max_text_bytes))
        sp = _lib.nmt_session_params(model_path=self._path, limits=limits, sampling=1, fp16_compute=fp16)
        need = c_size_t()
        device_bytes = c_uint64()
        st = lib.nmt_session_arena_size(byref(sp), byref(need), byref(device_bytes))
        if st == _lib.ERR_INVALID_ARGUMENT:
            raise Error(st, "no session can be planned for max_src_len %d, max_tgt_len %d, max_batch %d and "
                            "max_beam %d (lower them)" % (max_src_len, max_tgt_len, max_batch, max_beam))
        check(st, explain_model(self._path, st))
        self.arena_bytes, self.device_bytes = need.value, device_bytes.value

        # the device (its parameters' strings stay referenced: the handle may keep them)
        if cache_dir is _FROM_ENV:
            cache_dir = default_cache_dir()
        if kernel_pack is None:
            kernel_pack = _env("NMT_EDGE_KERNEL_PACK")
        if binaries_only is None:
            binaries_only = _env_flag("NMT_EDGE_BINARIES_ONLY")
        spec = device if device else _env("NMT_EDGE_DEVICE")
        self._strings = [os.fsencode(x) if x is not None else None
                         for x in (spec, cache_dir, _env("NMT_EDGE_KERNEL_DIR"), kernel_pack)]
        self._log_fn = _lib.LOG_FN(_log_to(self._errors))  # no reference back to self: no cycle
        dp = _lib.nmt_device_params(device=self._strings[0], cache_dir=self._strings[1], kernel_dir=self._strings[2],
                                    gemm=_GEMM[gemm], log=self._log_fn, log_level=_LEVELS[log_level],
                                    kernel_pack=self._strings[3], binaries_only=1 if binaries_only else 0)
        self._device_mem = _lib.AlignedBuffer(lib.nmt_device_footprint(), _lib.DEVICE_ALIGNMENT)
        dev = c_void_p()
        self._errors.clear()
        st = lib.nmt_device_open(byref(dp), c_void_p(self._device_mem.address), self._device_mem.size, byref(dev))
        check(st, "device %s%s" % (spec or "default", self._logged()))
        self._device = dev

        # the session, in an arena of exactly the size asked
        self._arena = _lib.AlignedBuffer(need.value, _lib.ARENA_ALIGNMENT)
        s = c_void_p()
        self._errors.clear()
        st = lib.nmt_session_create(dev, byref(sp), c_void_p(self._arena.address), need.value, byref(s))
        if st != _lib.OK:
            reason = explain_model(self._path, st) or self._logged().lstrip(": ")
            cl = lib.nmt_device_last_cl_error(dev)
            self.close()
            raise Error(st, reason, cl)
        self._session = s
        self._tok = [None, None]
        for side in (0, 1):
            t = lib.nmt_session_tokenizer(s, side)
            self._tok[side] = TokenizerView(c_void_p(t), self._arena) if t else None

    # ---- life cycle ---------------------------------------------------------

    def close(self):
        """Release the session and the device (idempotent).  Waits for a
        call in progress in another thread; cancels a live generate_tokens."""
        self._cancel.value = 1
        with self._lock:
            lib = _lib.load()
            if self._session is not None:
                lib.nmt_session_destroy(self._session)
                self._session = None
            if self._device is not None:
                lib.nmt_device_close(self._device)
                self._device = None
            self._arena = self._device_mem = None

    @property
    def closed(self):
        return self._session is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_session", None) is not None or getattr(self, "_device", None) is not None:
                self.close()
        except Exception:  # interpreter shutdown: ctypes may be gone
            pass

    def cancel(self):
        """Stop the translate_batch / generate_tokens call in progress (from
        another thread): it raises Error NMT_ERR_CANCELLED, whose .results
        keep the sentences that had finished; the translator stays usable."""
        self._cancel.value = 1

    # ---- what the session is ------------------------------------------------

    def model_info(self):
        """nmt_model_info of the loaded model, as a dict."""
        info = _lib.nmt_model_info()
        with self._enter() as (lib, s):
            lib.nmt_session_model_info(s, byref(info))
        return struct_dict(info)

    def limits(self):
        """The session's effective limits (defaults filled in), as a dict."""
        lim = _lib.nmt_limits()
        with self._enter() as (lib, s):
            lib.nmt_session_limits(s, byref(lim))
        return struct_dict(lim)

    def device_info(self):
        """nmt_device_info of the translator's device, as a dict."""
        info = _lib.nmt_device_info()
        with self._enter() as (lib, _):
            lib.nmt_device_get_info(self._device, byref(info))
        return struct_dict(info)

    # ---- tokenizer ------------------------------------------------------------

    def _tokenizer(self, target):
        t = self._tok[1 if target else 0]
        if t is None:
            raise Error(_lib.ERR_NO_TOKENIZER, os.fsdecode(self._path))
        return t

    def tokenize(self, text, target=False):
        """The ids of `text` with the model's source (or target) tokenizer."""
        with self._enter():
            return self._tokenizer(target).encode(text)

    def detokenize(self, ids, target=True):
        """The text of `ids` with the model's target (or source) tokenizer."""
        with self._enter():
            return self._tokenizer(target).decode(ids)

    # ---- translation ----------------------------------------------------------

    def translate_batch(self, source, *, beam_size=4, num_hypotheses=1, length_penalty=0.6,
                        max_decoding_length=0, min_decoding_length=0, no_repeat_ngram_size=0,
                        repetition_penalty=0.0, coverage_penalty=0.0, sampling_topk=1, sampling_temperature=1.0,
                        sampling_seed=0, max_input_ratio=0.0, max_input_offset=0.0, target_prefix=None,
                        return_scores=False, max_batch_size=0, callback=None, max_batch_tokens=0):
        """Translate a list of sentences: text (str, through the model's
        embedded tokenizer) or token ids (lists of ints, no EOS).

        beam_size (1 = greedy), num_hypotheses (n-best, <= beam_size),
        length_penalty (GNMT alpha), max_decoding_length (0: source length
        + 50), min_decoding_length, no_repeat_ngram_size,
        repetition_penalty, coverage_penalty (needs alignments: not
        planned by this package), sampling_topk (1: search; 0: sample from
        all tokens; k: the k most probable; needs beam_size 1),
        sampling_temperature, sampling_seed, max_input_ratio /
        max_input_offset (max target tokens = a * source tokens + b when
        max_decoding_length is 0), target_prefix (one per sentence: text,
        ids or None) and max_batch_size (sentences per library call; 0: the
        translator's max_batch) map to nmt_decode_opts.  Returns one
        TranslationResult per sentence, in order.

        max_batch_tokens > 0: token batches (CTranslate2's
        batch_type="tokens"): the sentences are sorted by source tokens and
        translated in calls of at most that many padded tokens and
        max_batch_size sentences (plan_token_batches); the results are the
        same, in input order.  Not with sampling or a callback.

        callback: called with a GenerationStepResult (batch_id: the
        sentence's index in `source`; is_last not set) for every token a
        sentence's best hypothesis gains at a decoding step, for greedy
        search and sampling (with beam search the best hypothesis may
        change: only the steps that extend it are reported).  A true return
        stops the whole call: Error NMT_ERR_CANCELLED, whose .results has
        the sentences that had finished (None for the others), as
        Translator.cancel() does."""
        opts = self._decode_opts(beam_size, num_hypotheses, length_penalty, max_decoding_length,
                                 min_decoding_length, no_repeat_ngram_size, repetition_penalty, coverage_penalty,
                                 sampling_topk, sampling_temperature, sampling_seed, max_input_ratio,
                                 max_input_offset)
        source = _sentences(source)
        if target_prefix is not None and len(target_prefix) != len(source):
            raise Error(_lib.ERR_INVALID_ARGUMENT, "target_prefix has %d entries for %d sentences" %
                        (len(target_prefix), len(source)))
        if max_batch_tokens:
            if sampling_topk != 1 or callback is not None:
                raise Error(_lib.ERR_INVALID_ARGUMENT, "max_batch_tokens: not with %s (sentence i of a call samples "
                            "with seed + i; a callback's batch_id is its call's)" %
                            ("sampling" if sampling_topk != 1 else "a callback"))
            return self._translate_tokens(source, opts, target_prefix, return_scores, max_batch_size,
                                          max_batch_tokens)
        results = []
        with self._enter() as (lib, s):
            step = self._chunk(max_batch_size)
            for i in range(0, len(source), step):
                chunk = source[i:i + step]
                batch = _Batch(chunk)
                keep = []
                _prefix_arrays(opts, None if target_prefix is None else target_prefix[i:i + step], keep)
                failed = []
                if callback is not None:
                    opts.on_step = self._callback(lib, _Stream(len(chunk), self._tok[1], i), callback, failed)
                st = self._translate(lib, s, batch, opts)
                if failed:
                    raise failed[0]
                if st not in (_lib.OK, _lib.ERR_CANCELLED):
                    raise self._error(st, self._why(st, chunk, i, opts))
                got = self._results(lib, s, len(chunk), batch.text, return_scores, finished_only=st != _lib.OK)
                if st != _lib.OK:  # the sentences that had finished keep their results
                    err = self._error(st)
                    err.results = results + got + [None] * (len(source) - i - len(chunk))
                    raise err
                results.extend(got)
        return results

    def _translate_tokens(self, source, opts, target_prefix, return_scores, max_batch_size, max_batch_tokens):
        """translate_batch with max_batch_tokens: token batches, results put back in input order."""
        results = [None] * len(source)
        with self._enter() as (lib, s):
            step = self._chunk(max_batch_size)
            lim = _lib.nmt_limits()
            lib.nmt_session_limits(s, byref(lim))
            lens = []
            for x in source:
                if isinstance(x, (str, bytes)) and self._tok[0] is not None and \
                        len(to_bytes(x)) <= lim.max_text_bytes:
                    lens.append(len(self._tok[0].encode(x)))
                else:  # ids, or text the call refuses (and says why)
                    lens.append(len(x))
            for idx in plan_token_batches(lens, max_batch_tokens, step):
                chunk = [source[k] for k in idx]
                batch = _Batch(chunk)
                keep = []
                _prefix_arrays(opts, None if target_prefix is None else [target_prefix[k] for k in idx], keep)
                st = self._translate(lib, s, batch, opts)
                if st not in (_lib.OK, _lib.ERR_CANCELLED):  # named by its index in `source`
                    raise self._error(st, self._why(st, chunk if st == _lib.ERR_LIMIT_EXCEEDED else source, 0, opts))
                got = self._results(lib, s, len(chunk), batch.text, return_scores, finished_only=st != _lib.OK)
                for k, res in zip(idx, got):
                    results[k] = res
                if st != _lib.OK:
                    err = self._error(st)
                    err.results = results
                    raise err
        return results

    def score_batch(self, source, target, *, max_batch_size=0):
        """log P(target | source) (natural log, EOS included) of each pair,
        by forced decoding: text pairs or id pairs.  Returns a list of
        floats."""
        source, target = _sentences(source), _sentences(target)
        if len(source) != len(target):
            raise Error(_lib.ERR_INVALID_ARGUMENT, "%d sources for %d targets" % (len(source), len(target)))
        out = []
        with self._enter() as (lib, s):
            step = self._chunk(max_batch_size)
            for i in range(0, len(source), step):
                src, tgt = _Batch(source[i:i + step]), _Batch(target[i:i + step])
                if src.text != tgt.text:
                    raise TypeError("source and target are both text or both token ids")
                lp = (c_float * max(src.c.n, 1))()
                fn = lib.nmt_session_score_text if src.text else lib.nmt_session_score
                self._errors.clear()
                st = fn(s, byref(src.c), byref(tgt.c), lp)
                if st != _lib.OK:
                    why = self._why(st, source[i:i + step], i) or self._why(st, target[i:i + step], i, target=True)
                    raise self._error(st, why)
                out.extend(lp[:src.c.n])
        return out

    def generate_tokens(self, source, *, max_decoding_length=0, min_decoding_length=0, no_repeat_ngram_size=0,
                        repetition_penalty=0.0, sampling_topk=1, sampling_temperature=1.0, sampling_seed=0,
                        max_input_ratio=0.0, max_input_offset=0.0, target_prefix=None):
        """Translate one sentence (text or ids) greedily, or by sampling
        (sampling_topk != 1), yielding a GenerationStepResult per target
        token as the decoder chooses it (through the library's on_step
        callback and nmt_session_partial).  The tokens are those of
        translate_batch([source], beam_size=1, ...)[0]; "".join of their
        .text is its text.  Leaving the loop early cancels the decoding
        (NMT_ERR_CANCELLED inside; nothing raised)."""
        lib = _lib.load()
        if not _lib.has("nmt_session_partial"):
            raise Error(_lib.ERR_UNSUPPORTED, "%s has no streaming (nmt_session_partial)" % _lib.library_path())
        opts = self._decode_opts(1, 1, 0.6, max_decoding_length, min_decoding_length, no_repeat_ngram_size,
                                 repetition_penalty, 0.0, sampling_topk, sampling_temperature, sampling_seed,
                                 max_input_ratio, max_input_offset)
        batch = _Batch([source])
        keep = []
        _prefix_arrays(opts, None if target_prefix is None else [target_prefix], keep)
        items = queue.Queue()
        stream = _Stream(1, self._tok[1])
        state = {"error": None, "stop": False}

        def on_step(_user, sess, step):
            try:
                if state["stop"]:
                    return 1
                for r in stream.step(lib, sess, step):
                    items.put(("token", r))
                return 0
            except BaseException as e:  # noqa: B902 - handed to the consumer
                state["error"] = e
                return 1

        callback = _lib.STEP_FN(on_step)
        opts.on_step = callback
        me = threading.get_ident()

        def worker():
            try:
                with self._enter() as (_, s):
                    items.put(("end", self._translate(lib, s, batch, opts, reset_cancel=False)))
            except BaseException as e:  # noqa: B902 - handed to the consumer
                items.put(("raise", e))

        # the consumer's thread may not call this translator until the generator ends
        if self._streaming == me:
            raise Error(_lib.ERR_INVALID_ARGUMENT, "another generate_tokens of this translator is live in this thread")
        self._check_open()
        self._cancel.value = 0
        self._streaming = me
        thread = threading.Thread(target=worker, name="nmt_edge.generate_tokens", daemon=True)
        thread.start()
        pending = None
        try:
            while True:
                item = items.get()
                if item[0] == "raise":
                    raise item[1]
                if item[0] == "end":
                    status = item[1]
                    break
                if pending is not None:
                    yield pending
                pending = item[1]
            if state["error"] is not None:
                raise state["error"]
            if status != _lib.OK:
                raise self._error(status)
            if pending is not None:
                if pending.text is not None:  # what a held-back byte sequence still owes
                    pending.text += stream.rest(0)
                pending.is_last = True
                yield pending
        finally:
            state["stop"] = True
            self._cancel.value = 1  # an abandoned generator stops the decoding
            thread.join()
            self._streaming = None
            self._cancel.value = 0
            del keep, callback

    # ---- internals --------------------------------------------------------------

    @staticmethod
    def _callback(lib, stream, callback, failed):
        def on_step(_user, sess, step):
            try:
                for r in stream.step(lib, sess, step):
                    if callback(r):
                        return 1
                return 0
            except BaseException as e:  # noqa: B902 - raised again after the call
                failed.append(e)
                return 1
        return _lib.STEP_FN(on_step)

    def _decode_opts(self, beam_size, num_hypotheses, length_penalty, max_decoding_length, min_decoding_length,
                     no_repeat_ngram_size, repetition_penalty, coverage_penalty, sampling_topk,
                     sampling_temperature, sampling_seed, max_input_ratio, max_input_offset):
        o = _lib.nmt_decode_opts()
        o.beam = _u32("beam_size", beam_size)
        o.alpha, o.alpha_set = float(length_penalty), 1
        o.max_len = _u32("max_decoding_length", max_decoding_length)
        o.n_best = _u32("num_hypotheses", num_hypotheses)
        o.min_len = _u32("min_decoding_length", min_decoding_length)
        o.no_repeat_ngram = _u32("no_repeat_ngram_size", no_repeat_ngram_size)
        o.max_len_a, o.max_len_b = float(max_input_ratio), float(max_input_offset)
        o.coverage_penalty = float(coverage_penalty)
        o.repetition_penalty = float(repetition_penalty)
        if _u32("sampling_topk", sampling_topk) != 1:
            o.sampling, o.sampling_topk = 1, sampling_topk
            o.sampling_temperature = float(sampling_temperature)
            if not 0 <= int(sampling_seed) < (1 << 64):
                raise Error(_lib.ERR_INVALID_ARGUMENT, "sampling_seed must be in [0, 2^64)")
            o.seed = int(sampling_seed)
        o.cancel = ctypes.pointer(self._cancel)
        return o

    def _translate(self, lib, s, batch, opts, reset_cancel=True):
        if reset_cancel:
            self._cancel.value = 0
        self._errors.clear()
        fn = lib.nmt_session_translate_text if batch.text else lib.nmt_session_translate
        return fn(s, byref(batch.c), byref(opts))

    def _results(self, lib, s, n, text, with_scores, finished_only):
        out = []
        ptr, length, score, logprob = POINTER(c_int32)(), c_uint32(), c_float(), c_float()
        tptr, tlen = c_void_p(), c_size_t()
        for i in range(n):
            k = lib.nmt_session_n_results(s, i)
            if finished_only and k == 0:
                out.append(None)
                continue
            hyps, ids, scores, lps = [], [], [], []
            for r in range(k):
                check(lib.nmt_session_result(s, i, r, byref(ptr), byref(length), byref(score), byref(logprob)))
                ids.append(ptr[:length.value])
                if text:
                    check(lib.nmt_session_result_text(s, i, r, byref(tptr), byref(tlen), None, None))
                    hyps.append(ctypes.string_at(tptr.value, tlen.value).decode("utf-8", "replace")
                                if tlen.value else "")
                else:
                    hyps.append(ids[-1])
                if with_scores:
                    scores.append(score.value)
                    lps.append(logprob.value)
            out.append(TranslationResult(hyps, ids, scores, lps))
        return out

    def _chunk(self, max_batch_size):
        step = _u32("max_batch_size", max_batch_size)
        if step == 0:
            lim = _lib.nmt_limits()
            _lib.load().nmt_session_limits(self._session, byref(lim))
            step = lim.max_batch
        return step

    def _logged(self):
        return ": " + "; ".join(self._errors) if self._errors else ""

    def _error(self, status, why=""):
        cl = _lib.load().nmt_session_last_cl_error(self._session) if self._session else 0
        return Error(status, "; ".join([why] * bool(why) + self._errors), cl)

    def _why(self, status, chunk, offset, opts=None, target=False):
        """Which sentence or limit a refused call broke, in words ("" when
        it is not one of those)."""
        lim = _lib.nmt_limits()
        _lib.load().nmt_session_limits(self._session, byref(lim))
        if status == _lib.ERR_LIMIT_EXCEEDED and opts is not None:
            return ("%d sentences, beam %d, %d hypotheses; the translator's limits: max_batch %d, max_beam %d"
                    % (len(chunk), opts.beam or 4, opts.n_best or 1, lim.max_batch, lim.max_beam))
        if status != _lib.ERR_INPUT_TOO_LONG:
            return ""
        side = "target" if target else "sentence"
        max_len = lim.max_tgt_len if target else lim.max_src_len
        tok = self._tok[1 if target else 0]
        for k, x in enumerate(chunk):
            if isinstance(x, (str, bytes)):
                data = to_bytes(x)
                if len(data) > lim.max_text_bytes:
                    return "%s %d has %d bytes, more than max_text_bytes %d" % (side, offset + k, len(data),
                                                                              lim.max_text_bytes)
                n = len(tok.encode(data)) if tok is not None else 0
            else:
                n = len(x)
            if n > max_len:
                return "%s %d has %d tokens, more than %s %d" % (side, offset + k, n,
                                                                 "max_tgt_len" if target else "max_src_len", max_len)
        return ""

    def _check_open(self):
        if self._session is None:
            raise Error(_lib.ERR_INVALID_ARGUMENT, "the translator is closed")

    def _enter(self):
        if self._streaming == threading.get_ident():
            raise Error(_lib.ERR_INVALID_ARGUMENT,
                        "a generate_tokens of this translator is live in this thread: finish or close it first")
        return _Held(self)


class _Held:
    """The translator's lock, held for one call (checks it is still open)."""

    def __init__(self, tr):
        self.tr = tr

    def __enter__(self):
        self.tr._lock.acquire()
        if self.tr._session is None:
            self.tr._lock.release()
            raise Error(_lib.ERR_INVALID_ARGUMENT, "the translator is closed")
        return _lib.load(), self.tr._session

    def __exit__(self, *exc):
        self.tr._lock.release()
