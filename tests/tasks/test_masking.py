"""MLM batches: 15% selected, 80/10/10, specials never selected, the loss only on the selected positions,
and a <mask> token added to any tokenizer without moving an existing id."""

import pytest
import torch

from scratchformer import ModelConfig
from scratchformer.data.masking import MASK, add_mask_token, collate_mlm, mask_tokens
from scratchformer.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, UNK_ID, load_tokenizer, train_tokenizer
from scratchformer.model.build import EncoderForMLM
from scratchformer.model.heads import with_head
from scratchformer.training.tasks import mlm_logits_and_loss

V = 1000
MASK_ID = V - 1


def random_batch(b: int = 128, length: int = 256, seed: int = 0) -> torch.Tensor:
    """<s> tokens </s> then right padding; a few <unk> and literal <mask> ids sprinkled in."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, MASK_ID, (b, length), generator=g)
    lengths = torch.randint(length // 4, length, (b,), generator=g)
    for i, n in enumerate(lengths.tolist()):
        ids[i, 0], ids[i, n - 1], ids[i, n:] = BOS_ID, EOS_ID, PAD_ID
    ids[torch.rand(ids.shape, generator=g) < 0.01] = UNK_ID
    ids[torch.rand(ids.shape, generator=g) < 0.01] = MASK_ID
    return ids


def test_selection_rate_and_the_80_10_10_split():
    ids = random_batch()
    inputs, labels = mask_tokens(ids, MASK_ID, V, torch.Generator().manual_seed(1))
    maskable = (ids >= 4) & (ids != MASK_ID)
    selected = labels != PAD_ID
    assert maskable.sum() > 15000
    assert abs(selected.sum() / maskable.sum() - 0.15) < 0.01
    n = selected.sum().item()
    masked = (selected & (inputs == MASK_ID)).sum().item() / n
    unchanged = (selected & (inputs == ids)).sum().item() / n  # includes random draws equal to the token (1/995)
    randomised = (selected & (inputs != MASK_ID) & (inputs != ids)).sum().item() / n
    assert abs(masked - 0.8) < 0.02 and abs(unchanged - 0.1) < 0.015 and abs(randomised - 0.1) < 0.015
    assert torch.equal(labels[selected], ids[selected])  # the label is the original token
    drawn = inputs[selected & (inputs != MASK_ID) & (inputs != ids)]
    assert bool((drawn >= 4).all()) and bool((drawn != MASK_ID).all())  # random tokens are ordinary tokens


def test_specials_and_padding_are_never_selected_nor_changed():
    ids = random_batch(seed=2)
    inputs, labels = mask_tokens(ids, MASK_ID, V, torch.Generator().manual_seed(3), prob=0.9)
    special = (ids < 4) | (ids == MASK_ID)
    assert bool((labels[special] == PAD_ID).all())
    assert torch.equal(inputs[special], ids[special])
    unselected = labels == PAD_ID
    assert torch.equal(inputs[unselected], ids[unselected])  # only selected tokens are ever changed


def test_a_tiny_batch_still_predicts_one_token():
    ids = torch.tensor([[BOS_ID, 7, EOS_ID]])
    for seed in range(20):
        _, labels = mask_tokens(ids, MASK_ID, V, torch.Generator().manual_seed(seed))
        assert labels.tolist() == [[PAD_ID, 7, PAD_ID]]


def test_collate_mlm_pads_and_counts_the_selected_tokens():
    seqs = [[BOS_ID, *range(10, 40), EOS_ID], [BOS_ID, 11, 12, EOS_ID]]
    batch = collate_mlm(seqs, MASK_ID, V, torch.Generator().manual_seed(0))
    assert batch["input_ids"].shape == batch["labels"].shape == (2, 32)
    assert bool((batch["input_ids"][1, 4:] == PAD_ID).all())
    assert int(batch["n_tokens"]) == int((batch["labels"] != PAD_ID).sum()) >= 1


def test_the_loss_covers_the_selected_positions_only():
    torch.manual_seed(0)
    config = with_head(ModelConfig.preset("bert-tiny", tgt_vocab_size=V, d_model=32, n_heads=2, d_ff=64,
                                          n_encoder_layers=1, dropout=0.0, attention_dropout=0.0), "mlm",
                       mask_id=MASK_ID)
    model = EncoderForMLM(config).eval()
    batch = collate_mlm(random_batch(b=4, length=64).tolist(), MASK_ID, V, torch.Generator().manual_seed(5))
    logits, target, out = mlm_logits_and_loss(model, batch)
    selected = batch["labels"] != PAD_ID
    assert out.n_tokens == int(selected.sum()) == logits.size(0) == target.numel()
    full = model(batch["input_ids"])  # (B, L, V): every position scored
    assert torch.allclose(logits, full[selected], atol=1e-5)
    by_hand = torch.nn.functional.cross_entropy(full[selected], batch["labels"][selected])
    assert torch.allclose(out.loss, by_hand, atol=1e-5)
    # the gradient reaches the hidden states of selected positions only (through the head)
    hidden = model.base(batch["input_ids"]).detach().requires_grad_(True)
    loss = torch.nn.functional.cross_entropy(model.mlm_head(hidden)[selected], batch["labels"][selected])
    loss.backward()
    touched = hidden.grad.abs().sum(-1) > 0  # (B, L)
    assert torch.equal(touched, selected)


@pytest.mark.parametrize("kind", ["char", "word", "bpe", "unigram"])
def test_add_mask_token_keeps_every_id_and_survives_a_save(kind, tmp_path):
    texts = ["Click OK to close the dialog.", "选择单元格区域。", "Type <mask> here."] * 10
    tok = train_tokenizer(kind, texts, 400 if kind in ("bpe", "unigram") else None)
    before = {t: tok.encode(t) for t in texts}
    size = tok.vocab_size
    mask_id = add_mask_token(tok)
    assert mask_id == size and tok.vocab_size == size + 1  # appended: the last id
    assert add_mask_token(tok) == mask_id  # idempotent
    assert {t: tok.encode(t) for t in texts} == before  # no existing id moved
    assert mask_id not in tok.encode("Type <mask> here.")  # typed text never becomes the special token
    tok.save(tmp_path / "tok.json")
    again = load_tokenizer(tmp_path / "tok.json")
    assert again.vocab_size == size + 1 and again.token_to_id(MASK) == mask_id
    assert {t: again.encode(t) for t in texts} == before
