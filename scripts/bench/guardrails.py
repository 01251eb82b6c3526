"""What the input guardrails cost, against issue 35's latency goals (not run in CI; figures in BENCHMARKS.md).

    .venv/bin/python scripts/bench/guardrails.py [goals] [--calls 3] [--requests 100] [--rounds 10]
        [--only in-process|gateway] [--upstream URL]
    .venv/bin/python scripts/bench/guardrails.py checks [--rounds 20000]

goals (the default) measures both goals and prints PASS or FAIL for each:
  in process  `injection` (deny) + `pii` (redact), `InputGuard.check` driven without an event loop,
              on every text of the evaluation corpus (tests/data/guardrails/) padded to 2 KB with
              business prose: the benign texts ("clean"), the PII sentences and the attacks. Each
              text is checked `--calls` times; its cost is the least of those calls (what it takes
              on a core of its own: the pauses other processes cause on a shared machine are not the
              check's), and the figure is the 95th percentile over the texts; the p95 of each
              text's median and of every call are shown beside it. Goal: ≤ 1 ms for each set.
  gateway     one `gateway serve` process (one worker, an API key, the JSON access log written to a
              file, metrics on) with two deployments on the same upstream, `plain` and `guarded`
              (a policy with `injection` deny + `pii` redact), sent chat completions one at a time
              over loopback: a system message and a distinct 2 KB user message per request (clean,
              with PII, attacks: padded corpus texts, as above, never sent before: the gateway
              remembers what its pattern checks made of a text per caller), and conversations of
              six such clean turns, each turn a request that sends the earlier ones again (shown,
              not judged). Runs of `--requests` requests alternate off/on (ABBA order, `--rounds`
              rounds; off and on get the same texts); each run's median latency and the gateway's
              CPU per request (all its threads, from /proc); the figure is the median over rounds of
              the on - off difference of the same round (beside it, the same of each run's 95th
              percentile). Goal: ≤ +150 µs for single-turn clean and PII prompts (attacks are
              denied with a 400 before any upstream call: shown, not judged). The upstream is a
              canned-answer stub in a process of its own, or `--upstream URL` (an OpenAI-compatible
              base URL such as the shared harness's nginx mock, http://127.0.0.1:9100/v1).
checks measures the default checks together (pii, regex, injection, length) on five 2 KB prompts
(clean English, with PII, non-ASCII, Chinese and Korean with an e-mail): the best and the median of
20 batches, the figures of BENCHMARKS.md's issue 6 section.

A reference line (``sum(range(1000))``, 8-9 µs on an idle core of the project's machine) lets
readers scale the figures to theirs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Coroutine, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from pydantic import TypeAdapter

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this tree's gateway, whichever one the virtual environment installed
sys.path.insert(0, str(Path(__file__).resolve().parent))

from request_log import canned_stub, free_port, process, until_listening  # noqa: E402

from policies.guardrails import InputChecks, InputGuard, InputOutcome, RequestFacts  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "guardrails"
GOAL_IN_PROCESS_US = 1000.0  # issue 35: injection + PII, p95 per 2 KB prompt
GOAL_GATEWAY_US = 150.0  # issue 35: the gateway's median overhead with both on
TURNS = 6
CHAT = f"chat, {TURNS} turns"  # a set of its own: conversations whose every turn re-sends the earlier ones
GUARDED: list[dict[str, Any]] = [{"check": "injection", "action": "deny"}, {"check": "pii", "action": "redact"}]
KEY = "bench-guardrails-key-0123456789abcdef"
SYSTEM = "You are a helpful assistant for the finance team. Answer briefly and cite the figures you use."
# Business prose that pads each corpus text to 2 KB, its sentences in an order of its own per text.
FILLER = [
    "Summarise the quarterly report below for the board in five bullet points.",
    "The company grew revenue by 12 percent in Q3 2024, driven by the new subscription tier launched in March.",
    "Operating costs rose 4 percent because of hiring in the support team.",
    "Churn fell from 3.1 to 2.4 percent, and the pipeline for Q4 is the strongest in two years.",
    "There are 41 enterprise deals in late stages, most of them renewals with a larger scope.",
    "Risks: supplier delays in the hardware line and a pending regulatory review in the EU market.",
    "Marketing spend was flat, while the partner channel brought a fifth of new customers.",
    "The board asked for a comparison with the same quarter last year and a view on hiring.",
    "Gross margin improved slightly as hosting contracts were renegotiated in the spring.",
    "Please keep the tone neutral and flag anything that needs a decision before the next meeting.",
]
ANSWER = (
    b'{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"Revenue grew 12 percent; churn fell to 2.4 percent."},'
    b'"finish_reason":"stop"}],"usage":{"prompt_tokens":512,"completion_tokens":12,"total_tokens":524}}'
)
STUB = canned_stub(ANSWER)  # the upstream, in a process of its own


# -- prompts ---------------------------------------------------------------------------------------


def corpus(folder: str, pattern: str = "*.jsonl") -> list[str]:
    texts = []
    for path in sorted((CORPUS / folder).glob(pattern)):
        with path.open(encoding="utf-8") as lines:
            texts += [json.loads(line)["text"] for line in lines if line.strip()]
    return texts


def padded(text: str, seed: int) -> str:
    """`text` and then filler sentences in an order of this seed's, cut at 2,048 characters."""
    order = random.Random(seed).sample(FILLER, len(FILLER))  # noqa: S311 - test data
    at = 0
    while len(text) < 2048:
        text += " " + order[at % len(order)]
        at += 1
    return text[:2048]


def corpus_sets() -> dict[str, list[str]]:
    """The corpus's benign texts ("clean"), PII sentences and attacks."""
    return {
        "clean": corpus("benign"),
        "with PII": corpus("pii", "positives*.jsonl"),
        "attacks": corpus("injection"),
    }


def prompt_sets() -> dict[str, list[str]]:
    """Distinct 2 KB texts: the corpus's texts, each padded."""
    return {name: [padded(text, seed) for seed, text in enumerate(texts)] for name, texts in corpus_sets().items()}


class FreshPrompts:
    """2 KB texts no earlier request held (the gateway remembers what it judged of a text per caller):
    each set's corpus texts in turn, each padded in an order of its own."""

    def __init__(self) -> None:
        self.sets = corpus_sets()
        self.taken = dict.fromkeys(self.sets, 0)
        self.seed = 1_000_000  # past the seeds of `prompt_sets`

    def take(self, name: str) -> str:
        texts = self.sets[name]
        self.taken[name] += 1
        self.seed += 1
        return padded(texts[self.taken[name] % len(texts)], self.seed)


def guard_of(checks: list[dict[str, Any]]) -> InputGuard:
    return InputGuard(TypeAdapter(InputChecks).validate_python(checks))


def run(coro: Coroutine[Any, Any, InputOutcome]) -> InputOutcome:
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    raise RuntimeError("the input guard awaited something: a remote check is configured")


def reference_us() -> float:
    return min(timeit.repeat("sum(range(1000))", number=1000, repeat=5)) * 1000


def machine() -> str:
    """How busy the machine is: the reference loop and the load average (the figures scale with both)."""
    load = os.getloadavg()[0]
    return f"reference sum(range(1000)): {reference_us():.1f} µs; load average {load:.1f} on {os.cpu_count()} CPUs"


def quantile(values: Sequence[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


# -- goal 1: in process ----------------------------------------------------------------------------


def in_process(calls: int, sets: dict[str, list[str]]) -> bool:
    guard = guard_of(GUARDED)
    facts = RequestFacts(max_tokens=256)
    print(
        f"in process: injection + pii, InputGuard.check per 2 KB prompt (µs over the texts of each text's least "
        f"of {calls} calls: its cost on a core of its own; beside it the p95 of each text's median, and of every call)"
    )
    print(f"  {machine()}")
    passed = True
    for name, texts in sets.items():
        for text in texts[:100]:  # warm up: caches, first-use compilations
            run(guard.check(text, facts))
        least, medians, singles, denied = [], [], [], 0
        for text in texts:
            times = []
            for _ in range(calls):
                start = time.perf_counter_ns()
                outcome = run(guard.check(text, facts))
                times.append((time.perf_counter_ns() - start) / 1000)
            denied += outcome.denied is not None
            least.append(min(times))
            medians.append(statistics.median(times))
            singles += times
        p95 = quantile(least, 95)
        ok = p95 <= GOAL_IN_PROCESS_US
        passed &= ok
        print(
            f"  {name:9s} {len(texts):5d} texts ({denied:4d} denied): p50 {quantile(least, 50):5.0f}  p95 {p95:5.0f}  "
            f"p99 {quantile(least, 99):5.0f}  max {max(least):5.0f}  (p95 of medians {quantile(medians, 95):5.0f}, "
            f"of every call {quantile(singles, 95):5.0f})  {'PASS' if ok else 'FAIL'}"
        )
    print(f"  goal: p95 ≤ {GOAL_IN_PROCESS_US:.0f} µs per 2 KB prompt: {'PASS' if passed else 'FAIL'}")
    return passed


# -- goal 2: through a gateway process -------------------------------------------------------------


def gateway_config(folder: Path, port: int, upstream: str) -> Path:
    provider = {"type": "openai", "base_url": upstream}
    config = {
        "server": {"host": "127.0.0.1", "port": port, "workers": 1},
        "keys": [{"name": "bench", "key": "${BENCH_GUARDRAILS_KEY}"}],
        "policies": {"guarded": {"input": GUARDED}},
        "deployments": [
            {"name": "plain", "provider": provider},
            {"name": "guarded", "provider": provider, "policies": ["guarded"]},
        ],
        "observability": {"access_log": {"path": str(folder / "access.log")}},
    }
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def cpu_us(pid: int) -> float:
    """The process's CPU time so far, all its threads (the access log's writer too), in µs: the
    scheduler's nanoseconds (/proc/PID/task/*/schedstat), not clock ticks of 10 ms."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
            continue
    return total / 1000


def chat_body(model: str, asked: Sequence[str]) -> bytes:
    """A chat: the system message, then each of `asked` as a user turn, an answer after each but the last."""
    messages = [{"role": "system", "content": SYSTEM}]
    for turn in asked:
        messages += [{"role": "user", "content": turn}, {"role": "assistant", "content": "Noted; see above."}]
    return json.dumps({"model": model, "messages": messages[:-1], "max_tokens": 64}).encode()


def run_prompts(prompts: FreshPrompts, name: str, count: int) -> list[list[str]]:
    """`count` requests' user turns: one fresh text each, or for CHAT conversations of TURNS clean
    texts, each turn a request that sends the turns before it again."""
    if name != CHAT:
        return [[prompts.take(name)] for _ in range(count)]
    out: list[list[str]] = []
    while len(out) < count:
        turns: list[str] = []
        for _ in range(TURNS):
            turns.append(prompts.take("clean"))
            out.append(list(turns))
    return out[:count]


async def sequential(http: aiohttp.ClientSession, url: str, bodies: Sequence[bytes]) -> tuple[list[float], set[int]]:
    """Each body's latency (µs), one request at a time, and the statuses answered."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
    latencies, statuses = [], set()
    for body in bodies:
        start = time.perf_counter_ns()
        async with http.post(url, data=body, headers=headers) as answer:
            await answer.read()
        latencies.append((time.perf_counter_ns() - start) / 1000)
        statuses.add(answer.status)
    return latencies, statuses


async def through_gateway(args: argparse.Namespace) -> bool:
    with tempfile.TemporaryDirectory() as folder:
        stub_port = free_port()
        upstream = args.upstream or f"http://127.0.0.1:{stub_port}/v1"
        stub = process([sys.executable, "-c", STUB, str(stub_port)]) if not args.upstream else nullcontext()
        async with stub:
            if not args.upstream:
                await until_listening(stub_port)
            port = free_port()
            config = gateway_config(Path(folder), port, upstream)
            command = [sys.executable, "-m", "gateway", "serve", "-c", str(config), "--log-level", "WARNING"]
            env = {"BENCH_GUARDRAILS_KEY": KEY, "PYTHONPATH": str(ROOT)}
            async with process(command, env) as gateway:
                await until_listening(port)
                return await _alternate(args, f"http://127.0.0.1:{port}/v1/chat/completions", gateway.pid)


async def _alternate(args: argparse.Namespace, url: str, pid: int) -> bool:
    # (prompts, off|on): [(median µs, CPU µs/request, p95 µs)]
    runs: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    statuses: dict[tuple[str, str], set[int]] = {}
    prompts = FreshPrompts()
    names = [*prompts.sets, CHAT]
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=connector) as http:
        for name in names:  # warm up both deployments
            for model in ("plain", "guarded"):
                await sequential(http, url, [chat_body(model, asked) for asked in run_prompts(prompts, name, 60)])
        for round_ in range(args.rounds):
            order = ("off", "on") if round_ % 2 == 0 else ("on", "off")
            for name in names:
                picked = run_prompts(prompts, name, args.requests)  # the same for off and on, new to both
                for mode in order:
                    bodies = [chat_body("guarded" if mode == "on" else "plain", asked) for asked in picked]
                    before = cpu_us(pid)
                    latencies, seen = await sequential(http, url, bodies)
                    cpu = (cpu_us(pid) - before) / len(bodies)
                    p95 = quantile(latencies, 95)
                    runs.setdefault((name, mode), []).append((statistics.median(latencies), cpu, p95))
                    statuses.setdefault((name, mode), set()).update(seen)
    print(
        f"gateway: chat completions one at a time, a system message and a 2 KB user message no request sent before "
        f"({CHAT}: {TURNS} such turns, each request sending the earlier ones again); {args.rounds} rounds of "
        f"{args.requests} requests per set and mode (off/on alternating)"
    )
    print(f"  {machine()}")
    print(
        "  prompts    median latency µs: off     on    on-off  on/off  |  gateway CPU µs/request: off    on  on-off"
        "  |  p95 on-off"
    )
    passed = True
    for name in names:
        off, on = runs[(name, "off")], runs[(name, "on")]
        lat_off, lat_on = statistics.median(r[0] for r in off), statistics.median(r[0] for r in on)
        delta = statistics.median(b[0] - a[0] for a, b in zip(off, on, strict=True))
        ratio = statistics.median(b[0] / a[0] for a, b in zip(off, on, strict=True))
        cpu_off, cpu_on = statistics.median(r[1] for r in off), statistics.median(r[1] for r in on)
        cpu_delta = statistics.median(b[1] - a[1] for a, b in zip(off, on, strict=True))
        p95_delta = statistics.median(b[2] - a[2] for a, b in zip(off, on, strict=True))
        judged = name in ("clean", "with PII")
        verdict = "PASS" if delta <= GOAL_GATEWAY_US else "FAIL"
        verdict = verdict if judged else "(denied: not judged)" if name == "attacks" else f"({verdict}: not judged)"
        passed &= delta <= GOAL_GATEWAY_US or not judged
        answered = "/".join(map(str, sorted(statuses[(name, "on")])))
        print(
            f"  {name:14s} {lat_off:23.0f} {lat_on:6.0f} {delta:+8.0f} {ratio:7.3f}  |  {cpu_off:28.0f} {cpu_on:5.0f} "
            f"{cpu_delta:+7.0f}  |  {p95_delta:+7.0f}   on: HTTP {answered}  {verdict}"
        )
    print(
        f"  goal: on - off ≤ +{GOAL_GATEWAY_US:.0f} µs median, single-turn clean and PII prompts (the worst case: "
        f"nothing remembered): {'PASS' if passed else 'FAIL'}"
    )
    return passed


# -- the default checks' table (issue 6) -----------------------------------------------------------

DEFAULT_CHECKS: list[dict[str, Any]] = [
    {"check": "pii", "action": "redact"},
    {"check": "regex", "pattern": "(?i)ignore previous", "action": "deny"},
    {"check": "injection", "action": "deny"},
    {"check": "length", "max_chars": 32000, "max_completion_tokens": 4096, "action": "deny"},
]
PARAGRAPH = " ".join(FILLER[:6]) + " "
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


def checks_table(rounds: int) -> None:
    """Best and median microseconds per call over 20 batches, default checks, five prompts."""
    guard = guard_of(DEFAULT_CHECKS)
    facts = RequestFacts(max_tokens=256)
    prompts = {
        "clean English": two_kb(""),
        "with PII to redact": two_kb(PII),
        "non-ASCII": two_kb("", ACCENTED + PARAGRAPH),
        "Chinese + e-mail": two_kb("联系人\uff1ajane.doe@example.com。", CHINESE),
        "Korean + e-mail": two_kb("메일: jane@example.com ", KOREAN),
    }
    print(f"reference sum(range(1000)): {reference_us():.1f} us")
    per_batch = max(1, rounds // 20)
    for name, prompt in prompts.items():
        outcome = run(guard.check(prompt, facts))
        verdicts = ", ".join(f"{v.check}={v.verdict}" for v in outcome.verdicts)
        batches = []
        for _ in range(20):
            start = time.perf_counter_ns()
            for _ in range(per_batch):
                run(guard.check(prompt, facts))
            batches.append((time.perf_counter_ns() - start) / per_batch / 1000)
        best, median = min(batches), statistics.median(batches)
        print(f"{name:20s} {len(prompt)} chars: best {best:6.1f} us, median {median:6.1f} us  ({verdicts})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command")
    goals = commands.add_parser("goals", help="issue 35's two latency goals (the default)")
    table = commands.add_parser("checks", help="the default checks on five fixed prompts")
    table.add_argument("--rounds", type=int, default=20000)
    for each in (parser, goals):
        each.add_argument("--calls", type=int, default=3, help="calls per text in process")
        each.add_argument("--requests", type=int, default=100, help="requests per gateway run")
        each.add_argument("--rounds", type=int, default=10, help="off/on rounds through the gateway")
        each.add_argument("--only", choices=("in-process", "gateway"))
        each.add_argument("--upstream", default="", help="an OpenAI-compatible base URL instead of the stub")
    args = parser.parse_args()
    if args.command == "checks":
        checks_table(args.rounds)
        return
    results = []
    if args.only != "gateway":
        results.append(in_process(args.calls, prompt_sets()))
    if args.only != "in-process":
        results.append(asyncio.run(through_gateway(args)))
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
