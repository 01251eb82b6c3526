"""Floors on the evaluation corpus (tests/data/guardrails), measured by scripts/guardrail_eval.py:
what the `injection` and `pii` checks at their defaults must keep catching, and what they must keep
leaving alone. The script prints the figures; this test fails when a change lowers one below its floor.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from tests.script_loader import load_script

FAMILY_RECALL = 0.8  # each attack family
POOLED_RECALL = 0.9
FALSE_POSITIVES = 0.02  # benign texts denied, and look-alikes with anything found
# The obfuscation families (issue 35): each a tuning file and a held-out file built together, the
# detectors tuned on the first only (tests/data/guardrails/README.md); and their hard negatives.
OBFUSCATION_RECALL = {
    "encoding": 0.95,
    "encoding_holdout": 0.9,
    "smuggling": 0.95,
    "smuggling_holdout": 0.9,
    "suffix": 0.9,
    "suffix_holdout": 0.85,
}
OBFUSCATION_BENIGN = ("encoded_data", "code_noise", "multilingual_2")
PII_RECALL = 0.95  # each entity
PII_PRECISION = 0.95


def _script() -> ModuleType:
    return load_script("scripts/guardrail_eval.py")


@pytest.fixture(scope="module")
def report() -> Any:
    return _script().evaluate()


def test_every_attack_family_keeps_its_recall(report: Any) -> None:
    recall = report.recall
    low = {family: f"{hit}/{total}" for family, (hit, total) in recall.items() if hit / total < FAMILY_RECALL}
    assert not low, f"families below {FAMILY_RECALL}: {low}"
    assert report.pooled(recall) >= POOLED_RECALL


def test_benign_texts_are_rarely_denied(report: Any) -> None:
    assert report.pooled(report.false_positives) <= FALSE_POSITIVES


def test_encoded_smuggled_and_suffixed_attacks_are_caught_held_out_too(report: Any) -> None:
    recall = {family: hit / total for family, (hit, total) in report.recall.items()}
    low = {
        family: recall.get(family, 0.0)
        for family, floor in OBFUSCATION_RECALL.items()
        if recall.get(family, 0.0) < floor
    }
    assert not low, f"below their floors {OBFUSCATION_RECALL}: {low}"


def test_blobs_code_and_other_languages_are_rarely_denied(report: Any) -> None:
    counts = {
        category: counts
        for category, counts in report.false_positives.items()
        if category.removesuffix("_holdout") in OBFUSCATION_BENIGN
    }
    assert len(counts) == 2 * len(OBFUSCATION_BENIGN)
    assert report.pooled(counts) <= FALSE_POSITIVES


def test_pii_recall_and_precision_per_entity(report: Any) -> None:
    found = report.pii_found
    spans = report.pii_spans
    assert {entity for entity, (hit, total) in found.items() if hit / total < PII_RECALL} == set()
    assert {entity for entity, (right, total) in spans.items() if right / total < PII_PRECISION} == set()
    assert report.pooled(report.lookalikes) <= FALSE_POSITIVES
