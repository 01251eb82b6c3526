"""The grounding check: relevancy and support against the request's context, measured on a labelled set."""

from __future__ import annotations

import json
from pathlib import Path

from policies.guardrails import RequestFacts
from tests.support.guardrail_helpers import output_guard

SET = Path(__file__).resolve().parents[2] / "data" / "grounding_set.json"
PRECISION_FLOOR = 0.85
RECALL_FLOOR = 0.85


async def test_grounding_set_precision_and_recall() -> None:
    """Positive class: an ungrounded answer (hallucinated or off-topic) that the check flags."""
    examples = json.loads(SET.read_text())
    guard = output_guard({"check": "grounded", "action": "flag"})
    tp = fp = fn = 0
    for example in examples:
        facts = RequestFacts(prompts=(example["prompt"],), context=example["context"])
        flagged = (await guard.check([example["answer"]], facts)).verdicts[0].verdict == "flag"
        ungrounded = not example["grounded"]
        tp += flagged and ungrounded
        fp += flagged and not ungrounded
        fn += ungrounded and not flagged
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    counts = f"tp={tp} fp={fp} fn={fn}"
    print(f"\ngrounding set: {len(examples)} answers, precision {precision:.3f}, recall {recall:.3f} ({counts})")
    assert precision >= PRECISION_FLOOR
    assert recall >= RECALL_FLOOR


async def test_hallucinated_number_is_flagged_and_supported_answer_passes() -> None:
    context = "The bridge is 1,200 metres long and opened in 1998."
    guard = output_guard({"check": "grounded", "action": "deny"})
    facts = RequestFacts(prompts=("How long is the bridge?",), context=context)
    outcome = await guard.check(["The bridge is 1,200 metres long.", "The bridge is 2,400 metres long."], facts)
    assert outcome.choices[0].denied is None
    assert outcome.verdicts[0].score == 1.0
    denied = outcome.choices[1].denied
    assert denied is not None
    assert denied.labels == ("support",)


async def test_without_context_only_relevancy_is_judged() -> None:
    guard = output_guard({"check": "grounded", "action": "flag"})
    facts = RequestFacts(prompts=("What is the capital of France?",))
    outcome = await guard.check(["Paris is the capital of France.", "I like turtles and pizza."], facts)
    assert [v.verdict for v in outcome.verdicts] == ["pass", "flag"]
    assert outcome.verdicts[0].reason == "no context given: relevancy only"


async def test_each_choice_is_judged_against_its_own_prompt() -> None:
    guard = output_guard({"check": "grounded", "action": "flag"})
    facts = RequestFacts(prompts=("How much do cats sleep?", "What do rockets burn?"), n=1)
    outcome = await guard.check(["Cats sleep a lot.", "Rockets burn fuel."], facts)
    assert [v.verdict for v in outcome.verdicts] == ["pass", "pass"]
    swapped = await guard.check(["Rockets burn fuel.", "Cats sleep a lot."], facts)
    assert [v.verdict for v in swapped.verdicts] == ["flag", "flag"]
