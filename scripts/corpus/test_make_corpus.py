# SPDX-License-Identifier: MIT
"""Unit tests for scripts/corpus/make_corpus.py on tiny synthetic inputs.

No network, no apt: run with
    python3 -m unittest scripts/corpus/test_make_corpus.py
"""

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_corpus as mc  # noqa: E402


TRANS_EN = """\
Package: foo
Description-md5: aaaa
Description-en: tool to frobnicate files
 Foo frobnicates files. It supports 3 modes.
 .
 Features:
  * fast
  * small and
    simple
 .
 Version 2 adds colour.

Package: foo-doc
Description-md5: aaaa
Description-en: tool to frobnicate files
 Foo frobnicates files. It supports 3 modes.

Package: bar
Description-md5: bbbb
Description-en: bar library
 Bar is a library. It is used by foo.
 .
 This package contains the headers.

Package: baz
Description-md5: cccc
Description-en: baz game with 10 levels
 Baz is fun.

Package: only-en
Description-md5: dddd
Description-en: untranslated package
"""

TRANS_DE = """\
Package: foo
Description-md5: aaaa
Description-de: Werkzeug zum Frobnizieren von Dateien
 Foo frobniziert Dateien. Es unterstützt 3 Modi.
 .
 Funktionen:
  * schnell
  * klein und
    einfach
 .
 Version 2 fügt Farbe hinzu.

Package: bar
Description-md5: bbbb
Description-de: Bar-Bibliothek
 Bar ist eine Bibliothek, die von foo verwendet wird.
 .
 Dieses Paket enthält die Header.
 .
 Extra-Absatz.

Package: baz
Description-md5: cccc
Description-de: Baz-Spiel mit 12 Leveln
 Baz macht Spaß.
"""

HELP_EN = """<html><body>
<h1 id="hd_id1" dir="auto">Insert Table</h1>
<p id="par_id2" class="paragraph">Inserts a table into the current <span id="x" class="switchinline"><span hidden="true" id="IMPRESSfoo" class="IMPRESS">slide</span><span hidden="true" id="defaultfoo">page</span></span>. Choose <span class="switchinline"><span hidden="true" id="MACbar" class="MAC"><span class="emph">LibreOffice - Preferences</span></span><span hidden="true" id="defaultbar"><span class="emph">Tools - Options</span></span></span> first.</p>
<p id="par_id3" class="paragraph"><img src="a.png" alt="An image">
<p id="par_id4" class="paragraph">Press <span class="keycode">Ctrl+A</span><br>twice.</p>
<p class="paragraph">No id here.</p>
<div class="bascode"><pre><code>Dim a As Integer</code></pre></div>
<p id="par_id5">Only in English.</p>
<p id="par_id6">Twice A.</p><p id="par_id6">Twice B.</p>
<p id="bm_id7">Bookmark, not a paragraph id.</p>
</body></html>"""

HELP_DE = """<html><body>
<h1 id="hd_id1" dir="auto">Tabelle einfügen</h1>
<p id="par_id2" class="paragraph">Fügt eine Tabelle in die aktuelle <span id="x" class="switchinline"><span hidden="true" id="IMPRESSfoo" class="IMPRESS">Folie</span><span hidden="true" id="defaultfoo">Seite</span></span> ein. Wählen Sie zuerst <span class="switchinline"><span hidden="true" id="MACbar" class="MAC"><span class="emph">LibreOffice – Einstellungen</span></span><span hidden="true" id="defaultbar"><span class="emph">Extras – Optionen</span></span></span>.</p>
<p id="par_id3" class="paragraph"><img src="a.png" alt="Ein Bild">
<p id="par_id4" class="paragraph">Drücken Sie zweimal <span class="keycode">Strg+A</span>.</p>
<p id="par_id6">Zweimal A.</p>
</body></html>"""


class TestText(unittest.TestCase):
    def test_normalize(self):
        self.assertEqual(mc.normalize("  a\u00a0 b\t\nc\u00ad\u200bd \x07e "), "a b cd e")
        self.assertEqual(mc.normalize("Gro\u0308\u00dfe"), "Gr\u00f6\u00dfe")  # NFC

    def test_digits(self):
        self.assertTrue(mc.digits_match("version 1.2 of 3", "3 Varianten von 1,2"))
        self.assertFalse(mc.digits_match("10 levels", "12 Level"))
        self.assertTrue(mc.digits_match("no digits", "keine Ziffern"))

    def test_split_sentences(self):
        self.assertEqual(mc.split_sentences("It works. It is fast! Really?"),
                         ["It works.", "It is fast!", "Really?"])
        # abbreviations, initials, ordinals, file names, lower-case continuation
        for s in ("Use e.g. Vim or Emacs.", "Das ist z. B. Vim.", "Am 1. Januar kam er.",
                  "Edit foo.conf. Then restart.", "Call it now. then go.", "Mr. Smith came."):
            self.assertEqual(mc.split_sentences(s), [s])
        self.assertEqual(mc.split_sentences('He said "Go." Then left.'),
                         ['He said "Go."', "Then left."])

    def test_filter(self):
        f = lambda e, d: mc.filter_pair(e, d, 5, 3.0)[2]
        self.assertIsNone(f("A small tool", "Ein kleines Werkzeug"))
        self.assertEqual(f("  ", "x"), "empty")
        self.assertEqual(f("Java", "Java"), "identical")
        self.assertEqual(f("1.2", "1,2"), "no_letters")
        self.assertEqual(f("one two three four five six", "eins"), "too_long")
        self.assertEqual(f("a", "x" * 80), "length_ratio")
        self.assertEqual(f("10 levels", "12 Level"), "digits_differ")


class TestDDTP(unittest.TestCase):
    def test_parse(self):
        recs = list(mc.parse_translation(io.StringIO(TRANS_EN), "en"))
        self.assertEqual([r[0] for r in recs], ["aaaa", "aaaa", "bbbb", "cccc", "dddd"])
        self.assertEqual(recs[0][1], "tool to frobnicate files")
        self.assertEqual(len(mc.body_paragraphs(recs[0][2])), 3)
        self.assertEqual(recs[4][2], [])

    def test_segments(self):
        paras = mc.body_paragraphs([" Features:", "  * fast", "  * small and", "    simple"])
        self.assertEqual(mc.paragraph_segments(paras[0]), ["Features:", "fast", "small and simple"])

    def test_align(self):
        pairs, info = mc.align_ddtp(io.StringIO(TRANS_EN), io.StringIO(TRANS_DE))
        got = [(e, d) for e, d, _ in pairs]
        self.assertEqual(info["records_aligned"], 3)         # aaaa once, bbbb, cccc
        self.assertEqual(info["records_paragraph_count_mismatch"], 1)   # bbbb: 2 vs 3
        self.assertIn(("tool to frobnicate files", "Werkzeug zum Frobnizieren von Dateien"), got)
        self.assertIn(("Foo frobnicates files.", "Foo frobniziert Dateien."), got)
        self.assertIn(("It supports 3 modes.", "Es unterstützt 3 Modi."), got)
        self.assertIn(("small and simple", "klein und einfach"), got)
        self.assertIn(("Version 2 adds colour.", "Version 2 fügt Farbe hinzu."), got)
        self.assertIn(("bar library", "Bar-Bibliothek"), got)
        # bbbb's body has 2 vs 3 paragraphs: only the synopsis is used
        self.assertNotIn("Bar is a library.", [e for e, _ in got])
        self.assertEqual(len([1 for e, _ in got if e == "tool to frobnicate files"]), 1)

    def test_sentence_count_mismatch_keeps_unit(self):
        pairs = mc.align_units("One. Two.", "Eins und zwei.")
        self.assertEqual(pairs, [("One. Two.", "Eins und zwei.", "unit_unsplit")])


class TestLibreOffice(unittest.TestCase):
    def test_extract(self):
        items = dict(mc.help_paragraphs(HELP_EN))
        self.assertEqual(items["hd_id1"], "Insert Table")
        self.assertEqual(items["par_id2"],
                         "Inserts a table into the current page. Choose Tools - Options first.")
        self.assertEqual(items["par_id3"], "")
        self.assertEqual(items["par_id4"], "Press Ctrl+A twice.")
        self.assertNotIn("bm_id7", items)
        self.assertFalse(any("Dim a" in t for t in items.values()))

    def test_align_file(self):
        pairs = [(e, d) for e, d, _ in mc.align_help_file(HELP_EN, HELP_DE)]
        self.assertEqual(pairs, [
            ("Insert Table", "Tabelle einfügen"),
            ("Inserts a table into the current page.", "Fügt eine Tabelle in die aktuelle Seite ein."),
            ("Choose Tools - Options first.", "Wählen Sie zuerst Extras – Optionen."),
            ("Press Ctrl+A twice.", "Drücken Sie zweimal Strg+A."),
        ])  # par_id3 is image-only (no text); par_id5 only in English; par_id6 2x vs 1x

    def test_align_trees(self):
        d = tempfile.mkdtemp()
        try:
            for lang, text in (("en-US", HELP_EN), ("de", HELP_DE)):
                os.makedirs(os.path.join(d, lang, "text", "shared"))
                with open(os.path.join(d, lang, "text", "shared", "a.html"), "w") as f:
                    f.write(text)
            os.makedirs(os.path.join(d, "en-US", "text", "only"))
            with open(os.path.join(d, "en-US", "text", "only", "b.html"), "w") as f:
                f.write(HELP_EN)
            pairs, info = mc.align_help_trees(os.path.join(d, "en-US"), os.path.join(d, "de"))
            self.assertEqual(info, {"files_en": 2, "files_aligned": 1})
            self.assertEqual(len(pairs), 4)
        finally:
            shutil.rmtree(d)


class TestCleanSplit(unittest.TestCase):
    def test_bucket_definition(self):
        s = "Development files for libfoo"
        want = int.from_bytes(hashlib.sha256(s.encode("utf-8")).digest()[:8], "big") % 1000
        self.assertEqual(mc.bucket(s), want)
        # a fixed value, so a change of the rule is noticed
        self.assertEqual(mc.bucket("hello"), 0x2cf24dba5fb0a30e % 1000)

    def test_clean_and_dedupe(self):
        stats = {}
        raw = [("a", "Hello  world", "Hallo Welt"), ("b", "Hello world", "Hallo\u00a0Welt"),
               ("a", "Java", "Java"), ("a", "Hello world", "Servus Welt")]
        out = mc.clean_and_dedupe(raw, 200, 3.0, stats)
        self.assertEqual(out, [("a", "Hello world", "Hallo Welt"), ("a", "Hello world", "Servus Welt")])
        self.assertEqual(stats["b"]["dropped"], {"duplicate": 1})
        self.assertEqual(stats["a"]["dropped"], {"identical": 1})
        self.assertEqual(stats["a"]["kept"], 2)

    def test_split(self):
        # find English strings landing in each split
        by = {"train": [], "dev": [], "test": []}
        i = 0
        while min(len(v) for v in by.values()) < 3:
            s = "sentence number %d" % i
            by[mc.split_of(s)].append(s)
            i += 1
        pairs = [("x", e, "de " + e) for v in by.values() for e in v[:3]]
        # a dev and a test pair whose German target also occurs in train -> dropped
        pairs.append(("x", by["dev"][0] + " again", "de " + by["train"][0]))
        while mc.split_of(pairs[-1][1]) != "dev":
            pairs[-1] = ("x", pairs[-1][1] + "!", pairs[-1][2])
        pairs.append(("x", by["test"][0] + " again", "de " + by["train"][1]))
        while mc.split_of(pairs[-1][1]) != "test":
            pairs[-1] = ("x", pairs[-1][1] + "!", pairs[-1][2])
        splits, dropped = mc.split_pairs(pairs)
        self.assertEqual(dropped, {"dev": 1, "test": 1})
        for name in ("train", "dev", "test"):
            self.assertEqual(sorted(p[1] for p in splits[name]), sorted(by[name][:3]))
            for p in splits[name]:
                b = mc.bucket(p[1])
                self.assertTrue({"test": b < 10, "dev": 10 <= b < 20, "train": b >= 20}[name])
        # English side decides: the same English always lands in one split
        self.assertEqual(mc.split_of("abc"), mc.split_of("abc"))


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class TestCli(unittest.TestCase):
    def test_help(self):
        p = subprocess.run([sys.executable, mc.__file__, "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(p.returncode, 0)
        self.assertIn("--spm", p.stdout)

    def test_build_from_cache_offline(self):
        """End to end from a pre-filled cache (no apt, no network): outputs and stats."""
        d = tempfile.mkdtemp()
        try:
            rd = os.path.join(d, "cache", "ddtp", "bookworm")
            os.makedirs(rd)
            with open(os.path.join(rd, "Translation-en"), "w") as f:
                f.write(TRANS_EN)
            with open(os.path.join(rd, "Translation-de"), "w") as f:
                f.write(TRANS_DE)
            with open(os.path.join(rd, "InRelease"), "w") as f:
                f.write("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nOrigin: Debian\n"
                        "Date: Sat, 01 Jan 2000 00:00:00 UTC\nSHA256:\n")
            args = mc.parse_args([d, "--releases", "bookworm", "--no-lo"])
            saved, mc.log = mc.log, (lambda msg: None)
            try:
                stats = mc.build(args)
            finally:
                mc.log = saved
            n = sum(len(_read(os.path.join(d, s + ".en")).splitlines()) for s in mc.SPLIT_NAMES)
            self.assertEqual(n, stats["total_pairs"])
            js = json.loads(_read(os.path.join(d, "stats.json")))
            self.assertEqual(js["ddtp"]["archive_dates"]["bookworm"], "Sat, 01 Jan 2000 00:00:00 UTC")
            self.assertEqual(js["date"], "Sat, 01 Jan 2000 00:00:00 UTC")
            # "baz" synopsis has 10 vs 12: dropped by the digit filter
            self.assertEqual(js["sources"]["ddtp:bookworm"]["dropped"].get("digits_differ"), 1)
            first = _read(os.path.join(d, "stats.json"))
            saved, mc.log = mc.log, (lambda msg: None)
            try:
                mc.build(args)
            finally:
                mc.log = saved
            self.assertEqual(_read(os.path.join(d, "stats.json")), first)   # deterministic
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main()
