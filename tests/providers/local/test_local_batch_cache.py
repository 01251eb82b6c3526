"""The local engine's batch cache: rows that join and leave at any step decode as if each were alone.

The model runs through the engine's own forward passes (`prefill`, `decode_step`); each row's
logits at every step are checked against transformers' forward pass over that row's whole token
sequence without any cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the local engine needs the 'local' extra")
transformers = pytest.importorskip("transformers")

from providers.local.batch_cache import BatchCache  # noqa: E402
from providers.local.forward import decode_step, prefill  # noqa: E402
from tests.support.local_model import long_context_model_dir  # noqa: E402

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def model() -> Any:
    torch.set_num_threads(1)
    return transformers.AutoModelForCausalLM.from_pretrained(long_context_model_dir()).eval()


@pytest.fixture(autouse=True)
def inference() -> Iterator[None]:
    with torch.inference_mode():  # as in the engine's worker
        yield


@dataclass
class Row:
    tokens: list[int]  # what the row has read so far, the prompt first
    fed: int = field(default=0)  # tokens fed after the prompt: picks the next one

    def next_token(self, vocab: int) -> int:
        """A fixed token sequence per row (inputs, not samples): distinct rows read distinct text."""
        self.fed += 1
        return (self.tokens[0] * 31 + self.fed * 17) % vocab


class Batch:
    """Drives the cache as the engine does, and checks every step against the model alone."""

    def __init__(self, model: Any, cache: BatchCache) -> None:
        self.model, self.cache = model, cache
        self.rows: list[Row] = []
        self.vocab = model.config.vocab_size

    def join(self, prompt: list[int], copies: int = 1) -> None:
        prefilled = prefill(self.model, prompt, CPU, score_prompt=False, top=None, cache=True)
        assert prefilled.cache is not None
        self.cache.join(prefilled.cache, copies)
        self.rows += [Row(list(prompt)) for _ in range(copies)]

    def leave(self, *rows: int) -> None:
        kept = [row for row in range(len(self.rows)) if row not in rows]
        self.rows = [self.rows[row] for row in self.cache.keep(kept)]

    def steps(self, count: int) -> None:
        for _ in range(count):
            fed = [row.next_token(self.vocab) for row in self.rows]
            positions = [len(row.tokens) for row in self.rows]
            logits = decode_step(self.model, fed, positions, self.cache, CPU)
            for row, token in zip(self.rows, fed, strict=True):
                row.tokens.append(token)
            self.check(logits)

    def check(self, logits: Any) -> None:
        width = self.cache.end - self.cache.start
        lengths = torch.tensor([len(row.tokens) for row in self.rows])
        left_padded = torch.arange(width) >= width - lengths.unsqueeze(1)  # columns keep token distances
        assert torch.equal(self.cache.mask, left_padded)
        for index, row in enumerate(self.rows):
            alone = self.model(torch.tensor([row.tokens])).logits[0, -1]
            torch.testing.assert_close(logits[index], alone, atol=1e-4, rtol=1e-4)


def test_rows_joining_and_leaving_decode_as_if_alone(model: Any) -> None:
    batch = Batch(model, BatchCache(rows=2, context=2048))

    batch.join([5, 6, 7])
    batch.steps(4)
    batch.join(list(range(20, 32)), copies=2)  # a prompt longer than the window; more rows than slots
    batch.steps(3)
    batch.leave(0)  # the last row moves into the freed slot
    batch.join([9, 10])
    batch.steps(70)  # past the first 64 columns
    batch.leave(1, 2)  # the longest row leaves: its columns are dropped
    batch.steps(2)
    batch.join(list(range(40, 140)))  # a prompt wider than every column so far
    batch.steps(3)

    assert len(batch.rows) == 2
    assert batch.cache.end - batch.cache.start == 103  # the 100-token prompt and the 3 tokens after it


def test_storage_is_reused_while_it_is_large_enough(model: Any) -> None:
    cache = BatchCache(rows=4, context=2048)
    batch = Batch(model, cache)
    batch.join([5, 6, 7])
    storage = cache.layers[0].keys.data_ptr()

    batch.steps(2)
    batch.join(list(range(20, 28)))  # longer than the window: it moves right, in place
    batch.steps(40)
    batch.join([8, 9])
    batch.leave(0, 1)  # the window narrows to the last row's columns
    batch.steps(20)  # reaches the last column: the window moves back to column 0, in place

    assert cache.start == 0
    assert cache.layers[0].keys.data_ptr() == storage


def test_a_window_wider_than_half_the_columns_moves_back_over_itself(model: Any) -> None:
    batch = Batch(model, BatchCache(rows=2, context=64))  # no more than 64 columns, ever
    batch.join([5, 6, 7])
    batch.steps(20)
    batch.join([8, 9, 10])
    batch.leave(0)

    batch.steps(45)  # reaches column 64 with a window of 44: back to column 0, where it overlaps itself

    assert (batch.cache.start, batch.cache.end) == (0, 48)


def test_the_last_row_leaving_empties_the_window(model: Any) -> None:
    batch = Batch(model, BatchCache(rows=2, context=2048))
    batch.join([5, 6, 7])
    batch.steps(2)

    batch.leave(0)

    assert (batch.cache.rows, batch.cache.get_seq_length()) == (0, 0)
    batch.join([1, 2, 3, 4])  # the storage is used again
    batch.steps(2)
