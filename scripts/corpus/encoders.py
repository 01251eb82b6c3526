"""Encoders of the obfuscation corpora: each turns a plaintext payload into the form an attack hides it
in, written from the encodings' definitions (Python's `base64`, `codecs`, `urllib`, the Morse and
braille alphabets, Unicode's blocks), never from an attack collection.

`ENCODERS` maps a kind to ``(names, encode)``: the ways a prompt may call the encoding, and a function
of ``(text, rng)``.
"""

# ruff: noqa: RUF001  (look-alike letters are what the encoders produce)

from __future__ import annotations

import base64
import codecs
import random
import urllib.parse
from collections.abc import Callable

MORSE = {
    "a": ".-", "b": "-...", "c": "-.-.", "d": "-..", "e": ".", "f": "..-.", "g": "--.", "h": "....", "i": "..",
    "j": ".---", "k": "-.-", "l": ".-..", "m": "--", "n": "-.", "o": "---", "p": ".--.", "q": "--.-", "r": ".-.",
    "s": "...", "t": "-", "u": "..-", "v": "...-", "w": ".--", "x": "-..-", "y": "-.--", "z": "--..",
    "0": "-----", "1": ".----", "2": "..---", "3": "...--", "4": "....-", "5": ".....", "6": "-....",
    "7": "--...", "8": "---..", "9": "----.", ",": "--..--", ".": ".-.-.-", "'": ".----.", "?": "..--..",
}  # fmt: skip
# Braille grade 1 letters: dots 1-6 as bits 0-5 of U+2800.
_BRAILLE_DOTS = {
    "a": (1,), "b": (1, 2), "c": (1, 4), "d": (1, 4, 5), "e": (1, 5), "f": (1, 2, 4), "g": (1, 2, 4, 5),
    "h": (1, 2, 5), "i": (2, 4), "j": (2, 4, 5), "k": (1, 3), "l": (1, 2, 3), "m": (1, 3, 4), "n": (1, 3, 4, 5),
    "o": (1, 3, 5), "p": (1, 2, 3, 4), "q": (1, 2, 3, 4, 5), "r": (1, 2, 3, 5), "s": (2, 3, 4), "t": (2, 3, 4, 5),
    "u": (1, 3, 6), "v": (1, 2, 3, 6), "w": (2, 4, 5, 6), "x": (1, 3, 4, 6), "y": (1, 3, 4, 5, 6), "z": (1, 3, 5, 6),
}  # fmt: skip
BRAILLE = {letter: chr(0x2800 + sum(1 << (d - 1) for d in dots)) for letter, dots in _BRAILLE_DOTS.items()}
NATO = {
    "a": "Alfa", "b": "Bravo", "c": "Charlie", "d": "Delta", "e": "Echo", "f": "Foxtrot", "g": "Golf", "h": "Hotel",
    "i": "India", "j": "Juliett", "k": "Kilo", "l": "Lima", "m": "Mike", "n": "November", "o": "Oscar", "p": "Papa",
    "q": "Quebec", "r": "Romeo", "s": "Sierra", "t": "Tango", "u": "Uniform", "v": "Victor", "w": "Whiskey",
    "x": "X-ray", "y": "Yankee", "z": "Zulu",
}  # fmt: skip
_LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7", "g": "9", "b": "8", "l": "1"}
_CYRILLIC = {"a": "а", "c": "с", "e": "е", "o": "о", "p": "р", "x": "х", "y": "у", "i": "і", "s": "ѕ", "j": "ј"}
_GREEK = {"a": "α", "o": "ο", "i": "ι", "t": "τ", "u": "υ", "v": "ν", "k": "κ", "n": "η"}
_SMALL_CAPS = dict(zip("abcdefghijklmnopqrstuvwxyz", "ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘǫʀꜱᴛᴜᴠᴡxʏᴢ", strict=True))

Encode = Callable[[str, random.Random], str]


def _plain(text: str) -> str:
    """Payloads fed to letter-only encodings: accents dropped, as people type them into converters."""
    import unicodedata

    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def b64(text: str, rng: random.Random) -> str:
    raw = text.encode()
    style = rng.choice(["std", "std", "url", "nopad", "wrapped"])
    if style == "url":
        return base64.urlsafe_b64encode(raw).decode()
    encoded = base64.b64encode(raw).decode()
    if style == "nopad":
        return encoded.rstrip("=")
    if style == "wrapped":
        return "\n".join(encoded[i : i + 40] for i in range(0, len(encoded), 40))
    return encoded


def b32(text: str, rng: random.Random) -> str:
    encoded = base64.b32encode(text.encode()).decode()
    return encoded.lower() if rng.random() < 0.2 else encoded


def b85(text: str, rng: random.Random) -> str:
    if rng.random() < 0.5:
        return base64.a85encode(text.encode(), adobe=True).decode()
    return base64.b85encode(text.encode()).decode()


def hexa(text: str, rng: random.Random) -> str:
    raw = text.encode()
    style = rng.choice(["plain", "spaced", "escaped", "0x", "upper", "colon"])
    if style == "plain":
        return raw.hex()
    if style == "spaced":
        return " ".join(f"{b:02x}" for b in raw)
    if style == "escaped":
        return "".join(f"\\x{b:02x}" for b in raw)
    if style == "0x":
        return " ".join(f"0x{b:02x}" for b in raw)
    if style == "upper":
        return raw.hex().upper()
    return ":".join(f"{b:02x}" for b in raw)


def binary(text: str, rng: random.Random) -> str:
    groups = [f"{b:08b}" for b in text.encode()]
    return "".join(groups) if rng.random() < 0.2 else " ".join(groups)


def decimal(text: str, rng: random.Random) -> str:
    sep = rng.choice([" ", ", ", ",", " "])
    return sep.join(str(ord(c)) for c in text)


def octal(text: str, rng: random.Random) -> str:
    raw = text.encode()
    return "".join(f"\\{b:03o}" for b in raw) if rng.random() < 0.5 else " ".join(f"{b:03o}" for b in raw)


def url(text: str, rng: random.Random) -> str:
    if rng.random() < 0.6:
        return "".join(f"%{b:02X}" for b in text.encode())
    return urllib.parse.quote(text, safe="")


def html_entities(text: str, rng: random.Random) -> str:
    if rng.random() < 0.5:
        return "".join(f"&#{ord(c)};" for c in text)
    return "".join(f"&#x{ord(c):x};" for c in text)


def unicode_escapes(text: str, rng: random.Random) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def quoted_printable(text: str, rng: random.Random) -> str:
    """Every byte as ``=XX``, in one run or in 60-character lines ending with soft breaks."""
    encoded = "".join(f"={b:02X}" for b in text.encode())
    if rng.random() < 0.5:
        return encoded
    return "=\n".join(encoded[i : i + 60] for i in range(0, len(encoded), 60))


def rot13(text: str, rng: random.Random) -> str:
    return codecs.encode(_plain(text), "rot13")


def shift(text: str, by: int) -> str:
    out = []
    for c in text:
        if "a" <= c <= "z":
            out.append(chr((ord(c) - 97 + by) % 26 + 97))
        elif "A" <= c <= "Z":
            out.append(chr((ord(c) - 65 + by) % 26 + 65))
        else:
            out.append(c)
    return "".join(out)


def caesar(text: str, rng: random.Random) -> str:
    return shift(_plain(text), rng.choice([k for k in range(1, 26) if k != 13]))


def atbash(text: str, rng: random.Random) -> str:
    out = []
    for c in _plain(text):
        if "a" <= c <= "z":
            out.append(chr(219 - ord(c)))
        elif "A" <= c <= "Z":
            out.append(chr(155 - ord(c)))
        else:
            out.append(c)
    return "".join(out)


def morse(text: str, rng: random.Random) -> str:
    words = [" ".join(MORSE[c] for c in w.lower() if c in MORSE) for w in _plain(text).split()]
    style = rng.choice(["slash", "slash", "bar", "gap", "dots"])
    if style == "bar":
        return " | ".join(words)
    if style == "gap":
        return "   ".join(words)
    joined = " / ".join(words)
    return joined.replace(".", "•").replace("-", "−") if style == "dots" else joined


def braille(text: str, rng: random.Random) -> str:
    return "".join(BRAILLE.get(c, " " if c == " " else "") for c in _plain(text).lower())


def nato(text: str, rng: random.Random) -> str:
    words = [" ".join(NATO[c] for c in w.lower() if c in NATO) for w in _plain(text).split()]
    return rng.choice([" / ", " (space) ", " | "]).join(words)


def leet(text: str, rng: random.Random) -> str:
    rate = rng.choice([0.6, 0.9, 1.0])
    return "".join(_LEET[c.lower()] if c.lower() in _LEET and rng.random() < rate else c for c in text)


def reversed_text(text: str, rng: random.Random) -> str:
    style = rng.choice(["whole", "whole", "words", "order"])
    if style == "whole":
        return text[::-1]
    if style == "words":
        return " ".join(w[::-1] for w in text.split())
    return " ".join(reversed(text.split()))


def zero_width_bits(text: str, rng: random.Random) -> str:
    zero, one = rng.choice([("\u200b", "\u200c"), ("\u200c", "\u200d"), ("\u2062", "\u2064")])
    bits = "".join(f"{b:08b}" for b in text.encode())
    return "".join(zero if bit == "0" else one for bit in bits)


def tags(text: str, rng: random.Random) -> str:
    return "".join(chr(0xE0000 + ord(c)) for c in _plain(text) if 0x20 <= ord(c) < 0x7F)


def selectors(text: str, rng: random.Random) -> str:
    return "\U0001f642" + "".join(chr(0xFE00 + b) if b < 16 else chr(0xE0100 + b - 16) for b in text.encode())


def homoglyphs(text: str, rng: random.Random) -> str:
    table = rng.choice([_CYRILLIC, _GREEK, {**_CYRILLIC, **_GREEK}])
    return "".join(table[c] if c in table and rng.random() < 0.7 else c for c in text)


def styled(text: str, rng: random.Random) -> str:
    """Fullwidth, mathematical alphanumeric styles, circled, negative squared letters, small capitals."""
    style = rng.choice(["fullwidth", "bold", "script", "fraktur", "double", "mono", "circled", "squared", "small"])
    out = []
    for c in _plain(text):
        lower, upper = "a" <= c <= "z", "A" <= c <= "Z"
        if not (lower or upper):
            out.append(c)
            continue
        n = ord(c.lower()) - 97
        if style == "fullwidth":
            out.append(chr(ord(c) + 0xFEE0))
        elif style == "circled":
            out.append(chr((0x24D0 if lower else 0x24B6) + n))
        elif style == "squared":
            out.append(chr(0x1F170 + n))
        elif style == "small":
            out.append(_SMALL_CAPS[c.lower()])
        else:
            base = {"bold": 0x1D400, "script": 0x1D4D0, "fraktur": 0x1D56C, "double": 0x1D538, "mono": 0x1D670}[style]
            out.append(chr(base + n + (26 if lower else 0)))
    return "".join(out)


def pig_latin(text: str, rng: random.Random) -> str:
    out = []
    for word in _plain(text).split():
        letters = word.strip(".,'?!").lower()
        if not letters.isalpha():
            out.append(word)
            continue
        cut = next((i for i, c in enumerate(letters) if c in "aeiou"), 0)
        out.append(letters + "way" if cut == 0 else letters[cut:] + letters[:cut] + "ay")
    return " ".join(out)


def nested(text: str, rng: random.Random) -> str:
    inner, outer = rng.choice(
        [(rot13, b64), (b64, hexa), (b64, b64), (b64, url), (hexa, b64), (reversed_text, b64), (b64, b32)]
    )
    if inner is reversed_text:
        return outer(text[::-1], rng)
    first = inner(text, rng).replace("\n", "")
    return outer(first, rng).replace("\n", "") if outer is not b64 else base64.b64encode(first.encode()).decode()


ENCODERS: dict[str, tuple[tuple[str, ...], Encode]] = {
    "base64": (("base64", "Base64", "b64", "base-64"), b64),
    "base32": (("base32", "Base32", "base 32"), b32),
    "base85": (("base85", "Ascii85", "ASCII85"), b85),
    "hex": (("hex", "hexadecimal", "base16", "hex bytes"), hexa),
    "binary": (("binary", "8-bit binary", "ASCII binary"), binary),
    "decimal": (("decimal ASCII codes", "character codes", "ASCII numbers", "code points"), decimal),
    "octal": (("octal", "octal escapes"), octal),
    "url": (("URL encoding", "percent-encoding", "urlencoded text"), url),
    "html": (("HTML entities", "HTML character references"), html_entities),
    "unicode_escapes": (("unicode escapes", "\\u escapes", "JSON escapes"), unicode_escapes),
    "quoted_printable": (("quoted-printable", "QP encoding"), quoted_printable),
    "rot13": (("ROT13", "rot13", "rot-13"), rot13),
    "caesar": (("Caesar cipher", "a shift cipher", "Caesar code"), caesar),
    "atbash": (("Atbash", "the Atbash cipher", "a mirror alphabet"), atbash),
    "morse": (("Morse", "Morse code", "morse"), morse),
    "braille": (("braille", "Braille"), braille),
    "nato": (("the NATO alphabet", "NATO phonetic spelling", "radio alphabet"), nato),
    "leetspeak": (("leetspeak", "l33t", "1337 speak"), leet),
    "reversed": (("reversed text", "backwards writing", "mirror order"), reversed_text),
    "zero_width": (("invisible characters", "zero-width bits", "hidden bits"), zero_width_bits),
    "tags": (("tag characters", "invisible Unicode"), tags),
    "selectors": (("variation selectors", "emoji bytes"), selectors),
    "homoglyphs": (("look-alike letters", "homoglyphs"), homoglyphs),
    "styled": (("fancy letters", "styled Unicode", "fullwidth text"), styled),
    "pig_latin": (("Pig Latin", "pig latin"), pig_latin),
    "nested": (("a layered encoding", "double encoding", "nested encoding"), nested),
}
