"""GGUF files: a random tiny Llama written as GGUF the way llama.cpp's converter writes it (q/k rows permuted for
its rope, tensors quantised Q4_0 / Q4_1 / Q8_0 / F16 / BF16, a byte-level BPE vocabulary) loads into our decoder
with the logits transformers gets from the same file (1e-4), and our tokenizer rebuilt from the metadata encodes as
transformers' does."""

import numpy as np
import pytest
import torch

from scratchformer.decoding.sampling import Sampling
from scratchformer.errors import ConfigError
from scratchformer.interop.gguf import gguf_tokenizer, read_gguf, unpermute
from scratchformer.interop.huggingface import from_pretrained

gguf = pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")

def permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf permutation of q/k rows (as conftest.py writes them)."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_unpermute_undoes_llama_cpp_permutation():
    w = np.arange(4 * 16 * 3, dtype=np.float32).reshape(64, 3)
    torch.testing.assert_close(unpermute(torch.from_numpy(permute(w, 4)), 4), torch.from_numpy(w))


def test_every_quantisation_is_read_and_logits_equal_transformers_on_the_same_file(tiny_gguf):
    contents = read_gguf(tiny_gguf)
    kinds = {t.tensor_type.name for t in gguf.GGUFReader(str(tiny_gguf)).tensors}
    assert {"Q4_0", "Q4_1", "Q8_0", "F16", "BF16", "F32"} <= kinds
    assert contents.hf_config["tie_word_embeddings"] and contents.hf_config["num_key_value_heads"] == 2
    ours = from_pretrained(tiny_gguf)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tiny_gguf.parent, gguf_file=tiny_gguf.name).eval()
    ids = torch.randint(0, 266, (2, 10), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), theirs(ids).logits, atol=1e-4, rtol=1e-4)


def test_tokenizer_from_the_metadata_encodes_as_transformers(tiny_gguf):
    ours = gguf_tokenizer(read_gguf(tiny_gguf).fields)
    theirs = transformers.AutoTokenizer.from_pretrained(tiny_gguf.parent, gguf_file=tiny_gguf.name)
    for text in ("the theater is in the sun", "<|im_start|>user\nHi there!<|im_end|>\n", "héllo 12  tabs\t🙂"):
        ids = ours.encode(text).ids
        assert ids == theirs(text, add_special_tokens=False).input_ids
        assert ours.decode(ids, skip_special_tokens=False) == text
    assert ours.encode("<|im_end|>").ids == [265]  # a control token stays whole


def test_a_file_that_is_not_gguf_is_one_line(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"not a gguf file at all")
    with pytest.raises(ConfigError, match="cannot be read as a GGUF file"):
        from_pretrained(bad)


def test_generate_and_chat_run_on_a_gguf_file(tiny_gguf, capsys, monkeypatch):
    """The CLI streams exactly what greedy sampling on our KV cache gives, through the file's own tokenizer."""
    import io

    from scratchformer.cli import main
    from scratchformer.decoding.sampling import sample
    from scratchformer.interop.pretrained import load_lm

    lm = load_lm(tiny_gguf)
    prompt = "the sun"
    new = sample(lm.model, [lm.encode(prompt)], Sampling(max_new_tokens=6, temperature=0, eos=lm.eos_id))[0]
    assert main(["generate", str(tiny_gguf), prompt, "--set", "temperature=0", "--max-new-tokens", "6"]) == 0
    assert capsys.readouterr().out == lm.decode(lm.encode(prompt) + new) + "\n"

    chat = lm.chat_prompt([{"role": "user", "content": "hi there"}])
    assert chat == "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n"
    reply = sample(lm.model, [lm.encode(chat)], Sampling(max_new_tokens=5, temperature=0, eos=lm.eos_id))[0]
    monkeypatch.setattr("sys.stdin", io.StringIO("hi there\n\n"))
    assert main(["chat", str(tiny_gguf), "--set", "temperature=0", "--max-new-tokens", "5"]) == 0
    assert capsys.readouterr().out == lm.decode(reply) + "\n"
    assert main(["chat", str(tiny_gguf.parent)]) == 2  # a folder without config.json: one line
    assert "is not a pretrained model" in capsys.readouterr().err
