"""Generates ``hostd/compose/_lookalikes.py``: what each fence character looks like.

Run ``python -m tests.compose.lookalikes_table > hostd/compose/_lookalikes.py`` after
a Unicode or confusables update; ``test_render`` fails while the committed table
and this generator disagree. Sources: NFKC (``unicodedata``) and the Unicode TR39
confusables data shipped by ``confusable-homoglyphs`` (a dev dependency: the
daemon reads only the generated table, so it never loads the data set).
"""

from __future__ import annotations

import sys
import unicodedata

#: The characters of the fence tokens ``<frame`` and ``</frame`` (and ``n``, for
#: the ``rn`` that TR39 lists as a lookalike of ``m``).
FENCE_ALPHABET = "</framen"


def _confusables() -> dict[str, list[str]]:
    from confusable_homoglyphs.confusables import confusables_data

    return {k: [h["c"] for h in v] for k, v in confusables_data.items()}


def ignorable(cp: int) -> bool:
    """A code point a reader does not see between two letters: format characters,
    controls that are not whitespace, variation selectors (incl. Mongolian free
    ones), the tag block, the combining grapheme joiner and the Hangul fillers."""
    ch = chr(cp)
    if 0xE0000 <= cp <= 0xE0FFF:  # tags and the variation selector supplement
        return True
    cat = unicodedata.category(ch)
    if cat == "Cf":
        return True
    if cat == "Cc":
        return not ch.isspace()
    name = unicodedata.name(ch, "")
    return "VARIATION SELECTOR" in name or cp in (0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0)


def generate() -> tuple[dict[str, str], list[str], list[tuple[int, int]]]:
    """``(lookalikes, sequences, ignorable ranges)``.

    ``lookalikes`` maps a single character to the lower-case fence character it
    reads as (by NFKC or a TR39 confusable, either way round); ``sequences``
    lists multi-character TR39 lookalikes of ``m`` spelled in fence characters.
    """
    alphabet = set(FENCE_ALPHABET) | set(FENCE_ALPHABET.upper())
    out: dict[str, str] = {}
    for cp in range(0x110000):
        ch = chr(cp)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        folded = unicodedata.normalize("NFKC", ch)
        if folded in alphabet and folded != ch:
            out[ch] = folded.lower()
    data = _confusables()
    for target in sorted(alphabet):
        for other in data.get(target, []):
            if len(other) == 1 and other not in alphabet:
                out.setdefault(other, target.lower())
    for source, others in data.items():
        if len(source) == 1 and source not in alphabet:
            for other in others:
                if other in alphabet:
                    out.setdefault(source, other.lower())
    for upper in FENCE_ALPHABET.upper():
        if upper != upper.lower():
            out[upper] = upper.lower()
    sequences = sorted(
        {s.lower() for s in data.get("m", []) if len(s) > 1 and set(s.lower()) <= alphabet}
    )
    ranges: list[tuple[int, int]] = []
    for cp in range(0x110000):
        if ignorable(cp):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    return dict(sorted(out.items())), sequences, ranges


def render_module() -> str:
    lookalikes, sequences, ranges = generate()
    lines = [
        '"""What each character of a fence token looks like (generated; do not edit).',
        "",
        "Made by ``python -m tests.compose.lookalikes_table`` from NFKC and the Unicode",
        "TR39 confusables; used only to *detect* a fence lookalike (R3).",
        '"""',
        "",
        f'UNICODE_VERSION = "{unicodedata.unidata_version}"',
        "",
        "#: A character -> the fence character (lower case) it reads as.",
        "LOOKALIKES: dict[str, str] = {",
    ]
    lines += [f'    "{ascii(ch)[1:-1]}": "{to}",' for ch, to in lookalikes.items()]
    quoted = [f'"{s}"' for s in sequences]
    spelled = f"{quoted[0]}," if len(quoted) == 1 else ", ".join(quoted)
    lines += ["}", "", "#: Multi-character lookalikes of ``m``."]
    lines += [f"M_SEQUENCES: tuple[str, ...] = ({spelled})"]
    lines += ["", "#: Inclusive code point ranges a reader does not see."]
    lines += ["IGNORABLE: tuple[tuple[int, int], ...] = ("]
    lines += [f"    (0x{a:04X}, 0x{b:04X})," for a, b in ranges]
    lines += [")", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render_module())
