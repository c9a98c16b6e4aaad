"""A tiny Llama-style causal LM with its own byte-level BPE tokenizer, built locally.

Tests and demos cannot download models, so they make one here in a second or two:
a tokenizer trained on a small synthetic corpus and a randomly initialised
`LlamaForCausalLM`, both written with `save_pretrained` so that
`AutoTokenizer.from_pretrained` / `AutoModelForCausalLM.from_pretrained` load them
like any hub model. Llama (not Qwen2) because `AutoTokenizer` would swap a Qwen2
folder's tokenizer for the Qwen2 class and change the ids.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterable, Sequence
from pathlib import Path

from trainers.models.quiet import quiet_transformers

SIZES: dict[str, dict[str, int]] = {
    # ~1 M parameters with the default vocabulary: learns toy tasks on a laptop CPU.
    "tiny": {"hidden": 128, "layers": 4, "heads": 4, "intermediate": 384},
    # ~14 M parameters: big enough for throughput benchmarks to be dominated by the model.
    "small": {"hidden": 384, "layers": 8, "heads": 6, "intermediate": 1024},
}

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS = [PAD, BOS, EOS, *ROLE_TOKENS]
# Hermes-style tool-call markers and the tool role, as one token each for an agent model. Added as
# ordinary (not special) tokens: decoding skips special tokens, and the parser must see these.
TOOL_TOKENS = ("<tool_call>", "</tool_call>", "<|tool|>")

# Each message is "<|role|>content<|eos|>"; the generation prompt opens the assistant turn,
# so a completion ends when the model emits <|eos|>.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '<|eos|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)

_WORD_TEXT = (
    "the a an of to and in is it that for on with as be at by this from or answer question letter repeat "
    "say write number sum plus minus times equals what how many count copy word yes no true false one two "
    "three four five six seven eight nine ten please reply only with final result"
)
_WORDS = _WORD_TEXT.split()


def synthetic_corpus(seed: int = 0, lines: int = 3000) -> list[str]:
    """Lines of English-like words, single letters, letter runs, digits and arithmetic:
    enough for the BPE to learn merges that toy tasks use."""
    rng = random.Random(seed)
    letters = string.ascii_lowercase
    out: list[str] = []
    for _ in range(lines):
        kind = rng.randrange(5)
        if kind == 0:
            out.append(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 12))))
        elif kind == 1:
            ch = rng.choice(letters)
            out.append(
                f"Repeat the letter: {ch}\n" + " ".join(ch * rng.randint(1, 4) for _ in range(rng.randint(1, 6)))
            )
        elif kind == 2:
            a, b = rng.randint(0, 99), rng.randint(0, 99)
            out.append(f"What is {a} + {b}? Answer: {a + b}")
        elif kind == 3:
            out.append("".join(rng.choice(letters + string.digits + " .,:;!?") for _ in range(rng.randint(5, 40))))
        else:
            out.append(" ".join(rng.choice(letters).upper() + rng.choice(_WORDS) for _ in range(rng.randint(2, 8))))
    return out


def agent_corpus(seed: int = 0, lines: int = 1500) -> list[str]:
    """Lines in the shape of an agent's turns: Hermes tool calls with a few tools and arguments,
    tool results and short codes, so the BPE merges the call's fixed parts into few tokens."""
    rng = random.Random(seed)
    tools = {"open": "box", "search": "query", "calculator": "expression", "python": "code"}
    out: list[str] = []
    for _ in range(lines):
        name = rng.choice(list(tools))
        value = rng.choice(string.ascii_lowercase) + rng.choice(string.digits)
        if name != "open":
            value = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4)))
        call = f'<tool_call>{{"name": "{name}", "arguments": {{"{tools[name]}": "{value}"}}}}</tool_call>'
        code = "".join(rng.choice(string.digits) for _ in range(rng.randint(2, 6)))
        out.append(rng.choice((call, f"<|tool|>{code}", f'look in box "{value}"', f"{call}\n{code}")))
    return out


def train_tokenizer(corpus: Iterable[str], vocab_size: int = 768, added_tokens: Sequence[str] = ()):
    """Byte-level BPE (every byte is in the alphabet, so any text round-trips) wrapped as a
    `PreTrainedTokenizerFast` with bos/eos/pad and the chat template above. `added_tokens` become
    single ordinary tokens after the BPE ones (decoded like text, not skipped as special)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=list(ROLE_TOKENS),
        padding_side="left",
        model_max_length=2048,
    )
    fast.chat_template = CHAT_TEMPLATE
    if added_tokens:
        fast.add_tokens([AddedToken(t, special=False, normalized=False) for t in added_tokens])
    return fast


def build_tiny_model(
    out_dir: str | Path,
    *,
    size: str = "tiny",
    vocab_size: int = 768,
    hidden: int | None = None,
    layers: int | None = None,
    heads: int | None = None,
    intermediate: int | None = None,
    seed: int = 0,
    corpus: Iterable[str] | None = None,
    added_tokens: Sequence[str] = (),
) -> Path:
    """Write a tokenizer and a randomly initialised LlamaForCausalLM to `out_dir`; returns it.

    `size` picks defaults from SIZES ("tiny" ~1 M, "small" ~14 M parameters); the
    explicit arguments override them. Same seed, same weights and same tokenizer.
    An agent model: `corpus=synthetic_corpus(seed) + agent_corpus(seed), added_tokens=TOOL_TOKENS`."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; valid: {', '.join(SIZES)}")
    dims = {**SIZES[size]}
    for key, value in (("hidden", hidden), ("layers", layers), ("heads", heads), ("intermediate", intermediate)):
        if value is not None:
            dims[key] = value
    if dims["hidden"] % dims["heads"]:
        raise ValueError(f"hidden ({dims['hidden']}) must be a multiple of heads ({dims['heads']})")

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(corpus if corpus is not None else synthetic_corpus(seed), vocab_size, added_tokens)
    ids = {name: tokenizer.convert_tokens_to_ids(tok) for name, tok in (("bos", BOS), ("eos", EOS), ("pad", PAD))}
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=dims["hidden"],
        intermediate_size=dims["intermediate"],
        num_hidden_layers=dims["layers"],
        num_attention_heads=dims["heads"],
        num_key_value_heads=dims["heads"],
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=ids["bos"],
        eos_token_id=ids["eos"],
        pad_token_id=ids["pad"],
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=ids["bos"], eos_token_id=ids["eos"], pad_token_id=ids["pad"], do_sample=True
    )
    with quiet_transformers():  # no "Writing model shards" bar on the first start's output
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    return out


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())
