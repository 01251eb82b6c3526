"""Adversarial-suffix look-alikes, generated with a seeded random generator: what an optimised suffix
(greedy coordinate gradient and its successors) looks like to a reader, a run of tokenizer pieces,
words, punctuation clusters and markup glued together without grammar. No suffix is taken from a
paper or a tool: each is drawn here, from token pools written for this corpus, `TUNE_POOL` for the
tuning part and `HOLDOUT_POOL` (other pieces, other proportions) for the held-out part.
"""

from __future__ import annotations

import random
import string


def _tokens(text: str) -> list[str]:
    return text.split()


TUNE_POOL = {
    "pieces": _tokens(
        "ing ation ically ously ment ness ward wise ify ize lex tor ual ette stra pher cade vis quot mente "
        "ieren ung chen isch ida ção ẩ ости ния Inst Sure Here begin tutorial manual Sentence Pro lijk"
    ),
    "words": _tokens(
        "describing similarly now write opposite giving please revert with two one sure here tutorial "
        "manual sentence format answer clause step instead kindly reverse follow title capital correct "
        "only begin paragraph hint seems question table Mediabestanden Unterscheidung sobre comme cuando"
    ),
    "punct": [
        "\\",
        "](",
        "**",
        "!--",
        "?",
        "}{",
        "=>",
        "<%",
        ">>",
        "\\\\",
        "({",
        "]);",
        '"\\',
        "'))",
        "$(",
        "@{",
        "::",
        "+",
        "-(",
        "};",
        "#[",
        "|",
        ";)",
        "--",
        "}\\",
        "^{",
        "~/",
        "`);",
        ".*",
        "%)",
        '["',
        "='",
    ],
    "markup": ["\\n", "\\u", "&nbsp", "<br>", "\\\\(", "$$", "\\({\\", "##", "**[", "[/"],
}
HOLDOUT_POOL = {
    "pieces": _tokens(
        "amento ously izing ither ocker nell frak ulia vu gz tk zw ij kt ett ansa orum ivo wanie ться ção "
        "Cart Wer Gru Hel Ok Yes Step Surely Absolutely xyz qui"
    ),
    "words": _tokens(
        "respond certainly manner style fashion reply tell let start output sequence detail playing writing "
        "humor Dutch poem Ready therefore alright okay grant steps teacher anyway Bitte vamos allora daher "
        "hier alors"
    ),
    "punct": [
        "]{",
        "}(",
        '\\"',
        ")--",
        "*)",
        "?>",
        "!!",
        "[[",
        "]]",
        "(<",
        "~~",
        '="',
        "`,",
        "|)",
        "\\(",
        "^^",
        "$\\",
        "#{",
        "@(",
        "<-",
        ";;",
        "/*",
        "*/",
        "'[",
    ],
    "markup": ["\\r", "</s>", "<unk>", "\\t", "{%", "%}", "'''", "```", "=~"],
}


def gcg_like(rng: random.Random, pool: dict[str, list[str]], tokens: tuple[int, int]) -> str:
    """Tokens drawn from the pool's kinds, glued (no space) or spaced at random, case flipped at random."""
    out: list[str] = []
    weights = {"pieces": 3, "words": 4, "punct": 4, "markup": 1}
    kinds = list(weights)
    for _ in range(rng.randint(*tokens)):
        kind = rng.choices(kinds, [weights[k] for k in kinds])[0]
        token = rng.choice(pool[kind])
        if kind in ("words", "pieces") and rng.random() < 0.25:
            token = token.capitalize() if rng.random() < 0.7 else token.upper()
        out.append(token if rng.random() < 0.45 or not out else " " + token)
    return "".join(out).strip()


def random_printable(rng: random.Random, length: tuple[int, int]) -> str:
    """Uniform printable characters with a few spaces: the cheapest random search's starting point."""
    alphabet = string.ascii_letters + string.digits + string.punctuation
    chars = [rng.choice(alphabet) if rng.random() > 0.12 else " " for _ in range(rng.randint(*length))]
    return "".join(chars).strip()


def word_salad(rng: random.Random, pool: dict[str, list[str]], tokens: tuple[int, int]) -> str:
    """Mostly words and pieces, little punctuation: the harder, readable-looking end of the family."""
    out = []
    for _ in range(rng.randint(*tokens)):
        token = rng.choice(pool["words"] + pool["pieces"])
        if rng.random() < 0.3:
            token += rng.choice(pool["punct"])
        if rng.random() < 0.2:
            token = token[0].upper() + token[1:]
        out.append(token)
    return " ".join(out)


def suffix(rng: random.Random, holdout: bool) -> str:
    pool = HOLDOUT_POOL if holdout else TUNE_POOL
    roll = rng.random()
    if roll < 0.6:
        return gcg_like(rng, pool, (14, 30) if holdout else (12, 26))
    if roll < 0.8:
        return random_printable(rng, (40, 90) if holdout else (30, 80))
    return word_salad(rng, pool, (12, 22))
