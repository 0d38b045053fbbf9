# SPDX-License-Identifier: MIT
"""test_batch_tokens.py — token batches (issue 56): plan_token_batches
(nmt_batch_plan_tokens) with exact plans and bad arguments, and
translate_batch(max_batch_tokens=) giving what sentence batches give, in
input order, for text and ids, with its refusals."""

import pytest

import nmt_edge
from nmt_edge import _lib

from conftest import SENTENCES


def test_plan_exact():
    # sorted (0)4 (2)1 (2)3 (5)0 (7)5 (9)2; 3 * (2 + 1) = 9 <= 12, 4 * 6 > 12, the rest over 12 in pairs
    assert nmt_edge.plan_token_batches([5, 2, 9, 2, 0, 7], 12, 8) == [[4, 1, 3], [0], [5], [2]]
    assert nmt_edge.plan_token_batches([5, 2, 9, 2, 0, 7], 100, 4) == [[4, 1, 3, 0], [5, 2]]
    assert nmt_edge.plan_token_batches([1, 1, 1, 1, 1], 100, 2) == [[0, 1], [2, 3], [4]]
    assert nmt_edge.plan_token_batches([3, 50, 3], 10, 4) == [[0, 2], [1]]  # over the budget: alone
    assert nmt_edge.plan_token_batches([], 10, 4) == []


@pytest.mark.parametrize("args", [([1, 2], 0, 4), ([1, 2], 10, 0)])
def test_plan_bad_arguments(args):
    with pytest.raises(nmt_edge.Error) as e:
        nmt_edge.plan_token_batches(*args)
    assert e.value.status == _lib.ERR_INVALID_ARGUMENT
    with pytest.raises(nmt_edge.Error) as e:
        nmt_edge.plan_token_batches([-1], 10, 4)
    assert e.value.status == _lib.ERR_INVALID_ARGUMENT and "lengths" in str(e.value)


def test_text_same_as_sentence_batches(en_de):
    want = en_de.translate_batch(SENTENCES, return_scores=True)
    for budget in (1, 20, 64, 100000):
        got = en_de.translate_batch(SENTENCES, return_scores=True, max_batch_tokens=budget)
        assert [r.hypotheses for r in got] == [r.hypotheses for r in want]
        assert [r.scores for r in got] == [r.scores for r in want]
    assert en_de.translate_batch([], max_batch_tokens=8) == []


def test_ids_and_n_best_same(rnd):
    src = [[5, 7, 9, 11], [3], [], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], [40, 41, 49], [8, 8]]
    want = rnd.translate_batch(src, beam_size=3, num_hypotheses=3, return_scores=True)
    got = rnd.translate_batch(src, beam_size=3, num_hypotheses=3, return_scores=True, max_batch_tokens=10,
                              max_batch_size=2)
    assert [r.token_ids for r in got] == [r.token_ids for r in want]
    assert [r.scores for r in got] == [r.scores for r in want]


def test_refusals(en_de):
    with pytest.raises(nmt_edge.Error) as e:
        en_de.translate_batch(SENTENCES[:2], beam_size=1, sampling_topk=0, max_batch_tokens=64)
    assert e.value.status == _lib.ERR_INVALID_ARGUMENT and "not with sampling" in str(e.value)
    with pytest.raises(nmt_edge.Error) as e:
        en_de.translate_batch(SENTENCES[:2], beam_size=1, max_batch_tokens=64, callback=lambda r: False)
    assert e.value.status == _lib.ERR_INVALID_ARGUMENT and "not with a callback" in str(e.value)
    # a sentence over the limits is named by its index in the input
    long = " ".join(["word"] * 400)
    with pytest.raises(nmt_edge.Error) as e:
        en_de.translate_batch(["ok", "fine", long], max_batch_tokens=64)
    assert e.value.status == _lib.ERR_INPUT_TOO_LONG and "sentence 2 has" in str(e.value)
