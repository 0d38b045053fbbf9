# SPDX-License-Identifier: MIT
"""test_errors.py — every refusal is an nmt_edge.Error with the library's
status, its name and words, and the reason where one is known; a closed
translator refuses every call."""

import pytest

import nmt_edge

from conftest import EN_DE, SENTENCES


def status_of(fn, *args, **kw):
    with pytest.raises(nmt_edge.Error) as e:
        fn(*args, **kw)
    err = e.value
    assert str(err).startswith(err.name + ": " + err.description)
    return err


def test_missing_file(tmp_path):
    err = status_of(nmt_edge.Translator, str(tmp_path / "nope.nmt"))
    assert (err.status, err.name) == (3, "NMT_ERR_IO")
    assert err.description == "file input/output error"
    assert "nope.nmt" in err.reason and "No such file" in err.reason
    assert isinstance(err, RuntimeError)


def test_refused_models_say_why(tmp_path):
    with open(EN_DE, "rb") as f:
        data = f.read()
    cases = [("magic.nmt", b"not a model at all" * 10, "NMT_ERR_MODEL_BAD_MAGIC", "NMTEDGE"),
             ("short.nmt", data[:len(data) // 2], "NMT_ERR_MODEL_TRUNCATED", "header says"),
             ("crc.nmt", data[:len(data) // 2] + bytes([data[len(data) // 2] ^ 0xFF]) + data[len(data) // 2 + 1:],
              "NMT_ERR_MODEL_CHECKSUM", "CRC-32")]
    for name, image, status, words in cases:
        path = tmp_path / name
        path.write_bytes(image)
        err = status_of(nmt_edge.Translator, str(path))
        assert err.name == status and words in err.reason, err
        assert status_of(nmt_edge.model_info, path).name == status


def test_bad_limits():
    err = status_of(nmt_edge.Translator, EN_DE, max_batch=100000)
    assert err.name == "NMT_ERR_INVALID_ARGUMENT" and "max_batch 100000" in err.reason
    assert status_of(nmt_edge.Translator, EN_DE, max_batch=-1).name == "NMT_ERR_INVALID_ARGUMENT"
    assert status_of(nmt_edge.Translator, EN_DE, compute_type="int4").name == "NMT_ERR_INVALID_ARGUMENT"
    assert status_of(nmt_edge.Translator, EN_DE, device="no-such-device-anywhere").name == "NMT_ERR_NO_DEVICE"


def test_requests_over_the_limits(en_de):
    err = status_of(en_de.translate_batch, SENTENCES[:9], max_batch_size=9)  # the translator has max_batch 8
    assert err.name == "NMT_ERR_LIMIT_EXCEEDED" and "max_batch 8" in err.reason
    assert status_of(en_de.translate_batch, ["a"], beam_size=5).name == "NMT_ERR_LIMIT_EXCEEDED"
    assert status_of(en_de.translate_batch, ["a"], beam_size=2, num_hypotheses=3).name != "NMT_OK"
    assert status_of(en_de.translate_batch, ["a"], beam_size=-1).name == "NMT_ERR_INVALID_ARGUMENT"
    assert status_of(en_de.translate_batch, ["a"], beam_size=2, sampling_topk=5).name == "NMT_ERR_INVALID_ARGUMENT"
    assert status_of(en_de.translate_batch, ["a"], coverage_penalty=0.5).name == "NMT_ERR_NO_ALIGNMENTS"
    assert status_of(en_de.score_batch, ["a"], ["b", "c"]).name == "NMT_ERR_INVALID_ARGUMENT"
    err = status_of(en_de.translate_batch, ["ok", "x" * 3000])
    assert err.name == "NMT_ERR_INPUT_TOO_LONG" and "sentence 1 has 3000 bytes" in err.reason
    err = status_of(en_de.translate_batch, [[5] * 10, [5] * 300])
    assert err.name == "NMT_ERR_INPUT_TOO_LONG" and "sentence 1 has 300 tokens" in err.reason
    with pytest.raises(TypeError):
        en_de.translate_batch(["text", [1, 2]])
    with pytest.raises(TypeError):  # one sentence, not a list of them
        en_de.translate_batch("text")
    with pytest.raises(TypeError):
        en_de.score_batch(["a"], "b")
    assert en_de.translate_batch(SENTENCES[:1])[0].hypotheses[0].startswith("Dieses Paket")  # still usable


def test_bad_tokens(en_de, rnd):
    assert status_of(en_de.translate_batch, [[1, 2, 99999]]).name == "NMT_ERR_TOKEN_OUT_OF_RANGE"
    assert status_of(en_de.translate_batch, [[1, 2 ** 40]]).name == "NMT_ERR_TOKEN_OUT_OF_RANGE"
    assert status_of(en_de.detokenize, [99999]).name == "NMT_ERR_TOKEN_OUT_OF_RANGE"
    assert status_of(rnd.translate_batch, [[1, 60]]).name == "NMT_ERR_TOKEN_OUT_OF_RANGE"  # src_vocab 50
    # a model without a tokenizer has no text calls
    for call in (lambda: rnd.translate_batch(["text"]), lambda: rnd.score_batch(["a"], ["b"]),
                 lambda: rnd.tokenize("a"), lambda: rnd.detokenize([1]), lambda: list(rnd.generate_tokens("a"))):
        assert status_of(call).name == "NMT_ERR_NO_TOKENIZER"


def test_closed_translator_refuses(random_model):
    tr = nmt_edge.Translator(random_model)
    assert not tr.closed and tr.translate_batch([[1, 2]])[0].hypotheses
    tr.close()
    assert tr.closed
    for call in (lambda: tr.translate_batch([[1, 2]]), lambda: tr.score_batch([[1]], [[2]]),
                 lambda: list(tr.generate_tokens([1, 2])), lambda: tr.tokenize("a"), lambda: tr.model_info(),
                 lambda: tr.limits(), lambda: tr.device_info()):
        err = status_of(call)
        assert err.name == "NMT_ERR_INVALID_ARGUMENT" and "closed" in err.reason
    tr.close()  # idempotent
    with nmt_edge.Translator(random_model) as tr2:
        assert tr2.limits()["max_batch"] == 8
    assert tr2.closed


def test_error_of_any_status():
    err = nmt_edge.Error(30)
    assert (err.name, err.description) == ("NMT_ERR_CANCELLED", "cancelled by the caller")
    assert nmt_edge.Error(999).name == "NMT_STATUS_999"
