# SPDX-License-Identifier: MIT
"""test_stream.py — generate_tokens (the library's on_step callback and
nmt_session_partial) and cancellation: streamed tokens concatenate to the
greedy translation; leaving the loop or cancelling stops the decoding and
the translator stays usable with the same results."""

import threading

import pytest

import nmt_edge

from conftest import SENTENCES


@pytest.mark.parametrize("sentence", [s for s in SENTENCES if s][:5])
def test_text_stream_concatenates_to_greedy(en_de, sentence):
    greedy = en_de.translate_batch([sentence], beam_size=1)[0]
    steps = list(en_de.generate_tokens(sentence))
    assert [s.token_id for s in steps] == greedy.token_ids[0]
    assert "".join(s.text for s in steps) == greedy.hypotheses[0]
    assert [s.step for s in steps] == list(range(len(steps)))
    assert [s.is_last for s in steps] == [False] * (len(steps) - 1) + [True]
    assert [s.token for s in steps] == [en_de._tok[1].piece(t) for t in greedy.token_ids[0]]


def test_ids_stream_and_empty(en_de, rnd):
    ids = en_de.tokenize(SENTENCES[0])
    assert [s.token_id for s in en_de.generate_tokens(ids)] == en_de.translate_batch([ids], beam_size=1)[0].token_ids[0]
    assert list(en_de.generate_tokens("")) == []  # an empty source: an empty translation
    for src in ([5, 7, 9, 11], [1, 2, 3, 4, 5, 6, 7, 8]):
        steps = list(rnd.generate_tokens(src, max_decoding_length=12))
        assert [s.token_id for s in steps] == rnd.translate_batch([src], beam_size=1, max_decoding_length=12)[0].hypotheses[0]
        assert all(s.text is None and s.token is None for s in steps)  # no tokenizer


def test_sampling_stream(en_de):
    kw = dict(sampling_topk=20, sampling_seed=3)
    steps = list(en_de.generate_tokens(SENTENCES[1], **kw))
    assert [s.token_id for s in steps] == en_de.translate_batch([SENTENCES[1]], beam_size=1, **kw)[0].token_ids[0]


def test_leaving_the_loop_cancels(en_de):
    full = en_de.translate_batch([SENTENCES[0]], beam_size=1)[0]
    gen = en_de.generate_tokens(SENTENCES[0])
    first = next(gen)
    assert first.token_id == full.token_ids[0][0]
    with pytest.raises(nmt_edge.Error) as e:  # this thread may not call the translator meanwhile
        en_de.translate_batch(["x"])
    assert e.value.name == "NMT_ERR_INVALID_ARGUMENT"
    gen.close()
    assert en_de.translate_batch([SENTENCES[0]], beam_size=1)[0].token_ids == full.token_ids
    for step in en_de.generate_tokens(SENTENCES[0]):
        break  # a generator dropped mid-way is cancelled when collected
    del step
    assert en_de.translate_batch([SENTENCES[0]], beam_size=1)[0].token_ids == full.token_ids


def test_callback_streams_every_sentence(en_de):
    batch = SENTENCES[:4]
    seen = {}
    got = en_de.translate_batch(batch, beam_size=1, callback=lambda r: seen.setdefault(r.batch_id, []).append(r))
    for i, res in enumerate(got):
        steps = seen.get(i, [])
        assert [r.token_id for r in steps] == res.token_ids[0]
        assert "".join(r.text for r in steps) == res.hypotheses[0]


def test_callback_stop_keeps_finished_sentences(en_de):
    long_one = " ".join(SENTENCES[4] for _ in range(4))
    batch = [SENTENCES[1], long_one, "OK."]
    reference = en_de.translate_batch(batch, beam_size=1)
    assert len(reference[1].token_ids[0]) > 20 > len(reference[0].token_ids[0])
    with pytest.raises(nmt_edge.Error) as e:  # stopped at the long sentence's 21st token
        en_de.translate_batch(batch, beam_size=1, callback=lambda r: r.batch_id == 1 and r.step == 20)
    assert e.value.name == "NMT_ERR_CANCELLED" and e.value.status == 30
    results = e.value.results
    assert results[1] is None
    assert results[0].hypotheses == reference[0].hypotheses and results[2].hypotheses == reference[2].hypotheses
    assert en_de.translate_batch(batch, beam_size=1)[1].hypotheses == reference[1].hypotheses


def test_callback_exception_propagates(en_de):
    def boom(_):
        raise KeyError("from the callback")
    with pytest.raises(KeyError):
        en_de.translate_batch(SENTENCES[:2], beam_size=1, callback=boom)
    assert en_de.translate_batch(SENTENCES[:1])[0].hypotheses[0].startswith("Dieses Paket")


def test_cancel_from_another_thread(en_de):
    batch = [SENTENCES[1], SENTENCES[4]]
    stop = threading.Event()

    def canceller():
        while not stop.is_set():
            en_de.cancel()
            stop.wait(0.002)

    t = threading.Thread(target=canceller)
    t.start()
    try:  # 250 steps at least: the canceller stops it long before
        with pytest.raises(nmt_edge.Error) as e:
            en_de.translate_batch(batch, beam_size=1, max_decoding_length=300, min_decoding_length=250)
    finally:
        stop.set()
        t.join()
    assert e.value.name == "NMT_ERR_CANCELLED"
    assert e.value.results == [None, None]
    assert en_de.translate_batch(batch)[0].hypotheses == en_de.translate_batch(batch[:1])[0].hypotheses


def test_stream_holds_back_split_characters(en_de):
    # a forced prefix whose CJK characters are byte-fallback pieces, three bytes each:
    # a byte that does not complete its character adds no text yet, the last one adds it whole
    prefix = en_de.tokenize("Datei 日本", target=True)
    pieces = [en_de._tok[1].piece(t) for t in prefix]
    assert pieces[2:] == ["<0xE6>", "<0x97>", "<0xA5>", "<0xE6>", "<0x9C>", "<0xAC>"]
    steps = list(en_de.generate_tokens(SENTENCES[0], target_prefix=prefix))
    assert [s.text for s in steps[:8]] == ["Datei", " ", "", "", "日", "", "", "本"]
    greedy = en_de.translate_batch([SENTENCES[0]], beam_size=1, target_prefix=[prefix])[0]
    assert "".join(s.text for s in steps) == greedy.hypotheses[0]
    # the same prefix as text gives the same ids; a text prefix with an id source is refused
    assert en_de.translate_batch([SENTENCES[0]], beam_size=1, target_prefix=["Datei 日本"])[0].token_ids == greedy.token_ids
    with pytest.raises(nmt_edge.Error) as e:
        en_de.translate_batch([en_de.tokenize(SENTENCES[0])], target_prefix=["Datei"])
    assert e.value.name == "NMT_ERR_INVALID_ARGUMENT"
