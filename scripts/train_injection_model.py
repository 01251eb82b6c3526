"""Train the `injection` check's learned tier on tests/data/guardrails and write the shipped model.

    .venv/bin/python scripts/train_injection_model.py [--check] [--out DIR]

Reads every attack (``injection/*.jsonl``, label 1) and benign text (``benign/*.jsonl``, label 0),
computes the features of `policies.guardrails.checks.injection.learned.features` (the code the
gateway runs at inference), fits a logistic regression (scikit-learn, liblinear, L2, C = `C`,
classes weighted to balance, fixed seed: the same corpus gives the same bytes), quantises the weights
to int16 and writes ``weights.bin`` and ``model.json`` into the package (or ``--out``).

The thresholds in ``model.json`` are tuned here, on the *tuning* groups only (attack families and
benign categories whose name's CRC-32 is even; `tuning_group`), from held-out scores: each text is
scored by a model trained without its whole group (leave one family out), so the thresholds are
those that work on families the model never saw. The rule they feed (`InjectionCheck`): deny when
the heuristics deny, or when the probability reaches ``alone``, or when it reaches ``with_signal``
and a weak heuristic signal fired. Chosen: the pair with the highest held-out recall on the tuning
attack families whose false-positive rate on the tuning benign categories stays within
`FP_BUDGET`; among equals, the highest thresholds.

``--check`` retrains and compares with the shipped files instead of writing (exit 1 when they
differ: the corpus, the heuristics or the features changed since the model was trained).
scripts/guardrail_eval.py reports what the tier does on every family, held out the same way.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policies.guardrails.checks.injection.check import InjectionCheck, InjectionConfig
from policies.guardrails.checks.injection.learned import model as learned
from policies.guardrails.checks.injection.learned.features import CHAR_NGRAM, MAX_WORD, vector
from policies.guardrails.normalize import fold

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "guardrails"
PACKAGE = ROOT / "policies" / "guardrails" / "checks" / "injection" / "learned"
BITS = 16  # 65,536 buckets: 128 KiB of int16 before compression
C = 1.0  # inverse L2 strength
SEED = 0
FP_BUDGET = 0.02  # tuning: the share of held-out tuning benign texts the combined rule may deny (the goal)
GRID = [round(0.5 + step / 100, 2) for step in range(50)]  # 0.50 ... 0.99
_SUFFIX = re.compile(r"(_holdout\d*|_\d+)$")


@dataclass(frozen=True, slots=True)
class Example:
    text: str
    attack: bool
    group: str  # the attack family or benign category: the file's stem without `_2` / `_holdout…`
    split: str  # dev, holdout, holdout2 (tests/data/guardrails/README.md)


def family(stem: str) -> str:
    """``override_2`` and ``override_holdout`` add texts to the family ``override``."""
    return _SUFFIX.sub("", stem)


def tuning_group(group: str) -> bool:
    """Half the families and categories, by a stable hash of the name: thresholds are tuned on these."""
    return zlib.crc32(group.encode()) % 2 == 0


def corpus_files(corpus: Path = CORPUS) -> list[Path]:
    return sorted([*(corpus / "injection").glob("*.jsonl"), *(corpus / "benign").glob("*.jsonl")])


def examples(corpus: Path = CORPUS) -> list[Example]:
    out = []
    for path in corpus_files(corpus):
        with path.open(encoding="utf-8") as lines:
            rows = [json.loads(line) for line in lines if line.strip()]
        attack = path.parent.name == "injection"
        out += [Example(row["text"], attack, family(path.stem), row.get("split", "dev")) for row in rows]
    return out


def corpus_digest(corpus: Path = CORPUS) -> str:
    digest = hashlib.sha256()
    for path in corpus_files(corpus):
        digest.update(f"{path.parent.name}/{path.name}\n".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def matrix(texts: Sequence[str], bits: int = BITS) -> Any:
    """The texts' feature vectors as a scipy CSR matrix (rows in order)."""
    from scipy.sparse import csr_matrix

    data: list[float] = []
    columns: list[int] = []
    starts = [0]
    for text in texts:
        row = vector(fold(text).words, bits)
        for index in sorted(row):
            columns.append(index)
            data.append(row[index])
        starts.append(len(columns))
    return csr_matrix((data, columns, starts), shape=(len(texts), 1 << bits))


def fit(features: Any, labels: Sequence[bool], c: float = C) -> Any:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(
        C=c, solver="liblinear", dual=True, class_weight="balanced", random_state=SEED, max_iter=1000
    )
    return model.fit(features, [int(label) for label in labels])


def held_out(items: Sequence[Example], features: Any) -> list[float]:
    """Each text's probability under a model trained without its group (leave one family out)."""
    import numpy as np

    groups = np.array([item.group for item in items])
    labels = [item.attack for item in items]
    scores = np.zeros(len(items))
    for group in sorted(set(groups)):
        inside = groups == group
        rest = np.flatnonzero(~inside)
        model = fit(features[rest], [labels[i] for i in rest])
        scores[inside] = model.predict_proba(features[np.flatnonzero(inside)])[:, 1]
    return [float(score) for score in scores]


def heuristics(items: Sequence[Example]) -> list[tuple[bool, bool]]:
    """Each text's heuristic verdict (learned tier off): (denied, some signal fired)."""
    check = InjectionCheck(InjectionConfig(check="injection", action="deny", learned=False))
    out = []
    for item in items:
        finding = check.judge(check.spans(fold(item.text)))
        out.append((finding.hit, bool(finding.score)))
    return out


def combined(heuristic: tuple[bool, bool], probability: float, thresholds: learned.Thresholds) -> bool:
    """The rule `InjectionCheck` applies (its `judge`)."""
    denied, signal = heuristic
    return denied or probability >= thresholds.alone or (signal and probability >= thresholds.with_signal)


def tune(items: Sequence[Example], scores: Sequence[float], heuristic: Sequence[tuple[bool, bool]]) -> dict[str, Any]:
    """The thresholds, from the tuning groups' held-out scores (see the module's docstring)."""
    chosen = learned.Thresholds(GRID[-1], GRID[-1])
    best: tuple[float, ...] = ()
    tuning = [i for i, item in enumerate(items) if tuning_group(item.group)]
    attacks = [i for i in tuning if items[i].attack]
    benign = [i for i in tuning if not items[i].attack]
    for alone in GRID:
        for with_signal in (t for t in GRID if t <= alone):
            thresholds = learned.Thresholds(alone, with_signal)
            caught = sum(combined(heuristic[i], scores[i], thresholds) for i in attacks)
            denied = sum(combined(heuristic[i], scores[i], thresholds) for i in benign)
            if denied > FP_BUDGET * len(benign):
                continue
            rank = (caught, -denied, alone, with_signal)
            if rank > best:
                best, chosen = rank, thresholds
    caught, denied = best[0], -best[1]
    return {
        "alone": chosen.alone,
        "with_signal": chosen.with_signal,
        "tuned_on": sorted({items[i].group for i in tuning}),
        "tuning_recall": round(caught / len(attacks), 4),
        "tuning_heuristic_recall": round(sum(heuristic[i][0] for i in attacks) / len(attacks), 4),
        "tuning_false_positives": round(denied / len(benign), 4),
        "fp_budget": FP_BUDGET,
    }


def quantised(weights: Sequence[float]) -> tuple[bytes, float]:
    """int16 weights (little-endian, zlib level 9) and the scale that restores them."""
    import numpy as np

    largest = float(np.max(np.abs(weights))) or 1.0
    scale = largest / 32767
    packed = np.round(np.asarray(weights) / scale).astype("<i2").tobytes()
    return zlib.compress(packed, 9), scale


def pack(model: Any, thresholds: learned.Thresholds, **sections: Any) -> tuple[bytes, str]:
    """A fitted model's two files: ``weights.bin`` and ``model.json`` (with `sections` added)."""
    packed, scale = quantised(model.coef_[0])
    meta = {
        "format": learned.FORMAT,
        "features": {"hash": "crc32", "bits": BITS, "char_ngram": CHAR_NGRAM, "max_word": MAX_WORD},
        "bias": float(model.intercept_[0]),
        "scale": scale,
        "weights_sha256": hashlib.sha256(packed).hexdigest(),
        "thresholds": {"alone": thresholds.alone, "with_signal": thresholds.with_signal},
        **sections,
    }
    return packed, json.dumps(meta, indent=1, sort_keys=True) + "\n"


def build(corpus: Path = CORPUS) -> tuple[bytes, str]:
    """The shipped model's two files, trained on the whole corpus, thresholds tuned held out."""
    import sklearn

    items = examples(corpus)
    features = matrix([item.text for item in items])
    model = fit(features, [item.attack for item in items])
    tuned = tune(items, held_out(items, features), heuristics(items))
    thresholds = learned.Thresholds(tuned.pop("alone"), tuned.pop("with_signal"))
    recipe = f"C={C}, solver=liblinear, dual=True, class_weight=balanced, random_state={SEED}"
    training = {
        "corpus_sha256": corpus_digest(corpus),
        "attacks": sum(item.attack for item in items),
        "benign": sum(not item.attack for item in items),
        "model": f"LogisticRegression({recipe})",
        "scikit_learn": sklearn.__version__,
    }
    return pack(model, thresholds, tuning=tuned, training=training)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped files instead of writing")
    parser.add_argument("--out", type=Path, default=PACKAGE, help="folder for weights.bin and model.json")
    args = parser.parse_args()
    packed, meta = build()
    weights, info = args.out / learned.WEIGHTS_FILE, args.out / learned.META_FILE
    if args.check:
        same = weights.read_bytes() == packed and info.read_text(encoding="utf-8") == meta
        print("the shipped model is up to date" if same else "the shipped model differs from a retrain")
        sys.exit(0 if same else 1)
    weights.write_bytes(packed)
    info.write_text(meta, encoding="utf-8")
    print(f"wrote {weights} ({len(packed)} bytes) and {info}")
    print(meta)


if __name__ == "__main__":
    main()
