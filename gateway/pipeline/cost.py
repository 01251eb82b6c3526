"""What an answer cost, from the usage its upstream reported and its deployment's `price`.

Costs are whole nano-dollars (10^-9 USD), rounded once per request: the `x-gateway-cost-usd` header,
the access log, the metric and the spend counters all add the same integers, so a period's spend is
exactly the sum of the answers' headers, on any number of workers and replicas.

Prices are USD per million tokens: prompt, completion, and (when configured) prompt tokens the
upstream read from its own prompt cache (`usage.prompt_tokens_details.cached_tokens`, OpenAI's
field) or wrote to it (`cache_write_tokens`: what an Anthropic deployment reports as
`cache_creation_input_tokens`), which are billed at their own prices and not again as prompt
tokens. A cache hit makes no upstream call: it costs 0, and what it saved is what the stored
answer's usage would have cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policies.limits.specs import Price

NANO = 1_000_000_000
_PER_MILLION_TO_NANO = NANO / 1_000_000  # (tokens x USD per 1M tokens) x this = nano-dollars


@dataclass(frozen=True, slots=True)
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of the prompt tokens, those read from the upstream's prompt cache
    cache_write_tokens: int = 0  # of the prompt tokens, those written to it (Anthropic's cache creation)

    @classmethod
    def of(cls, usage: Any) -> TokenUsage | None:
        """From an OpenAI `usage` object (a body's or a stream's last chunk); None when it is not one."""
        if not isinstance(usage, Mapping):
            return None
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, Mapping) else 0
        written = details.get("cache_write_tokens") if isinstance(details, Mapping) else 0
        prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
        return cls(prompt, completion, _count(cached), _count(written))


def cost_nano(price: Price, usage: TokenUsage) -> int:
    """The cost of `usage` at `price`, in whole nano-dollars."""
    total = price.cost_per_1m(
        usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens, usage.cache_write_tokens
    )
    return round(total * _PER_MILLION_TO_NANO)


def usd(nano: int) -> str:
    """Nano-dollars as a decimal USD string, without float noise: 1234 -> "0.000001234"."""
    whole, fraction = divmod(nano, NANO)
    return f"{whole}.{fraction:09d}".rstrip("0").rstrip(".") if fraction else str(whole)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
