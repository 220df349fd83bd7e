"""Training fast paths: fused Adam (same update as the reference loop), torch.compile, bf16 autocast on CPU."""

import pytest
import torch

from scratchformer.training.loss import label_smoothed_loss
from scratchformer.training.schedule import paper_optimizer


def _step(model, optimizer, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    src, tgt = torch.randint(4, 40, (3, 6), generator=g), torch.randint(4, 40, (3, 7), generator=g)
    out = label_smoothed_loss(model(src, tgt[:, :-1]), tgt[:, 1:], 0.1, 0)
    optimizer.zero_grad(set_to_none=True)
    out.loss.backward()
    optimizer.step()


def test_paper_optimizer_is_fused_on_cpu_and_matches_the_reference_loop(tiny_model):
    fused_model, ref_model = tiny_model(0).train(), tiny_model(0).train()
    fused = paper_optimizer(fused_model.parameters(), lr=1e-3)
    ref = paper_optimizer(ref_model.parameters(), lr=1e-3, fused=False)
    assert fused.defaults["fused"] and not ref.defaults["fused"]
    for seed in range(3):
        torch.manual_seed(seed)
        _step(fused_model, fused, seed)
        torch.manual_seed(seed)
        _step(ref_model, ref, seed)
    _assert_same_training(fused_model, ref_model)


def _assert_same_training(a, b, atol: float = 1e-5) -> None:
    """Compare the functions and the parameters, except the key biases: their gradient is pure rounding noise
    (softmax ignores a shift shared by all keys), which Adam scales up to +-lr whatever its size."""
    src, tgt = torch.randint(4, 40, (3, 6)), torch.randint(4, 40, (3, 5))
    a.eval(), b.eval()
    with torch.no_grad():
        torch.testing.assert_close(a(src, tgt), b(src, tgt), atol=10 * atol, rtol=1e-4)
    for (name, x), y in zip(a.named_parameters(), b.parameters()):
        if not name.endswith(("w_qkv.bias", "w_kv.bias")):  # w_qkv / w_kv hold the key biases
            torch.testing.assert_close(x, y, atol=atol, rtol=1e-4, msg=name)


def test_paper_optimizer_accepts_param_groups():
    p, q = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(3))
    opt = paper_optimizer([{"params": [p]}, {"params": [q], "weight_decay": 0.0}])
    assert opt.defaults["fused"] and len(opt.param_groups) == 2


def test_bf16_autocast_step_runs_on_cpu(tiny_model):
    model = tiny_model(0).train()
    optimizer = paper_optimizer(model.parameters(), lr=1e-3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(torch.randint(4, 40, (2, 5)), torch.randint(4, 40, (2, 4)))
    assert logits.dtype == torch.bfloat16
    out = label_smoothed_loss(logits, torch.randint(4, 40, (2, 4)), 0.1, 0)
    out.loss.backward()
    optimizer.step()
    assert torch.isfinite(out.loss)


@pytest.mark.slow
def test_compiled_training_step_matches_eager(tiny_model):
    """torch.compile (TrainConfig.compile) on a CPU: needs a C++ compiler; ~1 minute on 2 busy cores."""
    eager, compiled = tiny_model(0, dropout=0.0).train(), tiny_model(0, dropout=0.0).train()
    opt_e = paper_optimizer(eager.parameters(), lr=1e-3)
    opt_c = paper_optimizer(compiled.parameters(), lr=1e-3)
    step_model = torch.compile(compiled)
    for seed in range(2):
        _step(eager, opt_e, seed)
        _step(step_model, opt_c, seed)
    _assert_same_training(compiled, eager, atol=1e-4)
