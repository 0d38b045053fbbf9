# SPDX-License-Identifier: MIT
"""test_translate.py — translate_batch and score_batch against the nmt-edge
program on the same inputs: the same text, the same ids, the same scores
(as the program prints them, %.6f), for the bundled model (text and ids)
and a random model (ids)."""

import json

import pytest

from conftest import EN_DE, SENTENCES, run_cli


def cli_jsonl(model, lines, *args):
    """nmt-edge translate --format jsonl: per input line, its hypotheses' dicts."""
    out = run_cli(["translate", "--model", model, "--format", "jsonl", "--quiet"] + list(args),
                  "".join(line + "\n" for line in lines))
    per_line = [[] for _ in lines]
    for row in out.splitlines():
        obj = json.loads(row)
        per_line[obj["line"]].append(obj)
    return per_line


def ids_line(ids):
    return " ".join(map(str, ids))


def check_same(results, expected, text):
    assert len(results) == len(expected)
    for res, exp in zip(results, expected):
        assert len(res.hypotheses) == len(exp)
        for r, e in enumerate(exp):
            assert e["rank"] == r
            assert res.token_ids[r] == e["tokens"][:-1]  # the program lists the EOS too
            assert res.hypotheses[r] == (e["text"] if text else e["tokens"][:-1])
            assert "%.6f" % res.scores[r] == "%.6f" % e["score"]
            assert "%.6f" % res.logprobs[r] == "%.6f" % e["logprob"]


@pytest.mark.parametrize("beam,n_best", [(4, 1), (1, 1), (4, 3)])
def test_text_matches_cli(en_de, beam, n_best):
    expected = cli_jsonl(EN_DE, SENTENCES, "--beam", str(beam), "--n-best", str(n_best))
    got = en_de.translate_batch(SENTENCES, beam_size=beam, num_hypotheses=n_best, return_scores=True)
    check_same(got, expected, text=True)
    assert got[0].hypotheses[0] == "Dieses Paket enthält die Entwicklungsdateien für die Bibliothek."
    assert got[2].hypotheses[0] == ""  # an empty line translates to an empty line


def test_ids_match_cli_and_text(en_de):
    ids = [en_de.tokenize(s) for s in SENTENCES]
    expected = cli_jsonl(EN_DE, [ids_line(x) for x in ids], "--ids")
    got = en_de.translate_batch(ids, return_scores=True)
    check_same(got, expected, text=False)
    by_text = en_de.translate_batch(SENTENCES)
    assert [r.token_ids for r in got] == [r.token_ids for r in by_text]
    assert [r.hypotheses[0] for r in by_text] == [en_de.detokenize(r.hypotheses[0]) for r in got]


def test_random_model_ids_match_cli(rnd, random_model):
    src = [[5, 7, 9, 11], [3], [], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], [40, 41, 49]]
    for args, kw in (([], {}), (["--beam", "1"], {"beam_size": 1}), (["--alpha", "0"], {"length_penalty": 0.0}),
                     (["--max-len", "5"], {"max_decoding_length": 5})):
        expected = cli_jsonl(random_model, [ids_line(x) for x in src], *args)
        check_same(rnd.translate_batch(src, return_scores=True, **kw), expected, text=False)


def test_batches_split_by_max_batch(en_de):
    # 10 sentences, max_batch 8: two library calls; sentence by sentence: ten
    whole = en_de.translate_batch(SENTENCES, return_scores=True)
    one_by_one = en_de.translate_batch(SENTENCES, return_scores=True, max_batch_size=1)
    assert [r.hypotheses for r in whole] == [r.hypotheses for r in one_by_one]
    assert [r.scores for r in whole] == [r.scores for r in one_by_one]
    assert en_de.translate_batch([]) == []


def test_scores_without_return_scores(en_de):
    res = en_de.translate_batch(SENTENCES[:1])
    assert res[0].scores == [] and res[0].logprobs == []


def test_target_prefix(en_de):
    res = en_de.translate_batch(SENTENCES[:2], target_prefix=["Das Paket", None])
    assert res[0].hypotheses[0].startswith("Das Paket")
    assert res[1].hypotheses == en_de.translate_batch(SENTENCES[1:2])[0].hypotheses
    ids = en_de.tokenize("Das Paket", target=True)
    by_ids = en_de.translate_batch([en_de.tokenize(SENTENCES[0])], target_prefix=[ids])
    assert by_ids[0].token_ids == res[0].token_ids


def test_sampling_is_reproducible(en_de):
    a = en_de.translate_batch(SENTENCES[:3], beam_size=1, sampling_topk=10, sampling_seed=42)
    b = en_de.translate_batch(SENTENCES[:3], beam_size=1, sampling_topk=10, sampling_seed=42)
    assert [r.token_ids for r in a] == [r.token_ids for r in b]


def test_score_text_matches_cli(en_de):
    targets = [r.hypotheses[0] for r in en_de.translate_batch(SENTENCES)]
    targets[1] = "Das Programm zeigt eine Liste von Dateien."
    out = run_cli(["score", "--model", EN_DE, "--quiet"], "".join("%s\t%s\n" % p for p in zip(SENTENCES, targets)))
    expected = out.split()
    got = en_de.score_batch(SENTENCES, targets)
    assert ["%.6f" % x for x in got] == expected
    # the search's own best hypothesis: its score is the translation's logprob
    best = en_de.translate_batch(SENTENCES[:1], return_scores=True)[0]
    assert got[0] == pytest.approx(best.logprobs[0], abs=1e-3)


def test_score_ids_match_cli(rnd, random_model):
    src = [[5, 7, 9], [1, 2, 3, 4], []]
    tgt = [[4, 5], [], [6, 7, 8, 9]]
    out = run_cli(["score", "--model", random_model, "--quiet"],
                  "".join("%s\t%s\n" % (ids_line(s), ids_line(t)) for s, t in zip(src, tgt)))
    assert ["%.6f" % x for x in rnd.score_batch(src, tgt)] == out.split()


def test_tokenize_matches_cli(en_de):
    lines = [s for s in SENTENCES if s]
    out = run_cli(["tokenize", "--model", EN_DE], "".join(s + "\n" for s in lines))
    ids = [en_de.tokenize(s) for s in lines]
    assert [ids_line(x) for x in ids] == out.splitlines()
    back = run_cli(["detokenize", "--model", EN_DE], "".join(ids_line(x) + "\n" for x in ids))
    assert [en_de.detokenize(x) for x in ids] == back.splitlines() == lines
