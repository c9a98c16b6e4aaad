"""Which text encoding a dataset file is in, from its first bytes.

Dataset text (JSON Lines, CSV, .json) is read as UTF-8. A byte-order mark says UTF-16 or UTF-32
for certain, so such files are decoded; without one, UTF-16/32 shows as NUL bytes in a fixed
pattern, random or compressed data as NUL and control bytes scattered, and a single-byte code page
(Latin-1, Windows-1252) as bytes that are not UTF-8 but are printable in that code page. These
are guesses for an error message, never used to decode: a wrong guess would change the prompts.
"""

from __future__ import annotations

import codecs

# UTF-32 LE's mark starts with UTF-16 LE's, so the longer marks are tried first.
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32 LE"),
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32 BE"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16 LE"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16 BE"),
)
SNIFF_BYTES = 1 << 16  # what the file-level guess looks at
_PATTERN_BYTES = 4096  # enough for the NUL pattern of UTF-16/32 text
# C0 control bytes other than tab, newline, form feed and carriage return, and the five bytes
# Windows-1252 leaves undefined: text in a single-byte code page has few of them, binary data many.
_NOT_TEXT = frozenset(range(0x20)) - {0x09, 0x0A, 0x0C, 0x0D} | {0x7F, 0x81, 0x8D, 0x8F, 0x90, 0x9D}
_BINARY_SHARE = 0.05


def bom(head: bytes) -> tuple[str, str] | None:
    """(Python codec, label) of the byte-order mark `head` starts with, or None. The codecs
    "utf-16"/"utf-32" read the mark themselves; a UTF-8 mark is for the reader to drop."""
    for mark, codec, label in BOMS:
        if head.startswith(mark):
            return codec, label
    return None


def first_invalid_utf8(data: bytes) -> int | None:
    """Offset of the first byte that is not UTF-8, or None; a character cut off at the end of
    `data` (a head read from a longer file) is not counted as bad."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError as exc:
        return exc.start
    return None


def looks_like(data: bytes) -> str:
    """What bytes that are not UTF-8 text look like: "UTF-16 LE without a BOM", "UTF-32 BE without
    a BOM", "Latin-1/Windows-1252" or "binary data"."""
    sample = data[:_PATTERN_BYTES]
    if 0 in sample:
        return _nul_pattern(sample) or "binary data"
    not_text = sum(byte in _NOT_TEXT for byte in sample)
    return "binary data" if not_text > _BINARY_SHARE * len(sample) else "Latin-1/Windows-1252"


def whole_file_guess(head: bytes) -> tuple[str, int] | None:
    """(what it looks like, offset of the first telling byte) when the head of a file with no BOM
    is not text at all: UTF-16/32 without its mark, or binary data. None for UTF-8 text, and for
    text with stray bytes that are not UTF-8, which the reader reports line by line."""
    if 0 in head:
        return looks_like(head), head.index(0)
    bad = first_invalid_utf8(head)
    if bad is not None and looks_like(head) == "binary data":
        return "binary data", bad
    return None


def _nul_pattern(sample: bytes) -> str | None:
    """UTF-16/32 of mostly Latin-script text: a NUL in the same places of every 2 or 4 bytes."""
    usable = len(sample) - len(sample) % 4
    if usable < 4:
        return None
    share = [sum(sample[i] == 0 for i in range(k, usable, 4)) / (usable // 4) for k in range(4)]
    if min(share[1:]) > 0.9 and share[0] < 0.1:
        return "UTF-32 LE without a BOM"
    if min(share[:3]) > 0.9 and share[3] < 0.1:
        return "UTF-32 BE without a BOM"
    odd, even = (share[1] + share[3]) / 2, (share[0] + share[2]) / 2
    if odd > 0.3 and even < 0.05:
        return "UTF-16 LE without a BOM"
    if even > 0.3 and odd < 0.05:
        return "UTF-16 BE without a BOM"
    return None
