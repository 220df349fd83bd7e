"""The model card (README.md) of a Hugging Face export: YAML metadata (license, language, datasets, the measured
BLEU / chrF) and how to load the folder, what the conversion changed and how decoding differs from ours.

Figures come from the run itself: README.json's "test" block (`scripts/ship_checkpoint.py` writes it: BLEU and
chrF of greedy and beam search on the test split); a run without it gets its last validation BLEU from
metrics.jsonl, or no metrics. The license is the training corpus's when its NOTICE names exactly one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from scratchformer.config.decoding import DecodingOptions, length_penalty_for
from scratchformer.data.corpus import CORPORA_DIR, bundled_corpora, corpus_languages
from scratchformer.runs import Run
from scratchformer.runs.metrics import read_records
from scratchformer.runs.names import DECODING_FILE
from scratchformer.runs.run import read_readme, setting_name

SPDX = {"MPL-2.0": "mpl-2.0", "MIT": "mit", "Apache-2.0": "apache-2.0", "CC-BY-4.0": "cc-by-4.0",
        "CC-BY-SA-4.0": "cc-by-sa-4.0", "GPL-2.0+": "gpl-2.0", "GPL-3.0": "gpl-3.0", "GFDL-1.2": "gfdl"}
PIPELINES = {"encoder-decoder": ("AutoModelForSeq2SeqLM", "translation"),
             "decoder": ("AutoModelForCausalLM", "text-generation"), "encoder": ("AutoModel", "feature-extraction")}


def _corpus(run: Run) -> tuple[str | None, str | None, str]:
    """(corpus name, its one license in Hub spelling or None, a one-line description) of the run's training data."""
    name = run.train_config.corpus if run.train_config is not None else None
    if not isinstance(name, str) or name not in bundled_corpora():
        return name, None, f"corpus {name!r}" if name else "unknown training data"
    notice = CORPORA_DIR / name / "NOTICE"
    text = notice.read_text(encoding="utf-8") if notice.is_file() else ""
    found = {SPDX[m] for m in re.findall(r"[A-Za-z][\w.+-]*\d[\w.+]*", text) if m in SPDX}
    first = next((line.strip() for line in text.splitlines() if line.strip()), f"bundled corpus {name}")
    return name, (found.pop() if len(found) == 1 else None), first


def _languages(corpus: str | None) -> list[str]:
    """["en", "zh"] from a corpus named "en-zh" or a bundled one of known languages (data.corpus.corpus_languages)."""
    return list(corpus_languages(corpus) or ())


def measured(run: Run) -> list[dict[str, Any]]:
    """[{type, value, name, split}] of the run's measured figures (README.json test block, else last valid BLEU)."""
    tests = read_readme(run.path).get("test", {})
    out = []
    for setting, figures in tests.items() if isinstance(tests, dict) else ():
        if not isinstance(figures, dict):  # a damaged block is no figure (as evaluation/report.py reads it)
            continue
        how = setting_name(setting)
        n = figures.get("sentences")
        for key, label in (("bleu", "BLEU"), ("chrf", "chrF")):
            if isinstance(figures.get(key), (int, float)):
                out.append({"type": key, "value": figures[key], "split": "test",
                            "name": f"{label}, {how}, sacrebleu" + (f", {n} sentences" if n else "")})
    if not out:
        valid = [r for r in read_records(run.path) if r.get("kind") == "valid" and "bleu" in r]
        if valid:
            out.append({"type": "bleu", "value": valid[-1]["bleu"], "split": "validation",
                        "name": f"BLEU, greedy, validation at step {valid[-1].get('step')}"})
    return out


def _yaml(run: Run, arch: str) -> list[str]:
    corpus, license_, _ = _corpus(run)
    figures = measured(run)
    lines = ["---", f"license: {license_ or 'other'}", "library_name: transformers",
             f"pipeline_tag: {PIPELINES[arch][1]}", "tags: [scratchformer]"]
    langs = _languages(corpus)
    if langs:
        lines += ["language:", *(f"- {x}" for x in langs)]
    if corpus:
        lines += ["datasets:", f"- {json.dumps(corpus)}"]
    if figures:
        task = "translation" if arch == "encoder-decoder" else PIPELINES[arch][1]
        lines += ["metrics:", *(f"- {t}" for t in dict.fromkeys(f["type"] for f in figures)),
                  "model-index:", f"- name: {json.dumps(run.path.name)}", "  results:"]
        for split in dict.fromkeys(f["split"] for f in figures):
            data = json.dumps(corpus or "unknown")
            lines += [f"  - task: {{type: {task}}}", f"    dataset: {{name: {data}, type: {data}, split: {split}}}",
                      "    metrics:"]
            lines += [f"    - {{type: {f['type']}, value: {f['value']}, name: {json.dumps(f['name'])}}}"
                      for f in figures if f["split"] == split]
    return [*lines, "---"]


# Measured on the shipped models/en-zh (decoding.json alpha 1.5), its first 100 test sentences: how many outputs equal
# scratchformer's own (greedy / beam 4). "route": the README's translate(), which gives the client scratchformer's
# length budget and ranks the beam's finished hypotheses by GNMT; "plain": the client's call with the folder's
# settings alone. Printed by tests/clients/test_clients.py's slow tests (its docstring has the command).
# Tried on the way (generate, beam 4, ranked by GNMT): without our budget 99 (the one left runs into it);
# length_penalty 1.0: 98, 0: 93, 1.5: 96 (the n-best then misses ours); early_stopping="never" at 1.25: 92 (the search
# runs on and finds what GNMT prefers after ours stopped). translate_batch: one call per batch instead of per source
# length 97, patience 2: 97.
PARITY = {"generate": {"route": (100, 100), "plain": (100, 94)},  # transformers 5.25 and 4.57.6, Optimum 2.1 alike
          "translate_batch": {"route": (100, 98), "plain": (100, 93)}}


def write_decoding(run: Run, out: Path) -> None:
    """decoding.json in an exported folder: the run's decoding settings in full (DecodingOptions' fields, as the run
    folder's decoding.json holds them), which the README's snippet reads its alpha from."""
    (out / DECODING_FILE).write_text(json.dumps(run.decoding.to_dict(), indent=2, ensure_ascii=False) + "\n",
                                     encoding="utf-8")


def hf_route(auto: str, module: str, targets: bool) -> list[str]:
    """The README's Python for an encoder-decoder folder that transformers (`auto`, from `module`) loads: a
    translate(texts, beam) with scratchformer's length budget and GNMT's ranking of the n-best."""
    out_tok = ('out_tok = AutoTokenizer.from_pretrained(DIR + "/target_tokenizer")  # the target side\'s vocabulary'
               if targets else "out_tok = tok  # one vocabulary for both sides")
    return ["```python", "import json", "", "import torch",
            *([f"from {module} import {auto}", "from transformers import AutoTokenizer"] if module != "transformers"
              else [f"from transformers import {auto}, AutoTokenizer"]), "",
            'DIR = "."  # this folder', f"model = {auto}.from_pretrained(DIR)",
            "tok = AutoTokenizer.from_pretrained(DIR)", out_tok,
            "gen = model.generation_config  # the run's beam, length_penalty, max_length and ids",
            'alpha = json.load(open(DIR + "/decoding.json"))["alpha"]  # the run\'s GNMT length penalty', "", "",
            "# scratchformer's search: a budget of source tokens + 50, the beam's finished hypotheses ranked by GNMT",
            "def translate(texts, beam=gen.num_beams):",
            '    batch = tok(texts, return_tensors="pt", padding=True, truncation=True)',
            "    longest = min(batch.input_ids.shape[1] + 51, gen.max_length)  # the start symbol, source tokens + 50",
            "    out = model.generate(**batch, num_beams=beam, num_return_sequences=beam, max_length=longest,",
            "                         output_scores=True, return_dict_in_generate=True)",
            "    ys = out.sequences[:, 1:]  # without the start symbol",
            "    if beam > 1:  # rank the n-best by GNMT: logP / ((5 + |Y|) / 6)^alpha, |Y| counting </s>",
            "        n = (ys != gen.eos_token_id).cumprod(1).sum(1) + (ys == gen.eos_token_id).any(1)",
            "        logp = out.sequences_scores * n**gen.length_penalty  # Hugging Face's logP / |Y|^lp undone",
            "        best = (logp / ((5 + n) / 6) ** alpha).view(len(texts), beam).argmax(1)",
            "        ys = ys.view(len(texts), beam, -1)[torch.arange(len(texts)), best]",
            "    return out_tok.batch_decode(ys, skip_special_tokens=True)", "", "",
            'print(translate(["Click OK to print the table."]))  # beam=1: greedy', "```"]


def parity_note(client: str, plain: str) -> str:
    """What the README's route and the client's plain call give on the shipped model (PARITY)."""
    route, bare = PARITY[client]["route"], PARITY[client]["plain"]
    return (f"On the shipped models/en-zh (alpha 1.5, the first 100 test sentences) translate() gives "
            f"scratchformer's own output for {route[0]} greedy and {route[1]} beam 4; {plain} alone, with this "
            f"folder's settings, for {bare[0]} and {bare[1]}.")


def _usage(arch: str, targets: bool) -> list[str]:
    auto = PIPELINES[arch][0]
    tail = ["", "The tokenizers are plain `tokenizers` files; without AutoTokenizer load them as",
            '`PreTrainedTokenizerFast(tokenizer_file="DIR/tokenizer.json", bos_token="<s>", eos_token="</s>", '
            'pad_token="<pad>", unk_token="<unk>", split_special_tokens=True)`'
            + (" (and the same with `DIR/target_tokenizer/tokenizer.json` for the outputs)." if targets else ".")]
    if arch == "encoder-decoder":
        return [*hf_route(auto, "transformers", targets), "",
                "`model.generate(**batch)` alone decodes with generation_config.json (beam 4, the length penalty "
                "below): the same greedy outputs, and mostly, not always, the same beam outputs. translate() makes "
                "`generate` search as scratchformer does: it returns the beam's finished hypotheses "
                "(num_return_sequences = num_beams), undoes Hugging Face's `|Y|^length_penalty` on their scores and "
                "picks the best by GNMT's penalty with the run's alpha (decoding.json, this folder), within "
                "scratchformer's length budget. " + parity_note("generate", "`generate(**batch)`")
                + " In transformers 4.42-4.57 and 5.x alike; `translation` pipelines are gone in 5.x.", *tail]
    lines = ["```python", f"from transformers import {auto}, AutoTokenizer", "",
             f'model = {auto}.from_pretrained("DIR")', 'tok = AutoTokenizer.from_pretrained("DIR")']
    if arch == "decoder":
        lines += ['ids = model.generate(**tok(["Open the"], return_tensors="pt"), max_new_tokens=20)',
                  "print(tok.batch_decode(ids, skip_special_tokens=True))"]
    else:
        lines += ['hidden = model(**tok(["Open the file."], return_tensors="pt")).last_hidden_state  # (1, L, D)']
    return [*lines, "```", *tail]


def _notes(arch: str, folded: bool, hf: dict[str, Any], gen: dict[str, Any] | None,
           decoding: DecodingOptions, padded: bool = False) -> list[str]:
    if arch != "encoder-decoder":
        return ["- Special tokens as in training: `<s>`=1, `</s>`=2, `<pad>`=0, `<unk>`=3; the tokenizer adds them "
                "as the run's batching did."]
    lp, alpha = (gen["length_penalty"] if gen else None), decoding.alpha
    return [
        f"- **Length penalty.** Hugging Face ranks finished beams by `logP / |Y|^length_penalty`; scratchformer by "
        f"GNMT's `logP / ((5 + |Y|) / 6)^alpha` (alpha {alpha}, the run's decoding.json, copied into this folder), |Y| "
        f"counting `</s>` in both. The two are different functions; `length_penalty={lp}` has the same slope in "
        f"log |Y| as GNMT's alpha {alpha} at |Y| = 25 (alpha * |Y| / (5 + |Y|)). Both searches expand the same beams "
        "(the best by log-probability) and finish the same hypotheses, so ranking the returned ones by GNMT (the "
        "snippet above) gives scratchformer's choice; what can still differ is a hypothesis one search finishes "
        "after the other has stopped. Greedy search is the same algorithm on both sides (the same token ids).",
        *text_level_note(decoding, "`generate`"),
        "- **Maximum length.** Ours: source tokens + 50, at most the model's positions. generation_config.json can "
        f"only hold one `max_length` ({gen['max_length'] if gen else '?'}, the start symbol included): translate() "
        "passes its own (the batch's longest source + 50 + the start symbol) to follow our rule.",
        "- **Positions.** " + ("The run used the paper's interleaved sinusoids (sin, cos, sin, cos, ...); Marian "
                               "computes them concatenated ([sin ... | cos ...]). The two differ by a fixed "
                               "permutation of the model dimensions, folded exactly into the weights (embeddings, "
                               "every projection that reads or writes the residual stream, LayerNorms): the "
                               "exported model computes the same function." if folded else
                               "Concatenated sinusoids ([sin ... | cos ...]), as Marian computes them."),
        f"- **Start symbol.** The decoder starts from decoder_start_token_id={hf.get('decoder_start_token_id')} "
        "(`<s>` in scratchformer's vocabularies, where OPUS-MT models start from `<pad>`); `<pad>` is never "
        "generated (bad_words_ids), as in ours.",
        *([f"- **Vocabularies.** The run's source and target vocabularies differ in size; transformers 4.x sizes "
           "Marian's decoder embedding by vocab_size whatever decoder_vocab_size says, so both tables are padded to "
           f"{hf.get('vocab_size')} rows (zeros) and the extra output ids get a bias of -1e4: never generated, and the "
           "logits of the real ids are unchanged. The folder loads in transformers 4.42-4.57 and 5.x alike (4.40-4.41 "
           "load it too, but read a literal `<s>` in a text as the special token)."]
          if padded else []),
        f"- scale_embedding={hf.get('scale_embedding')} (x sqrt(d_model)), final_logits_bias = our generator's bias, "
        f"activation_function={hf.get('activation_function')!r}, post-norm (Marian has no normalize_before), "
        f"share_encoder_decoder_embeddings={hf.get('share_encoder_decoder_embeddings')}, "
        f"tie_word_embeddings={hf.get('tie_word_embeddings')}."]


def model_card(run: Run, hf: dict[str, Any], gen: dict[str, Any] | None, tokenizer_dirs: list[str]) -> str:
    """README.md of the exported folder: YAML metadata, then usage and conversion notes."""
    arch = run.model_config.arch
    _, license_, about = _corpus(run)
    figures = measured(run)
    lines = [*_yaml(run, arch), "", f"# {run.path.name}", "",
             f"A {hf['model_type']} model ({hf['architectures'][0]}) exported by `scratchformer export "
             f"{run.path.name} --format hf` from a model trained with scratchformer, a hand-written Transformer.", "",
             f"Training data: {about}." + ("" if license_ else " License: see the training corpus's terms."), "",
             "## Use", "", *_usage(arch, "target_tokenizer" in tokenizer_dirs), "", "## Conversion and decoding",
             "", *_notes(arch, run.model_config.positions == "sinusoidal", hf, gen, run.decoding,
                        run.model_config.src_vocab_size != run.model_config.tgt_vocab_size), ""]
    if figures:
        lines += ["## Measured (by scratchformer, on this model's own decoder)", "", "| metric | value |", "|---|---|",
                  *(f"| {f['name']} ({f['split']}) | {f['value']} |" for f in figures), ""]
    return "\n".join(lines)


# What generate / translate_batch leave out of the run's decoding, measured on the shipped models/en-zh (decoding.json:
# alpha 1.5, split_sentences, repair_copies): sacreBLEU (zh) on the whole test split (1,000 sentences), beam 4;
# PYTHONPATH=src python tests/clients/measure_text_level.py prints them (greedy: 47.1 with, 45.0 without; on the
# first 300 sentences alone beam 4 gives 46.5 and 43.0).
TEXT_LEVEL_LOSS = {"sentences": 1000, "full": 49.5, "search_only": 47.4, "greedy": (47.1, 45.0)}


def text_level_note(decoding: DecodingOptions, client: str) -> list[str]:
    """One paragraph: the run's text-level steps `client` cannot do, and what its output loses (measured)."""
    steps = decoding.text_level()
    if not steps:
        return []
    m = TEXT_LEVEL_LOSS
    figure = (f" Measured on the shipped models/en-zh (its whole test split, {m['sentences']:,} sentences, beam 4): "
              f"BLEU {m['full']} with them, {m['search_only']} without, so {client} alone loses "
              f"{round(m['full'] - m['search_only'], 1)} BLEU there (greedy: {m['greedy'][0]} and "
              f"{m['greedy'][1]})." if m["full"] is not None else "")
    return [f"- **Text-level decoding.** The run's decoding.json also turns on {' and '.join(steps)}: scratchformer "
            "cuts each paragraph into its sentences and translates them one by one (split_sentences) and puts back "
            f"names and numbers the model miscopied from the source (repair_copies). {client} does neither: split "
            "the input into sentences yourself, or translate with scratchformer, which does both on every engine."
            + figure]


def ct2_route(targets: bool) -> list[str]:
    """The README's Python for a CTranslate2 folder: a translate(texts, beam) with scratchformer's length budget
    (one translate_batch per source length: it takes one budget) and GNMT's ranking of the finished hypotheses."""
    tgt = '"/target_tokenizer/tokenizer.json"' if targets else '"/tokenizer.json"'
    return ["```python", "import json", "", "import ctranslate2", "from tokenizers import Tokenizer", "",
            'DIR = "."  # this folder', "translator = ctranslate2.Translator(DIR)",
            'src = Tokenizer.from_file(DIR + "/tokenizer.json")',
            'src.encode_special_tokens = True  # a literal "<s>" in the text stays text (not kept in the file)',
            f"tgt = Tokenizer.from_file(DIR + {tgt})",
            'options = json.load(open(DIR + "/translate_options.json"))  # the run\'s beam, length_penalty, patience',
            'alpha = json.load(open(DIR + "/decoding.json"))["alpha"]  # the run\'s GNMT length penalty', "", "",
            "def gnmt(hypothesis):  # undo logP / |Y|^length_penalty, rank by logP / ((5 + |Y|) / 6)^alpha",
            "    tokens, score = hypothesis  # tokens end with </s> where it finished: |Y| counts it",
            '    return score * len(tokens) ** options["length_penalty"] / ((5 + len(tokens)) / 6) ** alpha', "", "",
            "# scratchformer's search: a budget of source tokens + 50 each, the finished hypotheses ranked by GNMT",
            'def translate(texts, beam=options["beam_size"]):',
            "    tokens = [src.encode(t).tokens for t in texts]",
            "    outputs = [None] * len(texts)",
            "    for n in set(map(len, tokens)):  # one call per source length: translate_batch takes one budget",
            "        rows = [i for i, t in enumerate(tokens) if len(t) == n]",
            '        budget = min(options["max_decoding_length"], n + 51)  # + </s> + 50',
            '        found = translator.translate_batch([tokens[i] for i in rows], **{**options, "beam_size": beam,',
            '                                           "max_decoding_length": budget},',
            '                                           num_hypotheses=round(beam * options["patience"]),',
            "                                           return_scores=True, return_end_token=True)",
            "        for i, r in zip(rows, found):",
            "            best = max(zip(r.hypotheses, r.scores), key=gnmt)[0]",
            "            outputs[i] = tgt.decode([tgt.token_to_id(t) for t in best])  # </s> and specials skipped",
            "    return outputs", "", "",
            'print(translate(["Click OK to print the table."]))  # beam=1: greedy', "```"]


def client_readme(run: Run, fmt: str, tokenizer_dirs: list[str], options: dict[str, Any] | None = None) -> str:
    """README.md of an ONNX or CTranslate2 export: how to use it without scratchformer, the decoding settings it
    carries, and what the client cannot do."""
    d, name = run.decoding, run.path.name
    target = "target_tokenizer" in tokenizer_dirs
    lp = length_penalty_for(d.alpha)
    if fmt == "onnx":
        title, client = "ONNX (Optimum's seq2seq layout)", "`generate`"
        use = [*hf_route("ORTModelForSeq2SeqLM", "optimum.onnxruntime", target), "",
               "`pip install 'optimum[onnxruntime]'`. generation_config.json carries the run's settings: num_beams "
               f"{d.beam}, `length_penalty={lp}` (Hugging Face's `|Y|^length_penalty` with the slope of GNMT's alpha "
               f"{d.alpha} at |Y| = 25), max_length {run.model_config.max_positions + 1} (the start symbol included), "
               "the "
               "start, end and pad ids; `<pad>` is never generated; decoding.json is the run's own. "
               "`model.generate(**batch)` alone gives the same greedy outputs as scratchformer and mostly, not "
               "always, the same beam outputs (the two length penalties are different functions). translate() "
               "searches as scratchformer does: the beam's finished hypotheses (num_return_sequences = num_beams), "
               "Hugging Face's `|Y|^length_penalty` undone on their scores, the best by GNMT's penalty with the "
               "run's alpha, within scratchformer's length budget (source tokens + 50). "
               + parity_note("generate", "`generate(**batch)`")]
    else:
        title, client = "CTranslate2", "`translate_batch`"
        use = [*ct2_route(target), "",
               "**Tokenizing without scratchformer.** CTranslate2 speaks token strings. `tokenizer.json` is a plain "
               "`tokenizers` file of the source side: `Tokenizer.from_file(...).encode(text).tokens` gives the "
               "pieces the model reads (it adds no `</s>`: CTranslate2 appends it itself, config.json's "
               "add_source_eos). "
               + ("`target_tokenizer/tokenizer.json` is the target side's" if target else "The same file is the "
                  "target side's")
               + ": map each output token to its id with `token_to_id` and `decode` the ids (specials skipped), "
               "which also undoes the byte-level pieces. scratchformer's own tokenizer files (a wrapper around "
               "the same `tokenizers` JSON) are not needed.", "",
               "translate_options.json carries the run's settings as translate_batch's keywords: "
               f"{json.dumps(options)}; decoding.json is the run's own. CTranslate2 ranks finished beams by "
               f"`logP / |Y|^length_penalty`, scratchformer by GNMT's `logP / ((5 + |Y|) / 6)^alpha` (alpha "
               f"{d.alpha}); `length_penalty={lp}` has the same slope at |Y| = 25. translate() asks for the finished "
               "hypotheses (num_hypotheses = beam x patience; patience 3 lets CTranslate2 finish more of them before "
               "it stops), undoes CTranslate2's normalisation and picks the best by GNMT, each sentence within "
               "scratchformer's budget (source tokens + 50, at most the model's max_positions). "
               + parity_note("translate_batch", "`translate_batch(tokens, **options)`")
               + " The beam sentences that still differ are hypotheses one search finishes after the other has "
               "stopped (CTranslate2's rule and ours are different heuristics for alpha > 0)."]
    lines = [f"# {name}: {title}", "", f"Exported by `scratchformer export {name} --format {fmt}`; it loads "
             "without scratchformer.", "", "## Use", "", *use, "", "## What the client does not do", "",
             *(text_level_note(d, client) or ["- Nothing: the run's decoding.json turns on no text-level step."]),
             f"- Beam {d.beam} as the export's default; ensembles (decoding.json `ensemble`) are scratchformer's own.",
             ""]
    return "\n".join(lines)
