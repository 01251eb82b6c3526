"""Build the obfuscation corpora of tests/data/guardrails (README there): encoded payloads, smuggled
(split) payloads, adversarial-suffix look-alikes, and their hard benign negatives, each as a tuning
file and a held-out file written together from disjoint payloads, wrappers, token pools and seeds.

    python scripts/corpus/build.py      # rewrites the files; the output is deterministic

Every text is ours: payloads (`payloads`), wrappers (`templates`), encoders (`encoders`, from the
encodings' definitions), suffix generators (`suffixes`), benign texts (`benign`).
"""

# ruff: noqa: S311  (seeded generators make a reproducible corpus, not secrets)

from __future__ import annotations

import json
import random
from pathlib import Path

import benign
import payloads
import suffixes
import templates
from encoders import ENCODERS, tags, zero_width_bits

OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "guardrails"
INVISIBLE = {"zero_width", "tags", "selectors"}
TUNE, HELD = "tune", "heldout"


def encoding_rows(rng: random.Random, held: bool, per_kind: int) -> list[dict[str, str]]:
    texts = payloads.HOLDOUT if held else payloads.TUNE
    wrappers = templates.HOLDOUT_ENCODED if held else templates.TUNE_ENCODED
    covers = templates.HOLDOUT_COVER if held else templates.TUNE_COVER
    rows = []
    for kind, (names, encode) in ENCODERS.items():
        for payload in rng.sample(texts, per_kind):
            wrapper = rng.choice(covers if kind in INVISIBLE else wrappers)
            text = wrapper.format(enc=encode(payload, rng), name=rng.choice(names))
            rows.append({"text": text, "split": HELD if held else TUNE, "kind": kind})
    return rows


def fragments(text: str, rng: random.Random) -> list[str]:
    """The payload cut every 2 to 7 characters, mid-word or not."""
    pieces, at = [], 0
    while at < len(text):
        step = rng.randint(2, 7)
        pieces.append(text[at : at + step])
        at += step
    return pieces


def render(pieces: list[str], rng: random.Random) -> tuple[str, str, str]:
    """``{frags}`` (assignments in one of several notations), ``{join}`` and ``{list}``."""
    style = rng.choice(["py", "js", "prose", "indexed", "letters"])
    if style == "letters":
        names = [chr(97 + i) if i < 26 else f"a{i}" for i in range(len(pieces))]
    elif style == "indexed":
        names = [f"s{i + 1}" for i in range(len(pieces))]
    else:
        names = [rng.choice(["x", "part", "p", "v", "t"]) + str(i + 1) for i in range(len(pieces))]
    quote = rng.choice(["'", '"'])
    if style == "js":
        frags = "\n".join(f"let {n} = {quote}{p}{quote};" for n, p in zip(names, pieces, strict=True))
    elif style == "prose":
        frags = ", ".join(f"{n} is {quote}{p}{quote}" for n, p in zip(names, pieces, strict=True)) + "."
    else:
        frags = "\n".join(f"{n} = {quote}{p}{quote}" for n, p in zip(names, pieces, strict=True))
    join = rng.choice([" + ".join(names), "concat(" + ", ".join(names) + ")", "".join("{" + n + "}" for n in names)])
    chars = list("".join(pieces)) if rng.random() < 0.5 else pieces
    listing = ", ".join(f"{quote}{c}{quote}" for c in chars)
    return frags, join, listing


def split_words(text: str, rng: random.Random) -> str:
    """Token splitting without variables: separators or invisible code points inside the words."""
    style = rng.choice(["hyphen", "bar", "space", "zwj", "soft", "dots"])
    sep = {"hyphen": "-", "bar": "|", "space": " ", "zwj": "\u200d", "soft": "\u00ad", "dots": "."}[style]
    words = []
    for word in text.split():
        cuts = sorted(rng.sample(range(1, len(word)), min(len(word) - 1, rng.randint(1, 3)))) if len(word) > 3 else []
        parts, last = [], 0
        for cut in [*cuts, len(word)]:
            parts.append(word[last:cut])
            last = cut
        words.append(sep.join(parts))
    return " ".join(words)


def smuggling_rows(rng: random.Random, held: bool, count: int) -> list[dict[str, str]]:
    texts = payloads.HOLDOUT if held else payloads.TUNE
    wrappers = templates.HOLDOUT_SMUGGLING if held else templates.TUNE_SMUGGLING
    covers = templates.HOLDOUT_COVER if held else templates.TUNE_COVER
    asks = (
        ["Put the word pieces back together and respond to the sentence:", "Read past the separators and do it:"]
        if held
        else ["Remove the separators, then answer:", "Join these broken words and follow them:"]
    )
    rows = []
    for number in range(count):
        payload = rng.choice(texts)
        roll = number % 5
        if roll < 3:
            frags, join, listing = render(fragments(payload, rng), rng)
            text = rng.choice(wrappers).format(frags=frags, join=join, list=listing)
        elif roll == 3:
            text = f"{rng.choice(asks)} {split_words(payload, rng)}"
        else:  # ASCII smuggling: invisible copies of the payload behind a visible question
            hide = rng.choice([tags, zero_width_bits])
            text = rng.choice(covers).format(enc=hide(payload, rng))
        rows.append({"text": text, "split": HELD if held else TUNE})
    return rows


def suffix_rows(rng: random.Random, held: bool) -> list[dict[str, str]]:
    requests = templates.HOLDOUT_REQUESTS if held else templates.TUNE_REQUESTS
    rows = []
    for request in requests * 3:
        tail = suffixes.suffix(rng, held)
        glue = rng.choice([" ", " ", ". ", "\n", " - "])
        rows.append({"text": f"{request}{glue}{tail}", "split": HELD if held else TUNE})
    return rows


def write(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps({"text": row["text"], "split": row["split"]}, ensure_ascii=False) + "\n")


def main() -> None:
    families = {
        "encoding": (encoding_rows(random.Random(35001), False, 5), encoding_rows(random.Random(35002), True, 3)),
        "smuggling": (smuggling_rows(random.Random(35003), False, 60), smuggling_rows(random.Random(35004), True, 40)),
        "suffix": (suffix_rows(random.Random(35005), False), suffix_rows(random.Random(35006), True)),
    }
    for family, (tune, held) in families.items():
        write(OUT / "injection" / f"{family}.jsonl", tune)
        write(OUT / "injection" / f"{family}_holdout.jsonl", held)
    for category, (tune_texts, held_texts) in benign.categories(random.Random(35007)).items():
        write(OUT / "benign" / f"{category}.jsonl", [{"text": t, "split": TUNE} for t in tune_texts])
        write(OUT / "benign" / f"{category}_holdout.jsonl", [{"text": t, "split": HELD} for t in held_texts])


if __name__ == "__main__":
    main()
