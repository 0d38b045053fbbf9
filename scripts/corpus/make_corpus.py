#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Build the English-German parallel corpus of issue 5 from Debian's archive.

Sources (both fetched from a Debian mirror with apt, nothing else is needed):

* DDTP: the package-description translations (``*_i18n_Translation-en`` and
  ``*_i18n_Translation-de``) of several releases.  Records are aligned by
  ``Description-md5``; synopses pair 1:1; long-description paragraphs (split on
  " ." lines) pair when their counts match, then list items / sentences inside
  a paragraph pair when their counts match (otherwise the whole paragraph is
  kept as one pair).
* LibreOffice help (``libreoffice-help-en-us`` and ``libreoffice-help-de``):
  every help paragraph carries the same ``par_id...``/``hd_id...`` id in every
  language, so paragraphs are aligned by (file, id, occurrence) and split into
  sentences when the sentence counts match.

Cleaning: Unicode NFC, whitespace collapsed, untranslated (identical) pairs,
pairs without letters, sides longer than --max-words words, extreme character
length ratios and pairs whose multisets of digit sequences differ are dropped;
exact duplicate pairs are removed (first occurrence kept).

Split: bucket = int.from_bytes(sha256(english_utf8).digest()[:8], "big") % 1000
over the cleaned English side; 0-9 test, 10-19 dev, the rest train.  Dev/test
pairs whose German side also occurs in train are dropped.

apt runs with a private configuration (lists, sources, cache under
OUT/cache/apt), so the system's apt state is never touched and no root is
needed.  Downloads are cached under OUT/cache; a second run reuses them (use
--refresh to fetch the archive state again).  The output depends only on the
cached archive files, so it is deterministic.

Python 3 standard library only; needs apt-get and dpkg-deb (and spm_train for
the optional --spm step).
"""

import argparse
import hashlib
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata

DEFAULT_RELEASES = ["bookworm", "trixie", "sid", "bullseye"]
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEFAULT_LO_RELEASE = "trixie"
LO_PACKAGES = {"en": "libreoffice-help-en-us", "de": "libreoffice-help-de"}
LO_LANG_DIRS = {"en": "en-US", "de": "de"}
SPLIT_NAMES = ("train", "dev", "test")

_T0 = time.time()


class CorpusError(Exception):
    """A failure with a message for the user (exit status 1)."""


def log(msg):
    sys.stderr.write("[make_corpus %6.1fs] %s\n" % (time.time() - _T0, msg))
    sys.stderr.flush()


# --------------------------------------------------------------------------
# Text normalisation and filters
# --------------------------------------------------------------------------

_DROP_CHARS = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"), None)
_CTRL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")   # exactly Unicode category Cc
_DIGITS_RE = re.compile(r"[0-9]+")
_LETTER_RE = re.compile(r"[^\W\d_]")


def normalize(text):
    """NFC, invisible characters removed, control chars -> space, whitespace collapsed."""
    if not text.isascii():
        text = unicodedata.normalize("NFC", text).translate(_DROP_CHARS)
    if not text.isprintable():
        text = _CTRL_RE.sub(" ", text)
    return " ".join(text.split())      # str.split() splits on exactly the Unicode spaces


def digits_match(en, de):
    """True when both sides contain the same multiset of ASCII digit sequences."""
    return sorted(_DIGITS_RE.findall(en)) == sorted(_DIGITS_RE.findall(de))


def length_ratio_ok(en, de, max_ratio, slack=10):
    a, b = len(en) + slack, len(de) + slack
    return max(a, b) <= max_ratio * min(a, b)


def filter_pair(en, de, max_words, max_ratio):
    """Return (en, de, None) for a kept pair or (None, None, reason)."""
    en, de = normalize(en), normalize(de)
    if not en or not de:
        return None, None, "empty"
    if en == de:
        return None, None, "identical"
    if not _LETTER_RE.search(en) or not _LETTER_RE.search(de):
        return None, None, "no_letters"
    if len(en.split(" ")) > max_words or len(de.split(" ")) > max_words:
        return None, None, "too_long"
    if not length_ratio_ok(en, de, max_ratio):
        return None, None, "length_ratio"
    if not digits_match(en, de):
        return None, None, "digits_differ"
    return en, de, None


# --------------------------------------------------------------------------
# Sentence splitting (conservative: a wrong split only costs a pair, because
# sentences are paired only when both sides give the same count)
# --------------------------------------------------------------------------

ABBREVIATIONS = frozenset("""
e.g. i.e. etc. vs. cf. approx. incl. no. nr. fig. ca. dr. prof. mr. mrs. ms.
st. jr. sr. inc. ltd. co. corp. resp. esp. min. max. ver. vol. dept. est.
z.b. zb. d.h. bzw. usw. u.a. u.ä. o.ä. bspw. inkl. evtl. ggf. vgl. sog. s.
abb. bzgl. mio. mrd. sek. std. zzgl. z.t. v.a. u.u. etc.pp. u.s.w. o.g.
""".split())

_CLOSERS = "\"')]}»«“”’"
_OPENERS = "\"'([{«»“„‘"


def _is_boundary(token, nxt):
    core = token.rstrip(_CLOSERS)
    if not core or core[-1] not in ".!?":
        return False
    if not nxt:
        return False
    first = nxt.lstrip(_OPENERS)[:1]
    if not first or not (first.isupper() or first.isdigit()):
        return False
    if core[-1] == ".":
        word = core.lstrip(_OPENERS)
        if word.lower() in ABBREVIATIONS:
            return False
        stem = word[:-1]
        if len(stem) <= 1:            # initials, "z. B.", "1."
            return False
        if stem.isdigit():            # German ordinals: "1. Januar"
            return False
        if "." in stem.rstrip("."):    # "e.g.", "U.S.", "file.txt."
            return False
    return True


def split_sentences(text):
    tokens = text.split(" ")
    out, cur = [], []
    for i, tok in enumerate(tokens):
        cur.append(tok)
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if _is_boundary(tok, nxt):
            out.append(" ".join(cur))
            cur = []
    if cur:
        out.append(" ".join(cur))
    return [s for s in (x.strip() for x in out) if s]


# --------------------------------------------------------------------------
# DDTP
# --------------------------------------------------------------------------

def parse_translation(lines, lang):
    """Parse a Translation-<lang> file.

    Yields (md5, synopsis, body_lines) where body_lines are the raw
    continuation lines of the Description-<lang> field (leading space kept).
    """
    field = "description-%s" % lang
    md5 = None
    desc = None          # list: [synopsis, line, line, ...] while in the field
    in_desc = False
    for raw in lines:
        line = raw.rstrip("\n").rstrip("\r")
        if not line.strip():
            if md5 is not None and desc is not None:
                yield md5, desc[0], desc[1:]
            md5, desc, in_desc = None, None, False
            continue
        if line[0] in " \t":
            if in_desc:
                desc.append(line)
            continue
        in_desc = False
        name, _, value = line.partition(":")
        key = name.strip().lower()
        if key == "description-md5":
            md5 = value.strip()
        elif key == field:
            desc = [value.strip()]
            in_desc = True
    if md5 is not None and desc is not None:
        yield md5, desc[0], desc[1:]


def body_paragraphs(body_lines):
    """Split a long description into paragraphs (lists of lines, first space removed)."""
    paras, cur = [], []
    for line in body_lines:
        line = line.replace("\t", " ")
        if line.strip() == ".":
            if cur:
                paras.append(cur)
            cur = []
            continue
        cur.append(line[1:] if line.startswith(" ") else line)
    if cur:
        paras.append(cur)
    return paras


_BULLET_RE = re.compile(r"^(?:[*\-+o•·]|\d{1,2}[.)])\s+(?=\S)")


def paragraph_segments(para_lines):
    """Split a paragraph into units: prose runs, list items, verbatim lines."""
    segs = []          # list of [kind, text]
    for line in para_lines:
        stripped = line.strip()
        if not stripped:
            continue
        m = _BULLET_RE.match(stripped)
        if m:
            segs.append(["item", stripped[m.end():]])
        elif line.startswith(" "):               # verbatim (2+ spaces)
            if segs and segs[-1][0] == "item":   # continuation of a list item
                segs[-1][1] += " " + stripped
            else:
                segs.append(["verbatim", stripped])
        elif segs and segs[-1][0] in ("prose", "item"):
            segs[-1][1] += " " + stripped
        else:
            segs.append(["prose", stripped])
    return [normalize(t) for _, t in segs]


def paragraph_text(para_lines):
    return normalize(" ".join(l.strip() for l in para_lines))


def align_units(en_text, de_text):
    """Pair sentences when counts match, else the whole unit. Returns [(en, de, kind)]."""
    es, ds = split_sentences(en_text), split_sentences(de_text)
    if len(es) == len(ds):
        kind = "sentence" if len(es) > 1 else "unit"
        return [(e, d, kind) for e, d in zip(es, ds)]
    return [(en_text, de_text, "unit_unsplit")]


def align_ddtp_record(en_syn, en_body, de_syn, de_body):
    """Align one English description with its German translation."""
    pairs = [(normalize(en_syn), normalize(de_syn), "synopsis")]
    ep, dp = body_paragraphs(en_body), body_paragraphs(de_body)
    if len(ep) != len(dp):
        return pairs, 1
    for e, d in zip(ep, dp):
        es, ds = paragraph_segments(e), paragraph_segments(d)
        if len(es) == len(ds):
            for a, b in zip(es, ds):
                pairs.extend(align_units(a, b))
        else:
            pairs.append((paragraph_text(e), paragraph_text(d), "paragraph"))
    return pairs, 0


def align_ddtp(en_lines, de_lines):
    """Align two Translation files. Returns (pairs, info)."""
    de = {}
    for md5, syn, body in parse_translation(de_lines, "de"):
        de.setdefault(md5, (syn, body))
    seen = set()
    pairs = []
    info = {"records_de": len(de), "records_en": 0, "records_aligned": 0,
            "records_paragraph_count_mismatch": 0}
    for md5, syn, body in parse_translation(en_lines, "en"):
        info["records_en"] += 1
        if md5 in seen or md5 not in de:
            continue
        seen.add(md5)
        info["records_aligned"] += 1
        p, mismatch = align_ddtp_record(syn, body, de[md5][0], de[md5][1])
        info["records_paragraph_count_mismatch"] += mismatch
        pairs.extend(p)
    return pairs, info


# --------------------------------------------------------------------------
# LibreOffice help
# --------------------------------------------------------------------------

_ID_RE = re.compile(r"^(?:par|hd)_id")
_CAPTURE_TAGS = frozenset(["p", "h1", "h2", "h3", "h4", "h5", "h6"])
_BLOCK_TAGS = frozenset(["p", "h1", "h2", "h3", "h4", "h5", "h6", "div", "table",
                         "tr", "td", "th", "ul", "ol", "li", "pre", "section",
                         "article", "header", "footer", "aside", "nav", "body",
                         "dl", "dt", "dd", "blockquote", "hr"])
_VOID_TAGS = frozenset(["img", "br", "meta", "input", "link", "hr", "wbr", "area",
                        "base", "col", "embed", "source", "track"])
_SKIP_TAGS = frozenset(["script", "style", "pre", "title", "head", "noscript"])


class HelpParagraphs(html.parser.HTMLParser):
    """Collect (id, text) of every <p>/<hN> with a par_id/hd_id id.

    Text inside hidden alternatives (``<span hidden="true" id="MAC...">``) is
    skipped except the ``default...`` alternative; <pre>/<script>/<style> are
    skipped; images contribute nothing; <br> is a space.
    """

    def __init__(self):
        html.parser.HTMLParser.__init__(self, convert_charrefs=True)
        self.items = []
        self._cap = None        # [tag, id, [text...], depth]
        self._skip = []         # stack of [tag, depth] for skipped subtrees

    def _finish(self):
        if self._cap is not None:
            self.items.append((self._cap[1], "".join(self._cap[2])))
            self._cap = None

    def handle_starttag(self, tag, attrs):
        if tag in _VOID_TAGS:
            if tag == "br" and self._cap is not None and not self._skip:
                self._cap[2].append(" ")
            if tag == "hr":
                self._finish()
            return
        if self._skip:
            top = self._skip[-1]
            if tag == top[0]:
                top[1] += 1
            return
        a = dict(attrs)
        if tag in _SKIP_TAGS or ("hidden" in a and not (a.get("id") or "").startswith("default")
                                 and tag in ("span", "div", "nav")):
            self._skip.append([tag, 1])
            return
        if tag in _BLOCK_TAGS:
            self._finish()                       # implicit end of <p>/<hN>
        if tag in _CAPTURE_TAGS and _ID_RE.match(a.get("id") or ""):
            self._cap = [tag, a["id"], [], 1]
        elif self._cap is not None and tag == self._cap[0]:
            self._cap[3] += 1

    def handle_startendtag(self, tag, attrs):
        if tag in _VOID_TAGS:
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        if self._skip:
            top = self._skip[-1]
            if tag == top[0]:
                top[1] -= 1
                if top[1] == 0:
                    self._skip.pop()
            return
        if self._cap is not None:
            if tag == self._cap[0]:
                self._cap[3] -= 1
                if self._cap[3] == 0:
                    self._finish()
            elif tag in _BLOCK_TAGS:
                self._finish()

    def handle_data(self, data):
        if self._cap is not None and not self._skip:
            self._cap[2].append(data)

    def close(self):
        html.parser.HTMLParser.close(self)
        self._finish()


def help_paragraphs(html_text):
    p = HelpParagraphs()
    p.feed(html_text)
    p.close()
    return [(i, normalize(t)) for i, t in p.items]


def keyed_paragraphs(items):
    """[(id, text)] -> {(id, occurrence): text}."""
    count = {}
    out = {}
    for pid, text in items:
        n = count.get(pid, 0)
        count[pid] = n + 1
        out[(pid, n)] = text
    return out, count


def align_help_file(en_html, de_html):
    """Align paragraphs of one help page by id. Returns [(en, de, kind)]."""
    en, en_n = keyed_paragraphs(help_paragraphs(en_html))
    de, de_n = keyed_paragraphs(help_paragraphs(de_html))
    pairs = []
    for key in sorted(en, key=lambda k: (k[0], k[1])):
        pid = key[0]
        if key not in de or en_n[pid] != de_n.get(pid):
            continue
        for e, d, kind in align_units(en[key], de[key]):
            pairs.append((e, d, "lo_" + kind))
    return pairs


def list_help_files(lang_root):
    out = []
    for dirpath, dirnames, filenames in os.walk(lang_root):
        dirnames.sort()
        for f in sorted(filenames):
            if f.endswith(".html"):
                out.append(os.path.relpath(os.path.join(dirpath, f), lang_root))
    return sorted(out)


def align_help_trees(en_root, de_root):
    pairs = []
    files = list_help_files(en_root)
    info = {"files_en": len(files), "files_aligned": 0}
    for rel in files:
        dpath = os.path.join(de_root, rel)
        if not os.path.exists(dpath):
            continue
        info["files_aligned"] += 1
        with open(os.path.join(en_root, rel), encoding="utf-8", errors="replace") as f:
            eh = f.read()
        with open(dpath, encoding="utf-8", errors="replace") as f:
            dh = f.read()
        pairs.extend(align_help_file(eh, dh))
    return pairs, info


# --------------------------------------------------------------------------
# Clean, dedupe, split
# --------------------------------------------------------------------------

def bucket(en):
    return int.from_bytes(hashlib.sha256(en.encode("utf-8")).digest()[:8], "big") % 1000


def split_of(en):
    b = bucket(en)
    if b < 10:
        return "test"
    if b < 20:
        return "dev"
    return "train"


def clean_and_dedupe(tagged_pairs, max_words, max_ratio, stats):
    """tagged_pairs: iterable of (source, en, de).  Returns [(source, en, de)]."""
    seen = set()
    out = []
    for src, en, de in tagged_pairs:
        s = stats.setdefault(src, {"aligned": 0, "kept": 0, "dropped": {}})
        s["aligned"] += 1
        en2, de2, reason = filter_pair(en, de, max_words, max_ratio)
        if reason is None and (en2, de2) in seen:
            reason = "duplicate"
        if reason is not None:
            s["dropped"][reason] = s["dropped"].get(reason, 0) + 1
            continue
        seen.add((en2, de2))
        s["kept"] += 1
        out.append((src, en2, de2))
    return out


def split_pairs(pairs):
    """pairs: [(source, en, de)] -> ({split: [(source, en, de)]}, dropped_counts)."""
    splits = {k: [] for k in SPLIT_NAMES}
    for p in pairs:
        splits[split_of(p[1])].append(p)
    train_de = set(p[2] for p in splits["train"])
    dropped = {}
    for name in ("dev", "test"):
        kept = [p for p in splits[name] if p[2] not in train_de]
        dropped[name] = len(splits[name]) - len(kept)
        splits[name] = kept
    return splits, dropped


# --------------------------------------------------------------------------
# apt plumbing (private state under OUT/cache/apt)
# --------------------------------------------------------------------------

class Apt(object):
    def __init__(self, cache, mirror, keyring, releases):
        self.root = os.path.join(cache, "apt")
        self.lists = os.path.join(self.root, "lists")
        self.mirror = mirror.rstrip("/")
        self.keyring = keyring
        self.releases = releases
        self.updated = False
        self.arch = None

    def _setup(self):
        for d in ("lists/partial", "cache/archives/partial", "etc/sources.list.d",
                  "etc/preferences.d"):
            os.makedirs(os.path.join(self.root, d), exist_ok=True)
        src = "".join("deb [signed-by=%s] %s %s main\n" % (self.keyring, self.mirror, r)
                      for r in self.releases)
        with open(os.path.join(self.root, "etc", "sources.list"), "w") as f:
            f.write(src)
        # -c file: clear the system's update/dpkg hooks (packagekit, appstream)
        with open(os.path.join(self.root, "etc", "apt.conf"), "w") as f:
            f.write("#clear APT::Update::Post-Invoke;\n"
                    "#clear APT::Update::Post-Invoke-Success;\n"
                    "#clear APT::Update::Pre-Invoke;\n"
                    "#clear DPkg::Post-Invoke;\n"
                    "#clear DPkg::Pre-Invoke;\n")

    def opts(self):
        r = self.root
        o = ["-c", os.path.join(r, "etc", "apt.conf"),
             "-o", "Dir::State::Lists=" + self.lists,
             "-o", "Dir::Etc::SourceList=" + os.path.join(r, "etc", "sources.list"),
             "-o", "Dir::Etc::SourceParts=" + os.path.join(r, "etc", "sources.list.d"),
             "-o", "Dir::Etc::Preferences=" + os.path.join(r, "etc", "preferences"),
             "-o", "Dir::Etc::PreferencesParts=" + os.path.join(r, "etc", "preferences.d"),
             "-o", "Dir::Cache=" + os.path.join(r, "cache"),
             "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache=",
             "-o", "Acquire::Languages=en,de",
             "-o", "Acquire::GzipIndexes=false",
             "-o", "Acquire::Retries=3",
             "-o", "Acquire::http::Timeout=30",
             "-o", "Debug::NoLocking=true"]
        if self.arch:   # native architecture only, whatever foreign ones dpkg has
            o += ["-o", "APT::Architectures=" + self.arch]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            o += ["-o", "APT::Sandbox::User=root"]
        return o

    def run(self, args, cwd=None):
        cmd = ["apt-get", "-q"] + self.opts() + args
        try:
            p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True)
        except FileNotFoundError:
            raise CorpusError("apt-get not found: this script needs a Debian-like system")
        return p.returncode, p.stdout

    def list_file(self, release, name):
        host_path = self.mirror.split("://", 1)[-1].replace(":", "%3a").replace("/", "_")
        return os.path.join(self.lists, "%s_dists_%s_%s" % (host_path, release, name))

    def update(self):
        if self.updated:
            return
        if not os.path.exists(self.keyring):
            raise CorpusError("keyring %s not found (install debian-archive-keyring or "
                              "pass --keyring)" % self.keyring)
        self._setup()
        try:
            self.arch = subprocess.run(["dpkg", "--print-architecture"], stdout=subprocess.PIPE,
                                       universal_newlines=True).stdout.strip() or None
        except OSError:
            self.arch = None
        log("apt-get update (private lists in %s) for %s ..." % (self.lists, " ".join(self.releases)))
        rc, out = self.run(["update"])
        missing = [self.list_file(r, n) for r in self.releases
                   for n in ("InRelease", "main_i18n_Translation-en", "main_i18n_Translation-de")
                   if not os.path.exists(self.list_file(r, n))]
        bad = rc != 0 or missing or re.search(r"^(E:|W: Failed to fetch|Err:)", out, re.M)
        if bad:
            tail = "\n".join(out.strip().splitlines()[-15:])
            hint = ""
            if re.search(r"Temporary failure resolving|Could not connect|Connection failed|"
                         r"Network is unreachable|Could not resolve|timed out", out):
                hint = "network unreachable: cannot reach %s\n" % self.mirror
            raise CorpusError("%sapt-get update failed (exit status %d, %d of %d index files "
                              "missing, e.g. %s)\n--- apt output (tail) ---\n%s"
                              % (hint, rc, len(missing), 3 * len(self.releases),
                                 os.path.basename(missing[0]) if missing else "-", tail))
        self.updated = True


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def copy_atomic(src, dst):
    tmp = dst + ".tmp"
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def inrelease_date(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:              # (skips the PGP armour header of InRelease)
            if line.startswith("Date:"):
                return line.split(":", 1)[1].strip()
            if line.startswith(("MD5Sum:", "SHA256:", "-----BEGIN PGP SIGNATURE")):
                break
    return None


def _date_key(d):
    """Sort key of an RFC 2822 date as in Release files."""
    import email.utils
    t = email.utils.parsedate_tz(d)
    return email.utils.mktime_tz(t) if t else 0


def fetch_ddtp(apt, cache, releases, refresh):
    """Ensure cache/ddtp/<release>/{InRelease,Translation-en,Translation-de}."""
    names = {"InRelease": "InRelease", "Translation-en": "main_i18n_Translation-en",
             "Translation-de": "main_i18n_Translation-de"}
    dirs = {r: os.path.join(cache, "ddtp", r) for r in releases}
    have = all(os.path.exists(os.path.join(dirs[r], n)) for r in releases for n in names)
    if have and not refresh:
        log("DDTP: using cached Translation files in %s (--refresh to fetch again)"
            % os.path.join(cache, "ddtp"))
        return dirs
    apt.update()
    for r in releases:
        os.makedirs(dirs[r], exist_ok=True)
        for n, lname in names.items():
            copy_atomic(apt.list_file(r, lname), os.path.join(dirs[r], n))
    log("DDTP: copied Translation files of %d releases to %s" % (len(releases), os.path.join(cache, "ddtp")))
    return dirs


def deb_field(deb, field):
    p = subprocess.run(["dpkg-deb", "-f", deb, field], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        raise CorpusError("dpkg-deb -f %s failed: %s" % (deb, p.stderr.strip()))
    return p.stdout.strip()


def fetch_lo(apt, cache, release, refresh):
    """Ensure the two help .debs are downloaded and extracted. Returns info dict."""
    if shutil.which("dpkg-deb") is None:
        raise CorpusError("dpkg-deb not found: this script needs a Debian-like system")
    lodir = os.path.join(cache, "lo")
    os.makedirs(lodir, exist_ok=True)
    sel_path = os.path.join(lodir, "selected.json")
    sel = None
    if os.path.exists(sel_path) and not refresh:
        with open(sel_path) as f:
            sel = json.load(f)
        if sel.get("release") != release or not all(
                os.path.exists(os.path.join(lodir, sel["debs"][l])) for l in LO_PACKAGES):
            sel = None
    if sel is None:
        apt.update()
        tmp = tempfile.mkdtemp(prefix="dl.", dir=lodir)
        try:
            os.chmod(tmp, 0o755)
            pk = ["%s/%s" % (LO_PACKAGES[l], release) for l in sorted(LO_PACKAGES)]
            log("LibreOffice help: apt-get download %s ..." % " ".join(pk))
            rc, out = apt.run(["download"] + pk, cwd=tmp)
            debs = sorted(f for f in os.listdir(tmp) if f.endswith(".deb"))
            if rc != 0 or len(debs) != len(LO_PACKAGES):
                raise CorpusError("apt-get download failed (exit %d):\n%s"
                                  % (rc, "\n".join(out.strip().splitlines()[-15:])))
            sel = {"release": release, "debs": {}}
            for d in debs:
                pkg = deb_field(os.path.join(tmp, d), "Package")
                lang = [l for l, p in LO_PACKAGES.items() if p == pkg][0]
                os.replace(os.path.join(tmp, d), os.path.join(lodir, d))
                sel["debs"][lang] = d
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        with open(sel_path + ".tmp", "w") as f:
            json.dump(sel, f, indent=2, sort_keys=True)
        os.replace(sel_path + ".tmp", sel_path)
    else:
        log("LibreOffice help: using cached %s" % ", ".join(sorted(sel["debs"].values())))
    info = {"release": release, "packages": {}, "roots": {}}
    for lang in sorted(LO_PACKAGES):
        deb = os.path.join(lodir, sel["debs"][lang])
        pkg, ver = deb_field(deb, "Package"), deb_field(deb, "Version")
        xdir = os.path.join(lodir, "x", "%s_%s" % (pkg, ver.replace(":", "%3a")))
        if not os.path.exists(os.path.join(xdir, ".done")):
            shutil.rmtree(xdir, ignore_errors=True)
            os.makedirs(xdir)
            log("extracting %s" % os.path.basename(deb))
            p = subprocess.run(["dpkg-deb", "-x", deb, xdir], stderr=subprocess.PIPE,
                               universal_newlines=True)
            if p.returncode != 0:
                raise CorpusError("dpkg-deb -x %s failed: %s" % (deb, p.stderr.strip()))
            open(os.path.join(xdir, ".done"), "w").close()
        root = os.path.join(xdir, "usr", "share", "libreoffice", "help", LO_LANG_DIRS[lang])
        if not os.path.isdir(root):
            raise CorpusError("unexpected layout of %s: %s missing" % (deb, root))
        info["packages"][pkg] = {"version": ver, "sha256": sha256_file(deb),
                                 "copyright": os.path.relpath(os.path.join(
                                     xdir, "usr", "share", "doc", pkg, "copyright"), cache)}
        info["roots"][lang] = root
    return info


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------

def write_lines_atomic(path, lines):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for l in lines:
            f.write(l)
            f.write("\n")
    os.replace(tmp, path)


def run_spm(out, vocab_size, threads):
    exe = shutil.which("spm_train")
    if exe is None:
        raise CorpusError("spm_train not found; install Debian's package: "
                          "apt-get -o DPkg::Lock::Timeout=600 install -y sentencepiece")
    spm_dir = os.path.join(out, "spm")
    os.makedirs(spm_dir, exist_ok=True)
    prefix = os.path.join(spm_dir, "spm%dk" % (vocab_size // 1000) if vocab_size % 1000 == 0
                          else "spm%d" % vocab_size)
    cmd = [exe, "--input=%s,%s" % (os.path.join(out, "train.en"), os.path.join(out, "train.de")),
           "--model_prefix=" + prefix, "--vocab_size=%d" % vocab_size,
           "--model_type=unigram", "--character_coverage=1.0",
           "--input_sentence_size=10000000", "--shuffle_input_sentence=true",
           "--num_threads=%d" % threads]
    log("spm_train: " + " ".join(cmd))
    t = time.time()
    with open(prefix + ".log", "w") as logf:
        p = subprocess.run(cmd, stdout=logf, stderr=subprocess.STDOUT)
    dt = time.time() - t
    if p.returncode != 0:
        raise CorpusError("spm_train failed (exit %d), see %s.log" % (p.returncode, prefix))
    log("spm_train done in %.1f s: %s.model, %s.vocab" % (dt, prefix, prefix))
    return dt


def default_out():
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "data", "de-en")


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="make_corpus.py",
        description="Build the English-German parallel corpus (DDTP package-description "
                    "translations + LibreOffice help) from Debian's archive, cleaned and split "
                    "deterministically into train/dev/test.",
        epilog="Outputs: OUT/{train,dev,test}.{en,de} (one sentence per line), OUT/stats.json; "
               "downloads are cached in OUT/cache (delete it or pass --refresh to fetch a new "
               "archive state).  Exit status: 0 success, 1 failure, 2 usage error.")
    ap.add_argument("out", nargs="?", default=None,
                    help="output directory (default: <repo>/data/de-en)")
    ap.add_argument("--releases", default=",".join(DEFAULT_RELEASES),
                    help="comma-separated Debian suites for DDTP (default: %(default)s)")
    ap.add_argument("--lo-release", default=DEFAULT_LO_RELEASE,
                    help="suite to take the LibreOffice help packages from (default: %(default)s)")
    ap.add_argument("--mirror", default=DEFAULT_MIRROR, help="Debian mirror (default: %(default)s)")
    ap.add_argument("--keyring", default=DEFAULT_KEYRING,
                    help="archive keyring for signed-by (default: %(default)s)")
    ap.add_argument("--no-ddtp", action="store_true", help="skip the DDTP source")
    ap.add_argument("--no-lo", action="store_true", help="skip the LibreOffice help source")
    ap.add_argument("--refresh", action="store_true",
                    help="run apt-get update / download again instead of using the cache")
    ap.add_argument("--max-words", type=int, default=200,
                    help="drop pairs with a side longer than this many words (default: %(default)s)")
    ap.add_argument("--max-ratio", type=float, default=3.0,
                    help="drop pairs whose (chars+10) length ratio exceeds this (default: %(default)s)")
    ap.add_argument("--spm", action="store_true",
                    help="also train a joint SentencePiece unigram model on train.en+train.de "
                         "(OUT/spm/spm8k.model), needs spm_train")
    ap.add_argument("--spm-vocab-size", type=int, default=8000,
                    help="vocabulary size for --spm (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="threads for spm_train (default: %(default)s)")
    a = ap.parse_args(argv)
    a.releases = [r.strip() for r in a.releases.split(",") if r.strip()]
    if not a.releases and not a.no_ddtp:
        ap.error("--releases is empty")
    if a.no_ddtp and a.no_lo:
        ap.error("--no-ddtp and --no-lo leave nothing to do")
    if a.out is None:
        a.out = default_out()
    return a


def build(args):
    out = os.path.abspath(args.out)
    cache = os.path.join(out, "cache")
    os.makedirs(cache, exist_ok=True)
    apt_releases = list(args.releases) if not args.no_ddtp else []
    if not args.no_lo and args.lo_release not in apt_releases:
        apt_releases.append(args.lo_release)
    apt = Apt(cache, args.mirror, args.keyring, apt_releases)

    stats = {"split_rule": "bucket = int.from_bytes(sha256(en.encode('utf-8')).digest()[:8], "
                           "'big') % 1000 over the cleaned English side; 0-9 test, 10-19 dev, "
                           "else train; dev/test pairs whose German side occurs in train dropped",
             "filters": {"max_words": args.max_words, "max_ratio": args.max_ratio,
                         "ratio_definition": "max(len+10)/min(len+10) in characters"},
             "mirror": args.mirror}
    tagged = []   # (source, en, de)

    if not args.no_ddtp:
        dirs = fetch_ddtp(apt, cache, args.releases, args.refresh)
        stats["ddtp"] = {"releases": args.releases, "per_release": {}}
        for r in args.releases:
            d = dirs[r]
            with open(os.path.join(d, "Translation-en"), encoding="utf-8", errors="replace") as fe, \
                    open(os.path.join(d, "Translation-de"), encoding="utf-8", errors="replace") as fd:
                pairs, info = align_ddtp(fe, fd)
            info["archive_date"] = inrelease_date(os.path.join(d, "InRelease"))
            info["sha256"] = {n: sha256_file(os.path.join(d, n))
                              for n in ("InRelease", "Translation-en", "Translation-de")}
            kinds = {}
            for _, _, k in pairs:
                kinds[k] = kinds.get(k, 0) + 1
            info["aligned_pairs_by_kind"] = kinds
            stats["ddtp"]["per_release"][r] = info
            log("DDTP %s: %d records aligned -> %d raw pairs" % (r, info["records_aligned"], len(pairs)))
            tagged.extend(("ddtp:" + r, e, g) for e, g, _ in pairs)

    if not args.no_lo:
        lo = fetch_lo(apt, cache, args.lo_release, args.refresh)
        log("LibreOffice help: aligning paragraphs by par_id/hd_id ...")
        pairs, info = align_help_trees(lo["roots"]["en"], lo["roots"]["de"])
        kinds = {}
        for _, _, k in pairs:
            kinds[k] = kinds.get(k, 0) + 1
        info["aligned_pairs_by_kind"] = kinds
        info["release"] = lo["release"]
        info["packages"] = lo["packages"]
        stats["libreoffice_help"] = info
        log("LibreOffice help: %d files -> %d raw pairs" % (info["files_aligned"], len(pairs)))
        tagged.extend(("libreoffice-help", e, g) for e, g, _ in pairs)

    log("cleaning and de-duplicating %d raw pairs ..." % len(tagged))
    per_source = {}
    clean = clean_and_dedupe(tagged, args.max_words, args.max_ratio, per_source)
    splits, leak = split_pairs(clean)

    counts = {}
    for name in SPLIT_NAMES:
        for src, _, _ in splits[name]:
            counts.setdefault(src, {k: 0 for k in SPLIT_NAMES})[name] += 1
    for src in per_source:
        per_source[src]["final"] = counts.get(src, {k: 0 for k in SPLIT_NAMES})
    stats["sources"] = per_source
    stats["splits"] = {n: len(splits[n]) for n in SPLIT_NAMES}
    stats["dropped_dev_test_target_in_train"] = leak
    stats["total_pairs"] = sum(stats["splits"].values())
    if not args.no_ddtp:
        stats["ddtp"]["archive_dates"] = {r: stats["ddtp"]["per_release"][r]["archive_date"]
                                          for r in args.releases}
        stats["date"] = max((d for d in stats["ddtp"]["archive_dates"].values() if d),
                            key=_date_key, default=None)
    stats["files"] = {}
    for name in SPLIT_NAMES:
        for lang, idx in (("en", 1), ("de", 2)):
            path = os.path.join(out, "%s.%s" % (name, lang))
            write_lines_atomic(path, [p[idx] for p in splits[name]])
            stats["files"]["%s.%s" % (name, lang)] = {"lines": len(splits[name]),
                                                      "sha256": sha256_file(path)}
    tmp = os.path.join(out, "stats.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, os.path.join(out, "stats.json"))
    log("wrote %s: train %d, dev %d, test %d pairs (dev/test dropped as target-in-train: %s)"
        % (out, stats["splits"]["train"], stats["splits"]["dev"], stats["splits"]["test"], leak))
    if args.spm:
        run_spm(out, args.spm_vocab_size, args.threads)
    return stats


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        build(args)
    except CorpusError as e:
        sys.stderr.write("make_corpus: error: %s\n" % e)
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("make_corpus: interrupted (cached downloads are kept; run again to resume)\n")
        return 1
    except OSError as e:
        sys.stderr.write("make_corpus: error: %s\n" % e)
        return 1
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
