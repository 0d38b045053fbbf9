# SPDX-License-Identifier: MIT
"""test_api.py — the rest of the package: where the library is found, the
device choice, model_info, list_devices, the standalone Tokenizer, and
translators in parallel threads."""

import os
import shutil
import subprocess
import sys
import threading

import pytest

import nmt_edge

from conftest import EN_DE, REPO, SENTENCES


def run_python(code, env_update, cwd):
    env = dict(os.environ)
    env.update(env_update)
    for k, v in list(env.items()):
        if v is None:
            del env[k]
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, check=False)


def test_library_search_order(tmp_path):
    # $NMT_EDGE_LIBRARY first, and only it when set
    p = run_python("import nmt_edge; nmt_edge.version()", {"NMT_EDGE_LIBRARY": str(tmp_path / "none.so")}, tmp_path)
    assert p.returncode != 0 and b"NMT_EDGE_LIBRARY" in p.stderr and b"none.so" in p.stderr
    p = run_python("import nmt_edge; nmt_edge.version()", {"NMT_EDGE_LIBRARY": "libm.so.6"}, tmp_path)
    assert p.returncode != 0 and b"libm.so.6: not libnmtedge 1.x (no nmt_status_str" in p.stderr
    # then a copy bundled next to the package
    lib = nmt_edge.library_path()
    if not os.path.isfile(lib):
        pytest.skip("the library under test is not a file path")
    pkg = tmp_path / "site" / "nmt_edge"
    shutil.copytree(os.path.dirname(nmt_edge.__file__), pkg)
    shutil.copy(lib, pkg / "libnmtedge.so.1")
    p = run_python("import nmt_edge; print(nmt_edge.library_path()); print(nmt_edge.version())",
                   {"NMT_EDGE_LIBRARY": None, "PYTHONPATH": str(tmp_path / "site")}, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().split() == [str(pkg / "libnmtedge.so.1"), nmt_edge.__version__]


def test_device_choice(monkeypatch, random_model):
    devices = nmt_edge.list_devices()
    assert devices and all(":" in d["device"] and d["device_name"] for d in devices)
    with nmt_edge.Translator(random_model, device=devices[0]["device"]) as tr:
        assert tr.device_info()["device_name"] == devices[0]["device_name"]
    monkeypatch.setenv("NMT_EDGE_DEVICE", "no-such-device-anywhere")  # device=None reads it, as nmt-edge does
    with pytest.raises(nmt_edge.Error) as e:
        nmt_edge.Translator(random_model)
    assert e.value.name == "NMT_ERR_NO_DEVICE"
    with nmt_edge.Translator(random_model, device=devices[0]["device"]) as tr:  # an explicit device wins
        assert tr.translate_batch([[1, 2, 3]])


def test_model_info(en_de, random_model):
    info = nmt_edge.model_info(EN_DE)
    assert (info["arch"], info["tokenizer"], info["dtype"], info["d_model"]) == ("transformer", 1, "int8", 256)
    assert en_de.model_info() == info
    rnd = nmt_edge.model_info(random_model)
    assert (rnd["src_vocab"], rnd["tgt_vocab"], rnd["tokenizer"]) == (50, 40, 0)
    assert en_de.arena_bytes > 0 and en_de.device_bytes > 0
    assert en_de.limits() == {"max_src_len": 256, "max_tgt_len": 306, "max_batch": 8, "max_beam": 4,
                              "max_text_bytes": 2048}


def test_standalone_tokenizer(en_de, random_model):
    tok = nmt_edge.Tokenizer(EN_DE)
    for s in SENTENCES:
        assert tok.encode(s) == en_de.tokenize(s)
        assert tok.decode(tok.encode(s)) == s
    assert tok.piece(tok.encode("Paket")[0]).startswith("\u2581")
    assert tok.info()["vocab_size"] == 8000
    spm = os.path.join(REPO, "tests", "fixtures", "spm", "uni_rules.model")
    if os.path.exists(spm):  # a SentencePiece .model file itself
        t = nmt_edge.Tokenizer(spm)
        assert t.decode(t.encode("hello world")) == "hello world"
    with pytest.raises(nmt_edge.Error) as e:
        nmt_edge.Tokenizer(random_model)
    assert e.value.name == "NMT_ERR_NO_TOKENIZER"


def test_translators_in_threads(random_model):
    src = [[i % 50, (3 * i) % 50, (7 * i) % 50] for i in range(16)]
    with nmt_edge.Translator(random_model) as tr:
        expected = [r.hypotheses for r in tr.translate_batch(src)]
    got = [None, None]

    def work(k):
        with nmt_edge.Translator(random_model) as t:
            got[k] = [r.hypotheses for r in t.translate_batch(src)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [expected, expected]


def test_one_translator_shared_by_threads(en_de):
    expected = en_de.translate_batch(SENTENCES[:4])
    got = {}

    def work(k):
        got[k] = en_de.translate_batch(SENTENCES[:4])  # serialised by the translator's lock

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all([r.hypotheses for r in got[k]] == [r.hypotheses for r in expected] for k in range(3))


def test_dropped_translator_is_released_at_once(random_model):
    # no reference cycle: the last reference going releases session and device (no gc run needed)
    import gc
    import weakref
    gc.disable()
    try:
        tr = nmt_edge.Translator(random_model)
        tr.translate_batch([[1, 2]])
        list(tr.generate_tokens([1, 2]))
        ref = weakref.ref(tr)
        del tr
        assert ref() is None
    finally:
        gc.enable()
