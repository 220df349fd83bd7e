"""inference_layout(): column-major Linear weights change speed only: same values, shapes, outputs, files."""

import torch
from torch import nn

from scratchformer.decoding import beam_search, greedy_decode
from scratchformer.decoding.spec import Search
from scratchformer.runs import load_weights, save_weights


def test_same_outputs_same_state(tiny_model, tiny_sources):
    model, ref = tiny_model(0), tiny_model(0)
    before = {k: v.clone() for k, v in ref.state_dict().items()}
    assert model.inference_layout() is model
    for m in model.modules():
        if isinstance(m, nn.Linear):
            assert not m.weight.is_contiguous() and m.weight.t().is_contiguous()
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)  # a pure copy
    g = torch.Generator().manual_seed(2)
    x, y = torch.randint(4, 40, (3, 6), generator=g), torch.randint(4, 40, (3, 5), generator=g)
    with torch.no_grad():  # other GEMM kernels: equal to 1e-6, not to the bit
        torch.testing.assert_close(model(x, y), ref(x, y), atol=1e-6, rtol=0)
    src = tiny_sources(1)  # token ids: logits apart by ~1e-7 pick the same ids unless two are that close
    assert greedy_decode(model, src, Search(max_output_len=10)) == greedy_decode(ref, src, Search(max_output_len=10))
    assert [h[0].tokens for h in beam_search(model, src, Search(beam=4, max_output_len=10))] == \
        [h[0].tokens for h in beam_search(ref, src, Search(beam=4, max_output_len=10))]


def test_tied_weights_stay_tied_and_files_round_trip(tiny_model, tmp_path):
    model = tiny_model(0, tie_embeddings=True)
    model.generator.proj.weight = model.tgt_embed.token.weight  # the fixture unties it: tie again
    model.inference_layout()
    assert model.generator.proj.weight is model.tgt_embed.token.weight
    save_weights(model, tmp_path / "m.safetensors")
    fresh = tiny_model(1, tie_embeddings=True).inference_layout()
    fresh.generator.proj.weight = fresh.tgt_embed.token.weight
    load_weights(fresh, tmp_path / "m.safetensors")
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name


def test_training_still_works_on_the_layout(tiny_model):
    model = tiny_model(0).inference_layout().train()
    src, tgt = torch.randint(4, 40, (2, 5)), torch.randint(4, 40, (2, 6))
    model(src, tgt).sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
