"""A pretrained language model with its own tokenizer and chat template: a Hugging Face Llama folder or a GGUF
file, as one object the `generate` and `chat` commands decode on our KV cache.

    lm = load_lm("SmolLM2-135M-Instruct.Q4_1.gguf")          # or a folder with config.json + tokenizer.json
    ids = lm.encode(lm.chat_prompt([{"role": "user", "content": "Hi"}]))
    lm.model, lm.tokenizer, lm.eos_id, lm.chat_template

The chat template is Jinja, rendered in a bounded sandbox as transformers renders it (messages,
add_generation_prompt, bos_token, eos_token, raise_exception, strftime_now): interop/chat_template.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from scratchformer.config.fields import loads_json
from scratchformer.errors import N_, ConfigError
from scratchformer.interop.chat_template import pick_template, render_chat
from scratchformer.interop.gguf import chat_template, gguf_tokenizer, read_gguf
from scratchformer.interop.hf_base import read_json
from scratchformer.interop.huggingface import FAMILIES, config_from_hf, from_pretrained, model_from_state
from scratchformer.model.transformer import DecoderOnly

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}  # what --dtype may name


def is_pretrained(path: str | Path) -> bool:
    """A .gguf file, or a folder whose config.json names a Hugging Face model_type (a run's config.json does not)."""
    path = Path(path)
    if path.suffix == ".gguf":
        return path.is_file()
    try:
        return "model_type" in loads_json((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return False


@dataclass
class PretrainedLM:
    """A decoder-only model with the tokenizer (a tokenizers.Tokenizer) and chat template it was trained with."""

    model: DecoderOnly
    tokenizer: Any
    chat_template: str | None = None
    bos_id: int | None = None
    eos_id: int | None = None
    add_bos: bool = False  # start every prompt with BOS (Llama 2 style); SmolLM2 does not
    source: str = "the model"  # the file the chat template came from, for its errors

    def token(self, i: int | None) -> str:
        return self.tokenizer.id_to_token(i) if i is not None else ""

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, special tokens written in it kept whole, BOS first when the model wants it."""
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return [self.bos_id, *ids] if self.add_bos and self.bos_id is not None else ids

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """The prompt text of a conversation, by the model's chat template."""
        if not self.chat_template:
            raise ConfigError(N_("this model has no chat template: use `generate` with a plain prompt"))
        template = pick_template(self.chat_template, self.source)  # a library user may give HF's named templates
        return render_chat(template, messages, self.source, add_generation_prompt=add_generation_prompt,
                           bos_token=self.token(self.bos_id), eos_token=self.token(self.eos_id))


def _folder_tokenizer(folder: Path) -> tuple[Any, dict[str, Any]]:
    from tokenizers import Tokenizer

    if not (folder / "tokenizer.json").is_file():
        raise ConfigError(N_("{folder} has no tokenizer.json: generate and chat need the model's tokenizer"),
                          folder=folder)
    settings = read_json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").exists() else {}
    settings["chat_template"] = pick_template(settings.get("chat_template"), str(folder / "tokenizer_config.json"))
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        try:
            settings["chat_template"] = jinja.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ConfigError(N_("{jinja} is not UTF-8 text: {reason} at byte {start}"), jinja=jinja, reason=e.reason,
                              start=e.start) from None
    try:
        return Tokenizer.from_file(str(folder / "tokenizer.json")), settings
    except Exception as e:  # the tokenizers library's own error (damaged, truncated, too deep): one line
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(N_("{value} cannot be read by the tokenizers library: {detail}"),
                          value=folder / 'tokenizer.json', detail=detail[:200]) from None


def load_lm(path: str | Path, dtype: torch.dtype = torch.float32, fused: bool = True) -> PretrainedLM:
    """A Llama folder (config.json, weights, tokenizer.json) or a .gguf file -> PretrainedLM, eval mode."""
    path = Path(path)
    if path.suffix == ".gguf":
        contents = read_gguf(path)
        config = config_from_hf(contents.hf_config, path, fused)
        model = model_from_state(FAMILIES["llama"], config, contents.state, contents.hf_config, str(path))
        fields = contents.fields
        lm = PretrainedLM(model, gguf_tokenizer(fields), pick_template(chat_template(fields), str(path)),
                          fields.get("tokenizer.ggml.bos_token_id"), fields.get("tokenizer.ggml.eos_token_id"),
                          bool(fields.get("tokenizer.ggml.add_bos_token", False)), str(path))
    else:
        model = from_pretrained(path, fused)
        tokenizer, settings = _folder_tokenizer(path)
        extra = model.config.extra
        eos = extra.get("eos_token_id")
        eos = eos[0] if isinstance(eos, list) and eos else eos  # Llama 3 lists several: the first ends a turn
        lm = PretrainedLM(model, tokenizer, settings.get("chat_template"), extra.get("bos_token_id"), eos,
                          bool(settings.get("add_bos_token", False)), str(path))
    if not isinstance(lm.model, DecoderOnly):
        raise ConfigError(N_("{path} holds a {arch} model: generate and chat need a decoder"), path=path,
                          arch=lm.model.config.arch)
    lm.model.to(dtype)
    return lm
