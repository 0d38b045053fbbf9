#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write the tokenizer's hard-case lines (bytes, one per line) to stdout.

Deterministic: fixed lists plus seeded random mixtures.  Covers runs of
spaces/tabs/CR/VT/FF inside a line, characters NFKC changes (full-width,
compatibility, ligatures, circled/superscript digits, NBSP, ideographic
space), combining marks, emoji and other 4-byte UTF-8, scripts the models
never saw, invalid UTF-8 (lone continuation bytes, truncated and overlong
sequences, surrogates, bytes F5..FF), NUL bytes, empty and blank lines,
literal special-piece spellings and U+2581 / U+FFFD in the input.
Usage: spm_hard_cases.py [N_RANDOM] > hard.txt
"""
import random
import sys

FIXED = [
    "", " ", "  ", "\t", " \t \t ", "\r", "\x0b\x0c",
    "Hello   world", "  leading and trailing  ", "tabs\tinside\t\tthe\t line",
    "multiple     spaces    between     words", "a\rb\rc", "x\x0by\x0cz",
    "ＦＵＬＬ－ＷＩＤＴＨ　ｔｅｘｔ　１２３", "ﬁnance ﬂow ﬀ ﬃ", "① ② ⑩ ⑳", "x² y³ H₂O",
    "½ ¼ ¾ ™ ℃ № ㎏ ㎞ ㍻", "ｶﾀｶﾅ ﾊﾟﾋﾟﾌﾟ", "\u00a0nbsp\u00a0inside\u00a0", "ideographic\u3000space",
    "e\u0301 a\u0308 n\u0303 café naïve", "\u1100\u1161\u11a8 한국어", "o\u0301\u0302\u0303\u0304 stacked",
    "👍 👍🏽 👨‍👩‍👧 🇩🇪 🏳️‍🌈", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐛𝐨𝐥𝐝 𝟏𝟐𝟑", "𠀀𠀁 𪚥 𩸽", "\U0001F600\U0001F601\U0001F602",
    "日本語のテキスト", "中文文本测试", "ไทย ภาษา", "עברית", "العربية ﷺ ﷽", "ᚠᚢᚦᚨᚱᚲ", "ꦗꦮ",
    "Ελληνικά κείμενο", "Русский текст", "ǅ ǈ ǋ ǲ", "ſ ẞ ß", "Å Ω K", "\u2581already\u2581escaped",
    "\ufffd replacement", "\ufeffBOM at start", "zero\u200bwidth\u200djoiner\u200c",
    "<unk> <s> </s> <pad> <0x41>", "⁇ ⁇", "1234567890 3.14159 2024-01-01 0x1F",
    "a" * 300, "ab" * 150 + " " + "xyz" * 100, "word " * 100,
]

INVALID = [
    b"\x80", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\x98",
    b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80 surrogate", b"\xed\xbf\xbf",
    b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xfe\xff", b"\xff",
    b"mixed \xff valid \xc3\xa9 \x80\x80 end", b"nul\x00byte", b"\x00", b"\x00\x00 a",
    b"\xef\xbf\xbd\xef\xbf\xbe\xef\xbf\xbf", b"\xf0\x90\x80", b"caf\xe9", b"\xe9t\xe9",
]

POOL = (list("abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,;:!?-'\"()[]") +
        [" ", "  ", "\t", "é", "ü", "ß", "ç", "Ａ", "ｂ", "１", "ﬁ", "①", "²", "\u00a0", "\u3000",
         "\u0301", "\u0308", "😀", "👍🏽", "𝟏", "日", "本", "語", "한", "ا", "ש", "∑", "€", "£",
         "\u2581", "\ufffd", "\u200b", "<unk>", "</s>"])
BAD = [b"\x80", b"\xc3", b"\xe2\x82", b"\xff", b"\xed\xa0\x80", b"\xc0\x80", b"\xf0\x9f"]


def main():
    n_random = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    out = sys.stdout.buffer
    for s in FIXED:
        out.write(s.encode("utf-8") + b"\n")
    for b in INVALID:
        out.write(b + b"\n")
    rng = random.Random(20240603)
    for _ in range(n_random):
        parts = []
        for _ in range(rng.randint(0, 40)):
            if rng.random() < 0.05:
                parts.append(rng.choice(BAD))
            else:
                parts.append(rng.choice(POOL).encode("utf-8"))
        out.write(b"".join(parts) + b"\n")


if __name__ == "__main__":
    main()
