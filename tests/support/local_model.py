"""Tiny GPT-2-style models and a byte-level BPE tokenizer, built offline in a folder in about a second.

Both are saved with `save_pretrained`, so the gateway loads them through the same path as a user's
model. Everything is deterministic: the corpus is fixed, the BPE trainer is deterministic and the
weights come from a seeded generator.

- `build_random_model`: randomly initialised; its text is noise, so tests force tokens with
  `logit_bias`, compare token ids, or score against an independent forward pass.
- `build_scripted_model`: weights set by hand so that, whatever the prompt, it answers
  `answer 0 to` and then `<|endoftext|>` with probability ~1 at any temperature: a model whose
  answer is known, for the conformance suite's shared cases.
- `build_random_model(fim=True)`: a tokenizer with fill-in-the-middle tokens (StarCoder's
  spelling) that also starts every text with a BOS, as CodeLlama's does, for `suffix`.
- `chat_template=CHAT_TEMPLATE` (either model): a tokenizer with a chat template, for chat requests.
- `chatml_model_dir`: the random model with ChatML's role markers as special tokens and its template.
- `build_scripted_model(end_of_turn=True)`: the scripted answer ends with `<|eot|>`, a second end
  token that only the generation config names (as Llama 3's `<|eot_id|>` beside `<|end_of_text|>`).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def one_load_at_a_time(build: Callable[P, R]) -> Callable[P, R]:
    """transformers' model building and loading is not thread-safe, and a race leaves every later
    load on the meta device: a test that builds or loads a model while a gateway loads one in a
    thread takes the locks the gateway's loads take (the engine's and the classifier check's)."""

    @functools.wraps(build)
    def locked(*args: P.args, **kwargs: P.kwargs) -> R:
        # torch: imported when a model is built. Both locks: the classifier check loads under its own.
        from policies.guardrails.checks.classifier.model import CLASSIFIER_LOADING
        from providers.local.loader import MODEL_LOADING

        with MODEL_LOADING, CLASSIFIER_LOADING:
            return build(*args, **kwargs)

    return locked


EOS = "<|endoftext|>"
EOT = "<|eot|>"  # an end-of-turn token: the scripted model's last with `end_of_turn`
FIM = ("<fim_prefix>", "<fim_suffix>", "<fim_middle>")
SCRIPT = ("answer", "Ġ0", "Ġto")  # the scripted model's answer, as BPE tokens ("Ġ" is a space)
SCRIPTED_TEXT = "answer 0 to"
# A short chat template (the models have 64 positions): `role: content` lines, then `assistant:`.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)

# ChatML, as Qwen's and many other templates write it: its role markers are special tokens of the
# tokenizer, and it prints what the templates that know names and tool calls print.
CHATML = ("<|im_start|>", "<|im_end|>")
CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}"
    "{% if message.name %} {{ message.name }}{% endif %}{{ '\\n' + message['content'] }}"
    "{% for call in message.tool_calls or [] %}{{ '\\n' + call.function.name + call.function.arguments | tojson }}"
    "{% endfor %}{% if message.tool_call_id %} {{ message.tool_call_id }}{% endif %}<|im_end|>{{ '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant{{ '\\n' }}{% endif %}"
)

# Words the tests use as prompts are frequent here, so that each becomes one token.
_LINES = (
    "the sky",
    "the blue sky",
    "red apples",
    "green pears grow",
    "answer 0 to the sky",
    "hello world, the model says hello",
    "one two three four five six seven eight nine ten",
    "café naïve résumé",  # accented letters: two-byte characters, merged or not
    "the quick brown fox jumps over the lazy dog",
)
_RARE = "日本 😀 ∑"  # seen once: their bytes stay separate tokens, for the UTF-8 tests


def corpus() -> list[str]:
    return [line for line in _LINES for _ in range(50)] + [_RARE]


def build_tokenizer(
    directory: Path,
    vocab_size: int = 400,
    *,
    fim: bool = False,
    chat_template: str | None = None,
    extra_special: tuple[str, ...] = (),
) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS, *FIM, *extra_special] if fim else [EOS, *extra_special],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,  # the rare line keeps its multi-byte characters split across byte tokens
        show_progress=False,
    )
    bpe.train_from_iterator(corpus(), trainer=trainer)
    if fim:  # every encoded text starts with the BOS (here end-of-text, as GPT-2's BOS is)
        bos = (EOS, bpe.token_to_id(EOS))
        bpe.post_processor = processors.TemplateProcessing(single=f"{EOS} $A", special_tokens=[bos])
    wrapped = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=EOS, eos_token=EOS, unk_token=EOS)
    if chat_template is not None:
        wrapped.chat_template = chat_template
    wrapped.save_pretrained(directory)


@one_load_at_a_time
def build_random_model(
    directory: Path,
    *,
    n_positions: int = 64,
    n_embd: int = 32,
    n_layer: int = 2,
    fim: bool = False,
    chat_template: str | None = None,
    extra_special: tuple[str, ...] = (),
) -> Path:
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    build_tokenizer(directory, fim=fim, chat_template=chat_template, extra_special=extra_special)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=2,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():  # a wider spread than GPT-2's init: distinct, non-uniform distributions
        model.lm_head.weight.mul_(8.0)
    model.save_pretrained(directory)
    return directory


@one_load_at_a_time
def build_scripted_model(
    directory: Path, margin: float = 40.0, *, chat_template: str | None = None, end_of_turn: bool = False
) -> Path:
    """A bigram chain: any token → `answer` → ` 0` → ` to` → EOS (or EOT, `end_of_turn`). Blocks add
    nothing (zero output projections), so the last hidden state is the token's embedding, one of four
    one-hot classes; the untied output rows point the class at its successor with a logit `margin`
    above the rest. With `end_of_turn`, the model's config names EOS and its generation config both."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, GPT2Config, GPT2LMHeadModel

    build_tokenizer(directory, chat_template=chat_template, extra_special=(EOT,) if end_of_turn else ())
    tokenizer = AutoTokenizer.from_pretrained(directory)
    chain = [tokenizer.convert_tokens_to_ids(token) for token in SCRIPT]
    assert tokenizer.unk_token_id not in chain or tokenizer.unk_token_id == tokenizer.eos_token_id
    width = 8
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=64,
        n_embd=width,
        n_layer=1,
        n_head=1,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = GPT2LMHeadModel(config)
    last = tokenizer.convert_tokens_to_ids(EOT) if end_of_turn else tokenizer.eos_token_id
    if end_of_turn:
        model.generation_config = GenerationConfig(
            bos_token_id=tokenizer.eos_token_id, eos_token_id=[tokenizer.eos_token_id, last]
        )
    successors = [*chain, last]  # class c (0: any other token) is followed by successors[c]
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.transformer.ln_f.weight.fill_(1.0)
        embeddings = model.transformer.wte.weight
        embeddings[:, 0] = 1.0
        for position, token in enumerate(chain, start=1):
            embeddings[token] = torch.nn.functional.one_hot(torch.tensor(position), width).float()
        for source, successor in enumerate(successors):
            normalised = torch.nn.functional.layer_norm(torch.eye(width)[source], (width,))
            model.lm_head.weight[successor] = normalised * (margin / width)
    model.save_pretrained(directory)
    return directory


def _session_folder(prefix: str) -> Path:
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


# Built once per test session (about a second each), removed when it ends.
@functools.cache
def random_model_dir() -> Path:
    return build_random_model(_session_folder("random-model-"))


@functools.cache
def long_context_model_dir() -> Path:
    """The random model with 2048 positions: generations long enough to watch a batch at work."""
    return build_random_model(_session_folder("long-model-"), n_positions=2048)


@functools.cache
def fim_model_dir() -> Path:
    return build_random_model(_session_folder("fim-model-"), fim=True)


@functools.cache
def scripted_model_dir() -> Path:
    return build_scripted_model(_session_folder("scripted-model-"))


@functools.cache
def scripted_end_of_turn_model_dir() -> Path:
    return build_scripted_model(_session_folder("scripted-eot-model-"), end_of_turn=True)


@functools.cache
def random_chat_model_dir() -> Path:
    """The random model whose tokenizer has `CHAT_TEMPLATE`."""
    return build_random_model(_session_folder("random-chat-model-"), chat_template=CHAT_TEMPLATE)


@functools.cache
def chatml_model_dir() -> Path:
    """The random model (256 positions) whose tokenizer has ChatML's special tokens and template."""
    directory = _session_folder("chatml-model-")
    return build_random_model(directory, n_positions=256, chat_template=CHATML_TEMPLATE, extra_special=CHATML)


@functools.cache
def scripted_chat_model_dir() -> Path:
    """The scripted model whose tokenizer has `CHAT_TEMPLATE`: it answers `answer 0 to` to any chat."""
    return build_scripted_model(_session_folder("scripted-chat-model-"), chat_template=CHAT_TEMPLATE)


@one_load_at_a_time
def load_reference(directory: Path) -> tuple[Any, Any]:
    """A model folder's model (eval mode, one thread) and tokenizer, loaded by transformers directly:
    the independent check of what the engine computes."""
    import torch
    import transformers

    torch.set_num_threads(1)
    model = transformers.AutoModelForCausalLM.from_pretrained(directory).eval()
    return model, transformers.AutoTokenizer.from_pretrained(directory)
