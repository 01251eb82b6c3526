"""The keys and values of every sequence decoded together: one preallocated cache, written in place.

Each layer keeps keys and values as [row slots, heads, columns, head_dim]. Live sequences hold
rows 0…n-1 and all write their next token into the same column, `end`: sequences are left-padded
and the window [start, end) spans the longest one. Columns keep every row's token distances (a
sliding-window mask stays right), the attention mask hides the padding, and each row has its own
position ids, so a row's result does not depend on its neighbours.

A step copies nothing: its keys go into column `end`. A sequence joins by writing its prefill
into free rows (only a prompt longer than the window moves the window); one leaves by moving a
row from the end into its slot. Storage grows geometrically, and a window that reached the last
column moves back to column 0: a copy every so many steps, where a `DynamicCache` (grown by
`torch.cat`, rebuilt when rows join or leave) copies the whole cache at every step. transformers'
`StaticCache` does not fit: one length for all rows, no rows joining or leaving, and attention
over its whole capacity at each step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import Cache, CacheLayerMixin

_FIRST_COLUMNS = 64  # allocated at least: short generations never grow the cache


class BatchCache(Cache):  # type: ignore[misc]  # transformers is untyped (Any) to mypy
    """The batch's cache, the model's `past_key_values` at each decoding step."""

    layers: list[_Layer]

    def __init__(self, rows: int, context: int) -> None:
        """`rows`: row slots to start with (more when a group needs them); `context`: the model's
        context length, which caps the columns (a window is never wider)."""
        super().__init__(layers=[])
        self._first_rows = rows
        self._context = context
        self.rows = 0  # live sequences, in slots 0…rows-1
        self.start = 0  # the columns some live row has a token in: [start, end)
        self.end = 0
        self._firsts: list[int] = []  # each live row's first column
        self._mask = torch.zeros(0, 0, dtype=torch.bool)  # [row slots, columns]: where a row has a token

    @property
    def mask(self) -> torch.Tensor:
        """[rows, window]: True where a row has a token; each row's tokens are its last columns."""
        return self._mask[: self.rows, self.start : self.end]

    def join(self, prefilled: DynamicCache, copies: int) -> None:
        """Add `copies` rows, after the live ones, that share one prefilled prompt (one row, unpadded)."""
        keys = [layer.keys for layer in prefilled.layers]
        values = [layer.values for layer in prefilled.layers]
        length = int(keys[0].shape[2])
        if not self.layers:  # the first join: storage shaped like the model's keys and values
            self.layers = [_Layer(self, key, value) for key, value in zip(keys, values, strict=True)]
            self._mask = self._mask.to(keys[0].device)
        if self.rows == 0:  # an empty window goes where the prompt fits as it is
            self.start = self.end = length
        # A prompt longer than the window moves it right, by at least as much again as its end:
        # the next prompts, a little longer still, fit without moving it.
        shift = 0 if length <= self.end else max(length - self.end, self.end)
        rows = self.rows + copies
        self._reserve(rows, self.end + shift + 1, shift)
        first = self.end - length
        for layer, layer_keys, layer_values in zip(self.layers, keys, values, strict=True):
            layer.keys[self.rows : rows, :, first : self.end] = layer_keys
            layer.values[self.rows : rows, :, first : self.end] = layer_values
        self._mask[self.rows : rows, first : self.end] = True
        self._firsts += [first] * copies
        self.rows, self.start = rows, min(self.start, first)

    def keep(self, rows: Sequence[int]) -> list[int]:
        """Keep only these rows: each kept row past the new count moves into a freed slot below it.
        Returns the kept rows' former indices in their new order."""
        kept = len(rows)
        order = list(range(kept))
        freed = sorted(set(range(kept)) - set(rows))
        moved = sorted(row for row in rows if row >= kept)
        if moved:
            to, source = (torch.tensor(index, device=self._mask.device) for index in (freed, moved))
            window = slice(self.start, self.end)
            for layer in self.layers:
                for tensor in (layer.keys, layer.values):
                    tensor[to, :, window] = tensor[source, :, window]
            self._mask[to] = self._mask[source]
            for slot, row in zip(freed, moved, strict=True):
                order[slot] = row
                self._firsts[slot] = self._firsts[row]
        self._mask[kept : self.rows] = False  # free slots are padding everywhere
        self.rows, self._firsts = kept, self._firsts[:kept]
        self.start = min(self._firsts, default=self.end)  # the columns no live row needs are dropped
        return order

    def step_mask(self) -> torch.Tensor:
        """Make room for the step's column and mark it in every live row; the step's attention mask."""
        if self.end == self._mask.shape[1]:  # back to column 0, in twice the columns if it fills half
            width = self.end - self.start + 1
            self._reserve(self.rows, min(2 * width, max(self._context, width)), -self.start)
        self._mask[: self.rows, self.end] = True
        return self._mask[: self.rows, self.start : self.end + 1]

    def advance(self) -> None:
        """After a decoding step: its column belongs to every live row."""
        self.end += 1

    # What the model asks of its cache during a step (its layers write into column `end`).

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.end - self.start

    def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
        return self.end - self.start + query_length, 0

    def _reserve(self, rows: int, columns: int, shift: int) -> None:
        """Room for `rows` rows and `columns` columns, the window moved by `shift`: in place when
        the storage is large enough, else in new storage grown geometrically."""
        slots, have = self._mask.shape
        if rows <= slots and columns <= have:
            if shift:
                self._move(shift)
            return
        slots = slots if rows <= slots else max(rows, 2 * slots, self._first_rows)
        have = have if columns <= have else max(columns, min(max(2 * have, _FIRST_COLUMNS), self._context))
        window = slice(self.start, self.end)
        for layer in self.layers:
            layer.keys = _resized(layer.keys, 2, slots, have, window, shift, self.rows)
            layer.values = _resized(layer.values, 2, slots, have, window, shift, self.rows)
        self._mask = _resized(self._mask, 1, slots, have, window, shift, self.rows)
        self._shifted(shift)

    def _move(self, shift: int) -> None:
        """The window moved by `shift` columns in the same storage; the keys and values it leaves
        behind are masked padding (finite, so harmless)."""
        old, new, rows = slice(self.start, self.end), slice(self.start + shift, self.end + shift), self.rows
        overlap = abs(shift) < self.end - self.start  # only at the context's cap: copied first (torch insists)
        for layer in self.layers:
            for tensor in (layer.keys, layer.values):
                tensor[:rows, :, new] = tensor[:rows, :, old].clone() if overlap else tensor[:rows, :, old]
        mask = self._mask[:rows, old].clone()
        self._mask[:rows, old] = False
        self._mask[:rows, new] = mask
        self._shifted(shift)

    def _shifted(self, shift: int) -> None:
        self._firsts = [first + shift for first in self._firsts]
        self.start, self.end = self.start + shift, self.end + shift


class _Layer(CacheLayerMixin):  # type: ignore[misc]
    """One layer's keys and values; the batch says where a step writes."""

    def __init__(self, batch: BatchCache, keys: torch.Tensor, values: torch.Tensor) -> None:
        super().__init__()
        self._batch = batch
        self.keys, self.values = keys, values  # first the prefill's, as a template for `_resized`
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        raise RuntimeError("the batch cache is filled by BatchCache.join, not by a forward pass")

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        batch = self._batch
        rows, end = batch.rows, batch.end + key_states.shape[2]
        self.keys[:rows, :, batch.end : end] = key_states
        self.values[:rows, :, batch.end : end] = value_states
        return self.keys[:rows, :, batch.start : end], self.values[:rows, :, batch.start : end]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self._batch.get_mask_sizes(query_length)

    def get_seq_length(self) -> int:
        return self._batch.get_seq_length()

    def get_max_length(self) -> int:
        return -1


def _resized(
    tensor: torch.Tensor, axis: int, slots: int, columns: int, window: slice, shift: int, live: int
) -> torch.Tensor:
    """A zeroed copy with `slots` rows and `columns` columns along `axis`, holding the live rows'
    `window` moved by `shift`. Zeros, not empty memory: a masked NaN would still poison the output."""
    shape = [slots, *tensor.shape[1:]]
    shape[axis] = columns
    resized = tensor.new_zeros(shape)
    width = window.stop - window.start
    if live and width:
        source = tensor[:live].narrow(axis, window.start, width)
        resized[:live].narrow(axis, window.start + shift, width).copy_(source)
    return resized
