"""What a text is searched by: its terms, as the ``files`` provider's BM25 indexes them.

One tokenizer for every lexical score hostd computes: the ``files`` provider indexes
its chunks with ``tokenize`` and the ``mcp`` binding scores what a server served by
the same query terms, so a goal's function words ("how does … work?") count for
neither. ``surface_forms`` is the way back from a term to the words that make it,
for a scorer that finds a query's terms with one regex pass instead of tokenizing
every text it scores.
"""

from __future__ import annotations

import re

__all__ = ["QUESTION_WORDS", "STOPWORDS", "camel_parts", "surface_forms", "tokenize"]

#: Words that say nothing of what a text is about: a query's are not searched for, so
#: "where is the banana" does not match every text that holds "the" (lower case). The
#: function words only: code search indexes and asks with these dropped, and a word
#: code is made of (``use``, ``into``, ``then``, ``must``, ``work``) stays searchable.
STOPWORDS = frozenset(
    "a an and are as at be by do does for from has have how i if in is it its of on or "
    "that the this to was what when where which who why will with".split()
)
#: Beside ``STOPWORDS``, the pronouns, modals and verbs a question is worded with ("how
#: do we use …", "may we …", "how does X work"): not searched for where prose is matched
#: to a question (the sections of an MCP server's answer), so a handbook section that
#: says "we use" or "may ship" is no answer to them. Not dropped by ``tokenize``: in
#: code they are identifiers (Rust's ``use`` and ``Into``, a promise's ``then``).
QUESTION_WORDS = frozenset(
    "about also am been being but can could did had he her him his into just may me "
    "might must my our she should than their them then there these they those too use "
    "used uses using very we were work works would you your".split()
)

#: A hex identifier: a commit hash, a digest, an object id (``c174e70``, ``3f9a0b1e…``):
#: 7 or more hex digits, letters and digits both, a word of its own. It is one term,
#: never its digit and letter runs: those would be numbers and letters no text is
#: about, so "the last 5 commits" would match every hash that holds a lone ``5``.
_HEX = r"(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{7,}(?!\w)"
#: A hex identifier's first 7 digits (git's shortest abbreviation) are a term of it too,
#: so ``c174e70`` in a question names the commit whose full hash a text spells out.
_HEX_PREFIX = 7
#: What a hex identifier's terms may be (it whole, its first digits): ``surface_forms``.
_HEX_DIGITS_RE = re.compile(r"[0-9a-f]{7,}")
#: A hex literal (``0x1f2e3d4c``, ``0XFF``): its digits, a word of their own, are one
#: term, never ``0`` and ``x1f2e3d4c``'s pieces. With 7 digits or more it is a hex
#: identifier spelled with ``0x`` (an address, a magic number, a hash): its terms are
#: its digits' (``_HEX``), the prefix dropped, so a text that spells ``0x1f2e3d4c``
#: and a question that says ``1f2e3d4c`` (or the other way round) find each other. A
#: shorter one keeps its prefix (``0xff``): ``ff`` or ``10`` alone name no number.
_LITERAL = r"0[xX](?P<literal>[0-9a-fA-F]+)(?!\w)"
#: A word: a hex literal (``_LITERAL``), a hex identifier (``_HEX``), a letter then
#: letters, digits and ``_`` (any script; on ASCII text exactly ``[A-Za-z][A-Za-z0-9_]*``),
#: or a run of ASCII digits.
_WORD_RE = re.compile(r"(?<!\w)(?:" + _LITERAL + r"|(?P<hex>" + _HEX + r"))|[^\W\d_]\w*|[0-9]+")
#: Scripts written without spaces between words (CJK ideographs, kana, hangul): a run
#: of them is searched by its character pairs, so a phrase inside a sentence matches.
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
#: The suffixes ``_stem`` takes off, each with the shortest word it is taken from.
_SUFFIXES = (("ing", 6), ("ed", 5), ("es", 5), ("s", 4))
#: The plural a ``y`` becomes (``retries``, ``policies``): ``_stem`` gives the ``y`` back.
_IES, _IES_MIN = "ies", 5
#: The shortest word whose final ``e`` ``_stem`` drops, after any suffix.
_E_MIN = 4


def _stem(word: str) -> str:
    # A deliberately small normaliser, applied to both sides alike: plural, -ing, -ed,
    # then a final "e", so a verb's forms are one term ("generate", "generates",
    # "generated", "generating": generat; "make", "makes", "making": mak), and "retries"
    # is "retry". Snowball (Porter2) was measured instead and not taken: it also makes
    # "running" "run", which cost the repository eval (docs/benchmarks.md).
    if len(word) >= _IES_MIN and word.endswith(_IES):
        return word[: -len(_IES)] + "y"
    for suffix, min_len in _SUFFIXES:
        if len(word) >= min_len and word.endswith(suffix) and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) >= _E_MIN and word.endswith("e") else word


def _unicode_terms(word: str) -> list[str]:
    """A word with letters beyond ASCII: lower-cased, each run of a script written
    without spaces as its character pairs (a lone character as itself), the rest as
    words ("réunion" one term, "订单缓存" 订单 单缓 缓存)."""
    lower = word.lower()
    terms: list[str] = []
    last = 0
    for run in _CJK_RE.finditer(lower):
        terms.append(lower[last : run.start()])
        chars = run.group(0)
        terms.extend(
            [chars] if len(chars) == 1 else [chars[i : i + 2] for i in range(len(chars) - 1)]
        )
        last = run.end()
    terms.append(lower[last:])
    return [_stem(t.strip("_")) for t in terms if t and t not in STOPWORDS]


def tokenize(text: str) -> list[str]:
    """Lower-cased terms; identifiers also yield their snake/camel parts; a hex
    identifier (``_HEX``), ``0x`` or not, is one term, and its first 7 digits another;
    a shorter hex literal one term (``0xff``: ``_LITERAL``); words beyond ASCII as
    ``_unicode_terms`` cuts them."""
    out: list[str] = []
    for m in _WORD_RE.finditer(text):
        word = m.group(0)
        if (literal := m.group("literal")) is not None and len(literal) < _HEX_PREFIX:
            out.append(word.lower())  # ``0xff``: its prefix says it is a number
            continue
        if literal is not None or m.group("hex"):  # not stemmed: ``…ed`` is hex
            lower = (literal or word).lower()
            out.append(lower)
            if len(lower) > _HEX_PREFIX:
                out.append(lower[:_HEX_PREFIX])
            continue
        if not word.isascii():
            out.extend(_unicode_terms(word))
            continue
        lower = word.lower()
        parts = [p for piece in word.split("_") for p in camel_parts(piece)]
        if lower not in STOPWORDS:
            out.append(_stem(lower.strip("_")))
        if len(parts) > 1:
            out.extend(_stem(p) for p in parts if p not in STOPWORDS)
    return [t for t in out if t]


def camel_parts(word: str) -> list[str]:
    """The lower-cased camelCase parts of an ASCII word without ``_`` (``getUserName``:
    get, user, name; ``HTTPServer``: http, server), as ``tokenize`` splits identifiers
    (unstemmed: ``surface_forms`` leads back to them)."""
    return [p.lower() for p in _CAMEL_RE.findall(word)]


def surface_forms(term: str) -> list[str]:
    """The lower-case words ``tokenize`` makes ``term`` of: the term itself, and the term
    with each suffix the stemmer takes off (``evict``: evict, evicting, evicted, evicts),
    with the final ``e`` it drops (``generat``: generate, generates, generated, …), and a
    ``y`` as its plural (``retry``: retries), where it does; never a stop word, which
    ``tokenize`` drops whole; a hex identifier's terms as they are (``tokenize`` does not
    stem them)."""
    stems = (term, term + "e")
    candidates = [*stems, *(s + suffix for s in stems for suffix, _ in _SUFFIXES)]
    if term.endswith("y"):
        candidates.append(term[:-1] + _IES)
    forms = [w for w in candidates if _stem(w) == term and w not in STOPWORDS]
    if term not in forms and _HEX_DIGITS_RE.fullmatch(term):
        forms.insert(0, term)  # a hex identifier or its first digits: never stemmed
    return forms
