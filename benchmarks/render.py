#!/usr/bin/env python3
"""Render the figures tables of the pages from results.jsonl: nothing in them is typed by hand.

    .venv/bin/python benchmarks/render.py            # rewrite every page's tables
    .venv/bin/python benchmarks/render.py --check    # exit 1, with a diff, where a page differs from its rendering

A table lives between `<!-- figures:NAME -->` and `<!-- /figures:NAME -->` in a page of PAGES; TABLES[NAME] renders
it from the rows of results.jsonl in the page's language. The rules every table keeps:
- every figure names the CPU it was measured on (model and the SIMD kind that chooses kernels) and its commit
  and date; a row written before results.py recorded commits says "commit not recorded" and the commit that
  first wrote it to results.jsonl;
- rows from different CPU kinds stay separate rows (the same model name with other flags is another kind);
- one cell shows one run: a figure is the newest row of its name per CPU kind, so a range never mixes runs,
  let alone code versions;
- a figure without a row is not shown; the table's last line names the figures that `make bench FIGURE=NAME`
  must measure before they are shown again;
- a row marked "withdrawn" in results.jsonl (with the reason) is never shown; RESULTS.md lists it with the reason;
- a Chinese page speaks Chinese: each figure's name, unit and peer go through FIGURE_ZH, UNIT_ZH and PEER_ZH
  (tests/docs/test_figures.py fails on an English word left in a zh table, so a new figure needs its words there).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from results import PAGES, ROOT, load

Row = dict[str, Any]


# --- what every table says about a row -------------------------------------------------------------------------

def cpu_kind(row: Row) -> tuple[str, tuple[str, ...] | None]:
    simd = row.get("simd")
    return row.get("cpu") or "unknown CPU", tuple(simd) if simd is not None else None


def cpu_label(row: Row, lang: str = "en") -> str:
    cpu, simd = cpu_kind(row)
    if simd is None:
        kind = "未记录指令集" if lang == "zh" else "flags not recorded"
    elif any(f.startswith("amx") for f in simd):
        kind = "AVX-512, AMX" if lang == "en" else "AVX-512、AMX"
    elif "avx512_bf16" in simd:
        kind = "AVX512-BF16, no AMX" if lang == "en" else "AVX512-BF16，无 AMX"
    elif "avx512f" in simd:
        kind = "AVX-512"
    elif "avx2" in simd:
        kind = "AVX2 only" if lang == "en" else "仅 AVX2"
    else:
        kind = "no AVX2" if lang == "en" else "无 AVX2"
    return f"{cpu} ({kind})" if lang == "en" else f"{cpu}（{kind}）"


def measured(row: Row, lang: str = "en") -> str:
    """"2026-12-06, commit 7ccb7c0" or "2026-11-30, commit not recorded (row from f1845d1)"."""
    if row.get("commit"):
        dirty = "+" if row.get("dirty") else ""
        commit = f"commit {row['commit'][:7]}{dirty}" if lang == "en" else f"提交 {row['commit'][:7]}{dirty}"
    else:
        src = row.get("recorded_in") or "?"
        commit = (f"commit not recorded (row from {src})" if lang == "en" else f"未记录提交（该行写入于 {src}）")
    return f"{row.get('date', '?')}, {commit}" if lang == "en" else f"{row.get('date', '?')}，{commit}"


def fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if x.is_integer() and abs(x) < 1e6:
            return f"{x:,.0f}"
        return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"
    return str(x)


def ratio(row: Row) -> str:
    return f"{row['ratio']:.2f}x" if row.get("ratio") is not None else "-"


def live(rows: list[Row]) -> list[Row]:
    return [r for r in rows if not r.get("withdrawn")]


def newest(rows: list[Row], figure: str, peer: str | None = None,
           by: Callable[[Row], tuple] = cpu_kind) -> dict[tuple, Row]:
    """The newest live row of `figure` (and `peer_name`) per CPU kind (or per `by`), in the order they first
    appear."""
    out: dict[tuple, Row] = {}
    for r in live(rows):
        if r.get("figure") == figure and (peer is None or r.get("peer_name") == peer):
            out[by(r)] = r
    return out


def same_run(a: Row, b: Row) -> bool:
    """Two figures shown in one cell must come from one run: same commit (or same unrecorded source) and date."""
    return (a.get("commit"), a.get("recorded_in"), a.get("date")) == (b.get("commit"), b.get("recorded_in"),
                                                                    b.get("date"))


# --- the headline table (README.md, README.zh-CN.md) --------------------------------------------------------------

@dataclass
class Headline:
    name: str  # the figure name: `make bench FIGURE=name` measures it
    what: dict[str, str]  # per language
    keys: list[tuple[str, str | None]]  # (figure, peer_name): the rows the cell needs, all from one run
    cell: Callable[[list[Row], str], str]
    link: str  # the page that explains it, relative to the repository root


def _pair(rows: list[Row], lang: str) -> str:
    return " / ".join(ratio(r) for r in rows)


def _train(rows: list[Row], lang: str) -> str:
    fp32, mfu = rows[0], rows[1]
    return (f"{ratio(fp32)} (fp32, {mfu['ours']:.0%} MFU)" if lang == "en"
            else f"{ratio(fp32)}（fp32，MFU {mfu['ours']:.0%}）")


def _of(row: Row) -> str:
    m = re.search(r"(\d+) of (\d+)", row.get("note", ""))
    return f"{m.group(1)}/{m.group(2)}" if m else fmt(row.get("ours"))


def _identical(rows: list[Row], lang: str) -> str:
    g_ct2, g_ort, b_ct2, b_ort = (_of(r) for r in rows)
    if lang == "zh":
        return f"贪心 {g_ct2} / {g_ort}；束宽 4 {b_ct2} / {b_ort} 句与我们的输出完全相同"
    return f"identical to ours: greedy {g_ct2} / {g_ort}, beam 4 {b_ct2} / {b_ort} sentences"


def _serve(rows: list[Row], lang: str) -> str:
    at16, p99, err64 = rows
    if lang == "zh":
        return (f"吞吐是单客户端的 {at16['ratio']:.1f} 倍，p99 {p99['ours']:.2f} 秒；64 个客户端 {fmt(err64['ours'])} "
                f"错误（负载 {at16['load'][0]:g}）")
    return (f"{at16['ratio']:.1f}x one client's throughput, p99 {p99['ours']:.2f} s; {fmt(err64['ours'])} errors at "
            f"64 (load {at16['load'][0]:g})")


def _tests(rows: list[Row], lang: str) -> str:
    n = fmt(rows[0]["ours"])
    return (f"{n} tests in `tests/robustness/`, each bad input one line, no traceback" if lang == "en"
            else f"`tests/robustness/` 中 {n} 个测试，每个坏输入都是一行错误，没有调用栈回溯")


def _paths(rows: list[Row], lang: str) -> str:
    ratios = " / ".join(ratio(r) for r in rows)
    said = "/".join(map(str, sorted({r["threads"] for r in rows if r.get("threads")})))
    if not said:
        return ratios
    return f"{ratios}（{said} 个线程）" if lang == "zh" else f"{ratios} ({said} thread{'s' if said != '1' else ''})"


def _bleu(rows: list[Row], lang: str) -> str:
    b, c = rows
    pairs = b.get("sentences") or "?"
    if lang == "zh":
        return f"sacreBLEU **{b['ours']:.2f}**，chrF {c['ours']:.2f}（{pairs} 句）"
    return f"sacreBLEU **{b['ours']:.2f}**, chrF {c['ours']:.2f} ({pairs} pairs)"


SHIPPED = "models/en-zh, software test split, beam 1"
HF = "HF MarianMTModel.generate"
CT2 = "CTranslate2 engine (float32)"
HEADLINE = [
    Headline("bleu", {"en": "the shipped model `models/en-zh` (8.03M parameters), its one headline: `scratchformer "
                            "evaluate en-zh --split test --beam 1` (what `make demo` prints), its corpus's (software) "
                            "test split, greedy, its `decoding.json`",
                      "zh": "发布的模型 `models/en-zh`（8.03M 参数）唯一的标题数字：`scratchformer evaluate en-zh "
                            "--split test --beam 1`（`make demo` 打印的就是它），它自己语料（`software`）的"
                            "测试集，贪心，它的 `decoding.json`"},
             [(f"bleu: {SHIPPED}", None), (f"chrf: {SHIPPED}", None)], _bleu, "docs/translation.md"),
    Headline("train", {"en": "training speed against `torch.nn.Transformer` (same weights, loss, Adam)",
                       "zh": "训练速度对比 `torch.nn.Transformer`（同样的权重、损失、Adam）"},
             [("train: tokens/s, fp32, paper-base 6+6, 32 x ~16 tokens", "torch.nn.Transformer"),
              ("train: model-FLOP utilisation, fp32", "torch.nn.Transformer")], _train, "docs/performance.md"),
    Headline("train", {"en": "training with bf16 autocast against fp32 (ours)",
                       "zh": "bf16 autocast 训练对比 fp32（我们自己的）"},
             [("train: tokens/s, ours bf16 autocast vs ours fp32", "ours fp32")], _pair, "docs/performance.md"),
    Headline("decode", {"en": "decoding against Hugging Face `generate`, fp32 greedy, batch 1 / 32, 64 tokens",
                        "zh": "解码对比 Hugging Face `generate`，fp32 贪心，批 1 / 32，64 个词元"},
             [(f"decode fp32: greedy, batch {b}, 64 new tokens", HF) for b in (1, 32)],
             _pair, "docs/performance.md"),
    *[Headline("decode_paths", {"en": f"our decoder, {what}, against CTranslate2 float32 (patience 2), same "
                                      "sentences and threads: greedy batch 1 / 32, beam 4 batch 1 / 32",
                                "zh": f"我们的解码器，{zh}，对比 CTranslate2 float32（`patience=2`），同样的句子和"
                                      "线程数：贪心批 1 / 32，束宽 4 批 1 / 32"},
                [(f"decode paths: {w}, batch {b}, {name} vs CTranslate2 float32", CT2) for w in ("greedy", "beam 4")
                 for b in (1, 32)], _paths, "docs/performance.md")
      for name, what, zh in (("default", "by default (no flag: `--step auto`, the captured step where its package "
                              "is cached and measured faster; `--dtype auto`, bf16 where the CPU has AVX512-BF16 or "
                              "AMX and it measured faster)",
                              "默认（不加参数：`--step auto`，缓存了包且测得更快时用捕获的解码步；`--dtype auto`，CPU "
                              "有 AVX512-BF16 或 AMX 且测得更快时用 bf16）"),
                             ("default fp32", "fp32 (`--dtype fp32`, `--step auto`: the captured step where its "
                              "package is cached and measured faster)",
                              "fp32（`--dtype fp32`，`--step auto`：缓存了包且测得更快时用捕获的解码步）"),
                             ("bf16", "bf16 (`--dtype bf16`; `auto` takes it where the CPU has AVX512-BF16 or AMX and "
                              "it measured faster)", "bf16（`--dtype bf16`；CPU 有 AVX512-BF16 或 AMX 且测得更快时 "
                              "`auto` 会选它）"))],
    Headline("decode_paths", {"en": "CTranslate2 / ONNX Runtime exports of `models/en-zh` as it was at the row's "
                                    "commit, on its test sentences (how many: in the figure)",
                              "zh": "`models/en-zh`（该行提交时的模型）导出到 CTranslate2 / ONNX Runtime，"
                                    "它的测试句（句数见数字一栏）"},
             [(f"engines: {w}, identical outputs ({e})", None) for w in ("greedy", "beam 4")
              for e in ("ctranslate2", "onnxruntime")], _identical, "docs/export.md"),
    Headline("serve", {"en": "`serve` with 16 clients (beam 4, batching on)",
                       "zh": "`serve`，16 个并发客户端（束宽 4，开启合批）"},
             [("serve batching on, 16 client(s): sentences/s", "1 client"),
              ("serve batching on, 16 client(s): p99 latency", None),
              ("serve batching on, 64 client(s): errors", None)], _serve, "docs/serving.md"),
    Headline("tests", {"en": "hostile input", "zh": "恶意输入"},
             [("tests: collected in tests/robustness", None)], _tests, "docs/robustness.md"),
]


def _link(page: str, lang: str) -> str:
    if lang == "zh" and page.startswith("docs/"):
        page = "docs/zh/" + page[len("docs/"):]
    return f"[{page}]({page})"


def cells(rows: list[Row], keys: list[tuple[str, str | None]]) -> list[list[Row]]:
    """Per CPU kind that has every key, the rows of one run; a kind whose rows come from several runs is left out
    (a cell never mixes runs)."""
    per_key = [newest(rows, fig, peer) for fig, peer in keys]
    out = []
    for kind in per_key[0]:
        if all(kind in k for k in per_key):
            group = [k[kind] for k in per_key]
            if all(same_run(group[0], r) for r in group):
                out.append(group)
    return out


def _missing(names: list[str], lang: str) -> str:
    cmd = ", ".join(f"`make bench FIGURE={n}`" for n in names)
    if lang == "zh":
        return f"还没有结果行、因此不显示的数字：{cmd}（`benchmarks/results.jsonl` 有了它们的行之后会重新出现在表中）。"
    return (f"Not shown until `benchmarks/results.jsonl` has their rows: {cmd}.")


def render_headline(rows: list[Row], lang: str) -> list[str]:
    head = {"zh": "| 内容 | 数字 | CPU | 测量于 | 在哪里测的 |"}.get(lang, "| what | figure | CPU | measured | page |")
    lines, missing = [head, "|---|---|---|---|---|"], []
    for h in HEADLINE:
        groups = cells(rows, h.keys)
        if not groups and h.name not in missing:
            missing.append(h.name)
        for group in groups:
            lines.append(f"| {h.what[lang]} | {h.cell(group, lang)} | {cpu_label(group[0], lang)} | "
                         f"{measured(group[0], lang)} | {_link(h.link, lang)} |")
    if missing:
        lines += ["", _missing(missing, lang)]
    return lines


# --- the Chinese pages' words for a row: figure names, units and peers (the English is results.jsonl's own) ---------

FIGURE_ZH = [  # (English fragment, Chinese), applied in order to a figure's name; ", " and ": " become "，" and "："
    (r"^train: ", "训练："), (r"^decode fp32: ", "fp32 解码："), (r"^decode int8: ", "int8 解码："),
    (r"^decode paths: ", "解码路径："), (r"^engines: ", "引擎："), (r"^decode floor: ", "解码下限："),
    (r"^decode overhead: ", "解码开销："), (r"^padding: ", "填充："), (r"^quality: ", "质量："),
    (r"^memory: ", "内存："),
    (r"model-FLOP utilisation", "模型 FLOP 利用率"), (r"tokens/s", "词元/秒"),
    (r"(\d+) x ~(\d+) tokens", r"\1 句 × 约 \2 个词元"), (r"(\d+) new tokens", r"\1 个新词元"),
    (r"(\d+) tokens", r"\1 个词元"), (r"real-token fraction", "真实词元占比"),
    (r"ours (\S+) autocast vs ours (\S+)", r"我们的 \1 autocast 对比我们的 \2"),
    (r"ours torch\.compile vs ours eager", "我们的 torch.compile 对比我们的 eager（不编译）"),
    (r"KV cache vs none", "KV 缓存对比无缓存"),
    (r"batch-1 step, fp32 paper-base", "批 1 的一步，fp32 paper-base"),
    (r"weight GEMVs alone vs our whole step", "仅权重 GEMV 对比我们的整步"),
    (r"batch-1 step at d_model 64 \(arithmetic ~0\), ours vs HF",
     "批 1 的一步，d_model 64（算术量约为 0），我们对比 HF"),
    (r"training step", "训练的一步"), (r"decoding (fp32|int8)", r"\1 解码"),
    (r"default fp32", "默认 fp32"), (r"default vs", "默认 vs"), (r"greedy", "贪心"), (r"beam (\d+)", r"束宽 \1"),
    (r"batch (\d+)", r"批 \1"),
    (r" vs ", " 对比 "),
]
UNIT_ZH = {"target tok/s": "目标端词元/秒", "tok/s": "词元/秒",
           "fraction of fp32 matmul rate": "占 fp32 矩阵乘速率的比例", "sentences/s": "句/秒", "ms/token": "毫秒/词元",
           "fraction": "占比", "MiB peak RSS growth": "MiB 峰值 RSS 增长",
           "s": "秒", "s/sentence": "秒/句", "% of sentences": "% 的句子", "tests": "个测试", "requests": "个请求"}
PEER_ZH = {"CTranslate2 engine (float32)": "CTranslate2 引擎（float32）", "ours fp32": "我们的 fp32",
           "ours eager": "我们的 eager", "ours float32": "我们的 float32", "ours without cache": "我们的，无缓存",
           "ours, whole step (greedy_decode)": "我们的整步（greedy_decode）",
           "random batches, same mean size": "随机分批，平均大小相同", "ours, whole lines": "我们的，整行",
           "in-process": "进程内", "HF generate": "HF `generate`", "1 client": "1 个客户端",
           "CTranslate2 engine (float32), whole CLI process": "CTranslate2 引擎（float32），整个 CLI 进程",
           "onnxruntime engine (float32)": "onnxruntime 引擎（float32）"}


def figure_label(figure: str, lang: str) -> str:
    """A figure's name as a page in `lang` shows it: results.jsonl's English, or its Chinese through FIGURE_ZH."""
    if lang != "zh":
        return figure
    for en, zh in FIGURE_ZH:
        figure = re.sub(en, zh, figure)
    return figure.replace(", ", "，").replace(": ", "：")


def unit_label(unit: str, lang: str) -> str:
    return UNIT_ZH.get(unit, unit) if lang == "zh" else unit


def peer_label(peer: str, lang: str) -> str:
    return PEER_ZH.get(peer, peer) if lang == "zh" else peer


# --- docs/performance.md (+ zh): ours against the peers, per CPU kind -------------------------------------------------

PERFORMANCE = [  # (figure, peer_name): None takes any peer (the figure has one)
    ("train: tokens/s, fp32, paper-base 6+6, 32 x ~16 tokens", "torch.nn.Transformer"),
    ("train: model-FLOP utilisation, fp32", "torch.nn.Transformer"),
    ("train: tokens/s, ours bf16 autocast vs ours fp32", "ours fp32"),
    ("train: tokens/s, ours torch.compile vs ours eager", "ours eager"),
    *[(f"decode fp32: {w}, batch {b}, 64 new tokens", HF) for w in ("greedy", "beam 4") for b in (1, 32)],
    *[(f"decode paths: {w}, batch {b}, {name} vs CTranslate2 float32", CT2) for w in ("greedy", "beam 4")
      for b in (1, 32) for name in ("eager fp32", "default", "default fp32", "bf16", "ct2 int8")],
    ("decode floor: batch-1 step, fp32 paper-base: weight GEMVs alone vs our whole step", None),
    ("decode overhead: batch-1 step at d_model 64 (arithmetic ~0), ours vs HF", None),
    ("decode fp32: KV cache vs none, greedy, batch 1, 256 new tokens", None),
    ("padding: real-token fraction, en-zh, max_tokens 4096", None),
    ("memory: training step, paper-base, 32 x ~16 tokens, Adam", None),
    ("memory: decoding fp32, beam 4, batch 32, 64 tokens", "HF generate"),
    ("memory: decoding fp32, beam 4, batch 32, 64 tokens", "CTranslate2 float32"),
]


def _met(row: Row, lang: str) -> str:
    if row.get("met") is None:
        return row.get("target") or "-"
    word = {True: "met", False: "**missed**"} if lang == "en" else {True: "达到", False: "**未达到**"}
    return f"{row['target']}, {word[row['met']]}" if lang == "en" else f"{row['target']}，{word[row['met']]}"


def table_rows(rows: list[Row], keys: list[tuple[str, str | None]], lang: str) -> tuple[list[str], list[str]]:
    lines, missing = [], []
    for fig, peer in keys:
        found = newest(rows, fig, peer)
        if not found:
            missing.append(fig)
        for r in found.values():
            peer_cell = (f"{fmt(r.get('peer'))} {peer_label(r['peer_name'], lang)}" if r.get("peer_name")
                         else fmt(r.get("peer")))
            lines.append(f"| {figure_label(fig, lang)} | {fmt(r.get('ours'))} {unit_label(r.get('unit', ''), lang)} | "
                         f"{peer_cell} | {ratio(r)} | "
                         f"{_met(r, lang)} | {cpu_label(r, lang)} | {measured(r, lang)} |")
    return lines, missing


# Why our own int8 rows (`--int8`: decode int8, decode paths int8, quality int8) are no longer shown; they stay in
# results.jsonl (RESULTS.md lists them).
NO_INT8 = {"en": "Our own int8 (`--int8`, dynamic quantisation in the torch engine) is gone and no longer shown: it "
                 "ran 0.39-1.16x CTranslate2 float32 where CTranslate2's int8 ran 1.59-2.30x; int8 is "
                 "`--engine ctranslate2 --dtype int8` (its rows stay in `benchmarks/results.jsonl`).",
           "zh": "我们自己的 int8（`--int8`，torch 引擎里的动态量化）已删除，不再显示：它只有 CTranslate2 float32 的 "
                 "0.39-1.16 倍，而 CTranslate2 的 int8 是 1.59-2.30 倍；int8 请用 `--engine ctranslate2 --dtype int8`"
                 "（它的结果行仍保留在 `benchmarks/results.jsonl` 中）。"}


def render_performance(rows: list[Row], lang: str) -> list[str]:
    head = ("| 数字 | 我们 | 对手 | 我们 / 对手 | 目标 | CPU | 测量于 |" if lang == "zh"
            else "| figure | ours | peer | ours / peer | target | CPU | measured |")
    lines, missing = table_rows(rows, PERFORMANCE, lang)
    names = sorted({_name_of(rows, f) for f in missing})
    return [head, "| --- | ---: | --- | ---: | --- | --- | --- |", *lines, "", NO_INT8[lang]] + (
        ["", _missing(names, lang)] if names else [])


def _name_of(rows: list[Row], figure: str) -> str:
    """The run.py name whose script measures `figure` now."""
    prefix = figure.split(":")[0]
    return {"decode paths": "decode_paths", "decode floor": "decode", "decode overhead": "decode",
            "decode fp32": "decode", "engines": "decode_paths"}.get(prefix, prefix.split()[0])


# --- docs/performance.md (+ zh): every decoding cell of bench_decode_paths.py, one table per CPU kind ---------------

CELLS = [("greedy", 1), ("greedy", 32), ("beam 4", 1), ("beam 4", 32)]
CANDIDATES = {"eager fp32": "eager fp32 (`--step eager`)", "default": "default (no flag, warm cache)",
              "default fp32": "default fp32 (`--step auto`, warm cache)",
              "bf16": "bf16 (`--dtype bf16`)", "ct2 float32": "CTranslate2 float32", "ct2 int8": "CTranslate2 int8"}
CANDIDATES_ZH = {"eager fp32": "即时 fp32（`--step eager`）", "default": "默认（不加参数，缓存已热）",
                 "default fp32": "默认 fp32（`--step auto`，缓存已热）",
                 "bf16": "bf16（`--dtype bf16`）", "ct2 float32": "CTranslate2 float32", "ct2 int8": "CTranslate2 int8"}


def kind_and_threads(row: Row) -> tuple:
    """A decode-cells table's key: a 1-thread and a 2-thread run are two tables, not one superseding the other
    (CTranslate2 ran slower with 2 threads at batch 1 than with 1)."""
    return (*cpu_kind(row), row.get("threads"))


def render_decode_cells(rows: list[Row], lang: str) -> list[str]:
    """Per CPU kind: each candidate's sentences/s against CTranslate2 float32 in the four cells, with its BLEU and
    its outputs identical to ours eager fp32; the CPU, the commits, dates and loads of the rows under the table."""
    found = {(c, w, b): newest(rows, f"decode paths: {w}, batch {b}, {c} vs CTranslate2 float32", CT2,
                               by=kind_and_threads)
             for c in CANDIDATES for w, b in CELLS}
    kinds = list(dict.fromkeys(k for f in found.values() for k in f))
    zh = lang == "zh"
    names = CANDIDATES_ZH if zh else CANDIDATES
    heads = [f"{'贪心' if w == 'greedy' and zh else '束 4' if zh else w} b{b}" for w, b in CELLS]
    out: list[str] = []
    for kind in kinds:
        some = [f[kind] for f in found.values() if kind in f]
        loads: dict[str, list[float]] = {}
        for r in some:
            loads.setdefault(measured(r, lang), []).append((r.get("load") or [0.0])[0])
        comma, semi = ("，", "；") if zh else (", ", "; ")
        runs = [f"{m}{comma}{'负载' if zh else 'load'} {min(v):.1f}-{max(v):.1f}" for m, v in sorted(loads.items())]
        threads = kind[-1]
        said = (f"{threads} 个线程（两边相同）" if zh
                else f"{threads} thread{'s' if threads != 1 else ''} (both sides)")
        out += [("以下各格相对 CTranslate2 float32（句/秒之比；BLEU；与即时 fp32 相同的输出），" if zh else
                 "Each cell: sentences/s against CTranslate2 float32; BLEU; outputs identical to ours eager fp32. ")
                + f"{cpu_label(some[0], lang)}{comma}{said}{semi}" + semi.join(runs), "",
                f"| {'候选' if zh else 'candidate'} | " + " | ".join(heads) + " |",
                "| --- |" + " ---: |" * len(CELLS)]
        for c in CANDIDATES:
            cells = []
            for w, b in CELLS:
                r = found[(c, w, b)].get(kind)
                cells.append("-" if r is None else f"{ratio(r)}{semi}{r['bleu']:.2f}{semi}"
                             f"{r.get('identical_to_eager_fp32', '-')}")
            if any(x != "-" for x in cells):
                out.append(f"| {names[c]} | " + " | ".join(cells) + " |")
        out.append("")
    return out[:-1] or [_missing(["decode_paths"], lang)]


# --- RESULTS.md: every live figure, newest per CPU kind; the withdrawn rows with their reasons ----------------------

def render_results(rows: list[Row], lang: str = "en") -> list[str]:
    keys: list[tuple[str, str]] = []
    for r in live(rows):
        k = (r["figure"], r.get("peer_name", ""))
        if k not in keys:
            keys.append(k)
    lines = ["| figure | unit | ours | peer | ours / peer | target | met? | CPU | measured | load (1 min) | note |",
             "| --- | --- | ---: | --- | ---: | --- | --- | --- | --- | ---: | --- |"]
    for fig, peer in keys:
        for r in newest(rows, fig, peer).values():
            met = {True: "yes", False: "**no**", None: "-"}[r.get("met")]
            peer_cell = f"{fmt(r.get('peer'))} ({peer})" if peer else fmt(r.get("peer"))
            load = (r.get("load_before") or r.get("load") or [None])[0]
            note = re.sub(r";? ?measured \d{4}-\d\d-\d\d on [^;]*$", "", r.get("note", "")).replace("|", "\\|")
            lines.append(f"| {fig.replace('|', chr(92) + '|')} | {r.get('unit', '')} | {fmt(r.get('ours'))} | "
                         f"{peer_cell} | {ratio(r)} | {r.get('target') or '-'} | {met} | {cpu_label(r)} | "
                         f"{measured(r)} | {fmt(load)} | {note} |")
    withdrawn = [r for r in rows if r.get("withdrawn")]
    if withdrawn:
        lines += ["", "Withdrawn rows (kept in results.jsonl, never shown in a table):", ""]
        lines += [f"- {r['figure']} against {r.get('peer_name') or '-'}: {ratio(r)}, {cpu_label(r)}, {measured(r)}. "
                  f"Why: {r['withdrawn']}" for r in withdrawn]
    return lines


TABLES: dict[str, Callable[[list[Row], str], list[str]]] = {
    "headline": render_headline, "performance": render_performance, "results": render_results,
    "decode-cells": render_decode_cells}
MARK = re.compile(r"(<!-- figures:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /figures:(?P=name) -->)", re.S)


def render_page(text: str, rows: list[Row], lang: str) -> str:
    def one(m: re.Match) -> str:
        name = m.group("name")
        if name not in TABLES:
            raise SystemExit(f"render.py: no table named {name!r} (known: {', '.join(TABLES)})")
        return m.group(1) + "\n".join(TABLES[name](rows, lang)) + "\n" + m.group(4)

    return MARK.sub(one, text)


def check(root: Path = ROOT, rows: list[Row] | None = None) -> list[str]:
    """A unified diff per page whose tables differ from their rendering ([] when every page agrees)."""
    rows = load() if rows is None else rows
    diffs = []
    for page, lang in PAGES.items():
        path = root / page
        text = path.read_text(encoding="utf-8")
        want = render_page(text, rows, lang)
        if want != text:
            diffs.append("".join(difflib.unified_diff(text.splitlines(True), want.splitlines(True), page,
                                                      f"{page} (rendered)")))
    return diffs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 where a page differs")
    args = p.parse_args(argv)
    if args.check:
        diffs = check()
        sys.stdout.write("".join(diffs))
        return 1 if diffs else 0
    rows = load()
    for page, lang in PAGES.items():
        path = ROOT / page
        text = path.read_text(encoding="utf-8")
        new = render_page(text, rows, lang)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"render.py: rewrote {page}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
