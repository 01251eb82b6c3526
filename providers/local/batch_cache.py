"""The keys and values of every sequence decoded together, in one cache left-padded to one length.

Sequences join (after their own prefill) and leave between steps; an attention mask hides the
padding and each row carries its own positions, so a row's result does not depend on its
neighbours. The cache is a transformers `DynamicCache`, rebuilt from its tensors when rows join
or leave and extended in place by the model at each step.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from transformers import DynamicCache

KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys and values [rows, heads, length, head_dim]


class BatchCache:
    def __init__(self) -> None:
        self.cache: DynamicCache | None = None
        self.mask = torch.zeros(0, 0, dtype=torch.long)  # [rows, length]: 1 where a real token is

    @property
    def rows(self) -> int:
        return int(self.mask.shape[0])

    def join(self, cache: DynamicCache, copies: int) -> None:
        """Add `copies` rows that share one prefilled prompt (its cache has one row, no padding)."""
        added = [
            (keys.expand(copies, -1, -1, -1), values.expand(copies, -1, -1, -1)) for keys, values in _layers(cache)
        ]
        length = added[0][0].shape[2]
        added_mask = torch.ones(copies, length, dtype=torch.long, device=added[0][0].device)
        if self.cache is None:
            self._set([(k.contiguous(), v.contiguous()) for k, v in added], added_mask)
            return
        width = max(length, self.mask.shape[1])
        merged = [
            (torch.cat([_pad(k_old, width), _pad(k_new, width)]), torch.cat([_pad(v_old, width), _pad(v_new, width)]))
            for (k_old, v_old), (k_new, v_new) in zip(_layers(self.cache), added, strict=True)
        ]
        mask = torch.cat([_pad_mask(self.mask, width), _pad_mask(added_mask, width)])
        self._set(merged, mask)

    def keep(self, rows: Sequence[int]) -> None:
        """Keep only these rows (in this order); drop padding no remaining row needs."""
        if not rows:
            self.cache, self.mask = None, self.mask[:0, :0]
            return
        assert self.cache is not None
        index = torch.tensor(rows, device=self.mask.device)
        mask = self.mask.index_select(0, index)
        first = int(mask.any(dim=0).nonzero()[0])  # leading columns that are padding in every row
        kept = [
            (k.index_select(0, index)[:, :, first:], v.index_select(0, index)[:, :, first:])
            for k, v in _layers(self.cache)
        ]
        self._set(kept, mask[:, first:])

    def step_mask(self) -> torch.Tensor:
        """The attention mask of a decoding step: every row adds one real token. Becomes the mask."""
        self.mask = torch.cat([self.mask, self.mask.new_ones(self.rows, 1)], dim=1)
        return self.mask

    def _set(self, layers: KV, mask: torch.Tensor) -> None:
        self.cache = DynamicCache(ddp_cache_data=[(k.contiguous(), v.contiguous()) for k, v in layers])
        self.mask = mask


def _layers(cache: DynamicCache) -> KV:
    return [(layer[0], layer[1]) for layer in cache]


def _pad(tensor: torch.Tensor, width: int) -> torch.Tensor:
    return F.pad(tensor, (0, 0, width - tensor.shape[2], 0))  # zeros on the left of the length axis


def _pad_mask(mask: torch.Tensor, width: int) -> torch.Tensor:
    return F.pad(mask, (width - mask.shape[1], 0))
