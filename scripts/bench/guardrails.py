"""Input guardrail overhead on a 2 KB prompt: all default checks together, per prompt, in microseconds.

    .venv/bin/python scripts/bench/guardrails.py [--rounds 20000]

"Default checks" are the ones a policy gets from the DESIGN example plus the other checks that need
no list of their own: pii (all entities, redact), regex (``(?i)ignore previous``, deny), injection
(built-in list, deny), length (chars + max_tokens cap). Reported per call: the best and the median
batch (the best is the figure on an idle core; the median shows the noise of a shared machine), for
a clean English prompt, the same prompt with PII to redact, a non-ASCII (accented, fullwidth)
prompt that takes the run-by-run folding path, and Chinese and Korean prompts with an e-mail address
to redact (folded whole; Hangul decomposes into several jamo, so its redaction maps offsets back).
A reference line (``sum(range(1000))``, ~8 us on a current desktop core) lets readers scale the
figures to their machine. ``InputGuard.check`` is driven without an event loop (it awaits nothing
when no remote check is configured), which is also how cheap it is inside one.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Coroutine
from typing import Any

from pydantic import TypeAdapter

from policies.guardrails import InputChecks, InputGuard, InputOutcome, RequestFacts

DEFAULT_CHECKS: list[dict[str, Any]] = [
    {"check": "pii", "action": "redact"},
    {"check": "regex", "pattern": "(?i)ignore previous", "action": "deny"},
    {"check": "injection", "action": "deny"},
    {"check": "length", "max_chars": 32000, "max_completion_tokens": 4096, "action": "deny"},
]
PARAGRAPH = (
    "Summarise the quarterly report below for the board in five bullet points. The company grew revenue "
    "by 12 percent in Q3 2024, driven by the new subscription tier launched in March, while operating costs "
    "rose 4 percent because of hiring in the support team. Churn fell from 3.1 to 2.4 percent, and the sales "
    "pipeline for Q4 is the strongest in two years, with 41 enterprise deals in late stages. Risks: supplier "
    "delays in the hardware line and a pending regulatory review in the EU market. "
)
PII = "Contact Jane at jane.doe@example.com or +1 (415) 555-0100 about card 4111 1111 1111 1111. "
FULLWIDTH = "".join(chr(ord(c) + 0xFEE0) for c in "fullwidth")
ACCENTED = f"Résumé du rapport trimestriel: le chiffre d'affaires a progressé de 12 % — {FULLWIDTH} text. "
CHINESE = (
    "请把下面的季度报告总结成五个要点\uff0c供董事会参考。"
    "公司第三季度收入增长百分之十二\uff0c主要来自三月推出的新订阅层级。"
)
KOREAN = (
    "아래 분기 보고서를 이사회를 위해 다섯 가지 요점으로 요약해 주세요. 회사의 3분기 매출은 12퍼센트 증가했습니다. "
)


def two_kb(seed: str, filler: str = PARAGRAPH) -> str:
    text = seed
    while len(text) < 2048:
        text += filler
    return text[:2048]


def run(coro: Coroutine[Any, Any, InputOutcome]) -> InputOutcome:
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    raise RuntimeError("the input guard awaited something: a remote check is configured")


def measure(guard: InputGuard, prompt: str, rounds: int) -> tuple[float, float]:
    """Best and median microseconds per call over 20 batches."""
    facts = RequestFacts(max_tokens=256)
    batches = []
    per_batch = max(1, rounds // 20)
    for _ in range(20):
        start = time.perf_counter_ns()
        for _ in range(per_batch):
            run(guard.check(prompt, facts))
        batches.append((time.perf_counter_ns() - start) / per_batch / 1000)
    return min(batches), statistics.median(batches)


def reference_us() -> float:
    start = time.perf_counter_ns()
    for _ in range(2000):
        sum(range(1000))
    return (time.perf_counter_ns() - start) / 2000 / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20000)
    rounds = parser.parse_args().rounds
    guard = InputGuard(TypeAdapter(InputChecks).validate_python(DEFAULT_CHECKS))
    prompts = {
        "clean English": two_kb(""),
        "with PII to redact": two_kb(PII),
        "non-ASCII": two_kb("", ACCENTED + PARAGRAPH),
        "Chinese + e-mail": two_kb("联系人\uff1ajane.doe@example.com。", CHINESE),
        "Korean + e-mail": two_kb("메일: jane@example.com ", KOREAN),
    }
    print(f"reference sum(range(1000)): {reference_us():.1f} us")
    for name, prompt in prompts.items():
        outcome = run(guard.check(prompt, RequestFacts(max_tokens=256)))
        verdicts = ", ".join(f"{v.check}={v.verdict}" for v in outcome.verdicts)
        best, median = measure(guard, prompt, rounds)
        print(f"{name:20s} {len(prompt)} chars: best {best:6.1f} us, median {median:6.1f} us  ({verdicts})")


if __name__ == "__main__":
    main()
