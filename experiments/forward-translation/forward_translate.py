"""Self-training data for the software corpus: the English the allowed manuals have but their Chinese editions
leave untranslated, translated by a model (forward translation; He et al. 2020, "Revisiting Self-Training for
Neural Sequence Generation").

    mkdir -p runs/st
    FT=experiments/forward-translation/forward_translate.py
    python $FT extract --cache /tmp/swsrc --out runs/st/mono.en
    python $FT translate models/en-zh runs/st/mono.en --out runs/st/synthetic.tsv
    python $FT mix runs/st/synthetic.tsv --out runs/st/mix.tsv [--times 1]

`extract` reads the same pinned Debian packages as scripts/build_software_corpus.py (GIMP, the Debian FAQ,
maint-guide, Debian Edu; most of the Chinese GIMP manual is the English one, 15,001 blocks) and keeps every
English block that the corpus's filters would keep on the English side and whose text, or any of its
sentences, is in no pair of the bundle: not in train (those have a real translation), and not in any valid or
test file (exact or normalised), so that no held-out sentence is ever seen, even untranslated. Deterministic:
pages in sorted order, blocks in page order, first occurrence kept.

`translate` decodes them with a run's own decoding (decoding.json) and keeps an output only if the pair passes
the corpus's own filters (build_corpus.keep_pair: Chinese present, length, Han-per-letter ratio, no copied
English sentence), which drops most hallucinations and loops. `mix` writes the fine-tuning data: the software
corpus's train split with the shipped model's --upsample (copy_twins.finetune_data), then the synthetic pairs
(--times repeats them). A bad path, run or file is one line (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parents[1] / "scripts"))  # the corpus builders
sys.path.insert(0, str(_HERE.parent / "copy-twins"))  # the fine-tuning data
import build_corpus as bc  # noqa: E402  (scripts/)
import build_software_corpus as sw  # noqa: E402
import copy_twins  # noqa: E402  (experiments/copy-twins/)

from scratchformer.errors import ScratchformerError  # noqa: E402

DOCBOOK = ("gimp", "debian-faq", "maint-guide", "debian-edu")


def bundle_keys() -> set[str]:
    """Exact and normalised keys of every English text of the bundle and of its sentences (all splits)."""
    from scratchformer.data.corpus import load_pairs

    keys: set[str] = set()
    for split in ("train", "valid", "test"):
        for en, _ in load_pairs("software", split):
            keys |= sw._sentence_keys(en, "en")
    return keys


def english_ok(en: str) -> bool:
    """The corpus's filters, English side: no markup or code, no command line, letters, 3-60 words."""
    if not en or bc.BAD.search(en) or sw.COMMAND.search(en) or sw.LEFTOVER.search(en):
        return False
    n = len(en.split())
    return len(sw.LATIN_WORD.findall(en)) >= 3 and n <= bc.LIMITS["zh"].max_en_words


def extract(cache: Path) -> list[tuple[str, str]]:
    """(source, English) of every new English block of the DocBook sources, in order (see the module doc)."""
    taken = bundle_keys()
    out: list[tuple[str, str]] = []
    for src in sw.SOURCES:
        if src.name not in DOCBOOK:
            continue
        files = sw.fetch(src, cache)
        pages = bc.deb_files(files[0], src.en_dir, src.en_suffix)
        for rel in sorted(pages):
            if "/" in rel:
                continue
            for tag, raw in sw.html_blocks(pages[rel].decode("utf-8")):
                en = sw.FOOTNOTE.sub("", bc.clean(raw)) if tag not in sw.CODE_TAGS else ""
                if not english_ok(en):
                    continue
                keys = sw._sentence_keys(en, "en")
                if taken.intersection(keys):
                    continue
                taken |= keys
                out.append((src.name, en))
    return out


def translate(run_dir: Path, lines: list[str], batch_size: int) -> list[tuple[str, str]]:
    """(English, Chinese) for each line whose translation passes the corpus's filters (filter_pair), in order."""
    from scratchformer.engines import Translator
    from scratchformer.runs import load_run

    run = load_run(run_dir)
    translator = Translator(run, run.decoding.pick(engine="torch", beam=4, batch_size=batch_size))
    kept: list[tuple[str, str]] = []
    for i in range(0, len(lines), batch_size):
        chunk = lines[i : i + batch_size]
        outs = translator.translate(chunk)
        kept += [(en, zh) for en, zh in zip(chunk, outs, strict=True) if sw.filter_pair(en, zh) is None]
        print(f"{i + len(chunk)}/{len(lines)} translated, {len(kept)} kept", file=sys.stderr, flush=True)
    return kept


def positive(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


def run(args: argparse.Namespace) -> None:
    """One subcommand, its output written to args.out."""
    if args.cmd == "extract":
        rows = extract(args.cache)
        args.out.write_text("".join(en + "\n" for _, en in rows), encoding="utf-8")
        counts = {name: sum(1 for s, _ in rows if s == name) for name in DOCBOOK}
        print(f"{len(rows)} English blocks {counts} -> {args.out}", file=sys.stderr)
    elif args.cmd == "translate":
        lines = [x for x in args.lines.read_text(encoding="utf-8").split("\n") if x]
        pairs = translate(args.run_dir, lines, args.batch_size)
        args.out.write_text("".join(f"{en}\t{zh}\n" for en, zh in pairs), encoding="utf-8")
        print(f"{len(pairs)} of {len(lines)} kept -> {args.out}", file=sys.stderr)
    else:
        from scratchformer.data.corpus import read_tsv

        real, synthetic = copy_twins.finetune_data(), read_tsv(args.synthetic)
        rows = real + synthetic * args.times
        args.out.write_text("".join(f"{en}\t{zh}\n" for en, zh in rows), encoding="utf-8")
        print(f"{len(real)} real + {len(synthetic)} x {args.times} synthetic -> {args.out}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract", help="the new English blocks, one a line")
    e.add_argument("--cache", type=Path, required=True, help="folder of the packages (downloaded into it if missing)")
    e.add_argument("--out", type=Path, required=True)
    t = sub.add_parser("translate", help="translate them with a run; the kept pairs as TSV")
    t.add_argument("run_dir", type=Path)
    t.add_argument("lines", type=Path)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--batch-size", type=positive, default=64)
    m = sub.add_parser("mix", help="software train with the shipped --upsample, then the synthetic pairs")
    m.add_argument("synthetic", type=Path)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--times", type=positive, default=1)
    args = ap.parse_args(argv)
    if args.out.is_dir() or not args.out.parent.is_dir():
        ap.exit(2, f"{ap.prog}: error: {args.out}: give a file path in an existing folder\n")
    try:
        run(args)
    except (ScratchformerError, OSError) as e:
        ap.exit(2, f"{ap.prog}: error: {e}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
