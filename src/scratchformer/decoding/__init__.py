"""Decoding on the KV cache, a face only: greedy, beam search (GNMT length penalty), sampling. Text in, text out
is engines.Translator's (a run, or a model in memory: Translator.from_model), over pipeline.py.

    spec.py       Search                         what a search is asked to do: beam, alpha, budget, n-best, ...
    common.py     Seq2SeqSteps, length_limits, length_penalty, NEG_INF   what every decoder shares
    greedy.py     greedy_decode                  argmax each step, finished sentences drop out of the batch
    beam.py       beam_search, beam_search_core  fairseq-style beam with the GNMT length penalty
    sampling.py   sample, Sampling               temperature / top-k / top-p for GPT-like models
    pipeline.py   run_pipeline, batches, chunks  the steps of every translation: sentences, ids, token-budget
                                                 batches, a backend's search, detokenise, copy repair
    search.py     TorchSearch                    our own search as the pipeline's backend (ensembles live here)
    constraints.py  Constraints                  no-repeat n-grams, repetition penalty, forced target prefixes
    results.py    Translation, Hyp               n-best hypotheses with scores, tokens, alignments (--format jsonl)
    sentences.py  split_sentences                paragraphs translated sentence by sentence (--split-sentences)
    copies.py     repair_copies                  names and numbers the model miscopied, put back (--repair-copies)
    alignment.py  align, pharaoh                 word alignments from cross-attention (Pharaoh i-j)
    ensemble.py   model_steps, EnsembleSteps     several models as one step function: their mean probability
"""

from scratchformer.decoding.beam import Hypothesis, beam_search, beam_search_core
from scratchformer.decoding.common import length_penalty
from scratchformer.decoding.constraints import Constraints
from scratchformer.decoding.greedy import GreedyOutput, greedy_decode
from scratchformer.decoding.results import Hyp, Translation
from scratchformer.decoding.sampling import Sampling, pick_next, sample
from scratchformer.decoding.sentences import split_sentences
from scratchformer.decoding.spec import Search

__all__ = ["Constraints", "GreedyOutput", "Hyp", "Hypothesis", "Sampling", "Search", "Translation", "beam_search",
           "beam_search_core", "greedy_decode", "length_penalty", "pick_next", "sample", "split_sentences"]
