"""Which text encoding a dataset file is in, from its first bytes.

Dataset text (JSON Lines, CSV, .json) is read as UTF-8. A byte-order mark says UTF-16 or UTF-32
for certain, so such files are decoded. Bytes that are not UTF-8 are named for the error message
by charset-normalizer: UTF-16/32 without a mark, binary data (no code page reads it as text), or
text in a single-byte code page. These are guesses for an error message, never used to decode: a
wrong guess would change the prompts.
"""

from __future__ import annotations

import codecs

import charset_normalizer

# UTF-32 LE's mark starts with UTF-16 LE's, so the longer marks are tried first.
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32 LE"),
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32 BE"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16 LE"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16 BE"),
)
SNIFF_BYTES = 1 << 16  # what the file-level guess looks at
_SAMPLE_BYTES = 4096  # what charset-normalizer is shown: enough to tell UTF-16/32 and binary data
_WIDE = {
    "utf_16_le": "UTF-16 LE without a BOM",
    "utf_16_be": "UTF-16 BE without a BOM",
    "utf_32_le": "UTF-32 LE without a BOM",
    "utf_32_be": "UTF-32 BE without a BOM",
}
# charset-normalizer's pick among the single-byte code pages is a coin toss on a line or two
# ("caf\xe9" comes out cp1250, cp1257 or cp1006 (Farsi)), so text in one is named as the likeliest family.
_SINGLE_BYTE = "Latin-1/Windows-1252"


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
    best = charset_normalizer.from_bytes(data[:_SAMPLE_BYTES]).best()
    if best is None:
        return "binary data"
    if best.encoding.startswith(("utf_16", "utf_32")):
        return _WIDE.get(best.encoding, best.encoding.replace("utf_", "UTF-") + " without a BOM")
    return _SINGLE_BYTE


def whole_file_guess(head: bytes) -> tuple[str, int] | None:
    """(what it looks like, offset of the first telling byte) when the head of a file with no BOM
    is not text at all: UTF-16/32 without its mark, or binary data. None for UTF-8 text, and for
    text with stray bytes that are not UTF-8 (or a stray NUL), which the reader reports line by line."""
    bad = head.find(0)
    if bad < 0:
        bad = first_invalid_utf8(head)
        if bad is None:
            return None
    what = looks_like(head)
    return None if what == _SINGLE_BYTE else (what, bad)
