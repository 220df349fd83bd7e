"""The figures the pages show are rendered from benchmarks/results.jsonl, and every row there can be re-proven: the
README's headline table, docs/performance.md (+ zh) and RESULTS.md must equal their rendering (benchmarks/render.py),
and each row carries its command, commit (or says it has none), CPU, load, versions and date (benchmarks/results.py)."""

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import render  # noqa: E402
import results  # noqa: E402
import run  # noqa: E402

XEON = {"cpu": "Intel Xeon", "simd": ["avx2", "avx512f", "amx_tile"]}
EPYC = {"cpu": "AMD EPYC", "simd": ["avx2"]}
TRAIN = "train: tokens/s, fp32, paper-base 6+6, 32 x ~16 tokens"
MFU = "train: model-FLOP utilisation, fp32"


def row(figure, ratio, peer="torch.nn.Transformer", commit="a" * 40, date="2026-12-06", **kw):
    return {"figure": figure, "name": "train", "unit": "x", "ours": ratio, "peer": 1.0, "peer_name": peer,
            "ratio": ratio, "target": None, "met": None, "note": "", "commit": commit, "dirty": False, "date": date,
            "load_before": [1.0, 1.0, 1.0], **XEON, **kw}


def test_every_page_equals_its_rendering():
    diffs = render.check()
    assert diffs == [], "a page differs from benchmarks/render.py's rendering (run it):\n" + "".join(diffs)


def test_a_hand_edited_figure_fails_the_check(tmp_path):
    for page in render.PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, tmp_path / page)
    assert render.check(tmp_path) == []
    readme = tmp_path / "README.md"
    text = readme.read_text(encoding="utf-8")
    assert "| 1.05x (fp32" in text
    readme.write_text(text.replace("| 1.05x (fp32", "| 1.15x (fp32", 1), encoding="utf-8")
    diffs = render.check(tmp_path)
    assert len(diffs) == 1 and "-| training speed" in diffs[0] and "1.15x" in diffs[0] and "+| training" in diffs[0]


def test_every_page_has_its_tables():
    for page in render.PAGES:
        names = [m.group("name") for m in render.MARK.finditer((ROOT / page).read_text(encoding="utf-8"))]
        assert names and set(names) <= set(render.TABLES), (page, names)


def test_rows_of_two_cpu_kinds_stay_separate_rows():
    rows = [row(TRAIN, 1.05), row(MFU, 0.54), row(TRAIN, 1.01, **EPYC), row(MFU, 0.82, **EPYC),
            row(TRAIN, 0.9, cpu="AMD EPYC", simd=["avx2", "avx512f", "avx512_bf16"]),
            row(MFU, 0.7, cpu="AMD EPYC", simd=["avx2", "avx512f", "avx512_bf16"])]
    lines = [line for line in render.render_headline(rows, "en") if line.startswith("| training speed")]
    assert [line.split(" | ")[1] for line in lines] == ["1.05x (fp32, 54% MFU)", "1.01x (fp32, 82% MFU)",
                                                        "0.90x (fp32, 70% MFU)"]
    assert [line.split(" | ")[2] for line in lines] == [
        "Intel Xeon (AVX-512, AMX)", "AMD EPYC (AVX2 only)", "AMD EPYC (AVX512-BF16, no AMX)"]


def test_a_cell_shows_the_newest_run_and_never_mixes_runs():
    new = "b" * 40
    rows = [row(TRAIN, 1.67), row(MFU, 0.5), row(TRAIN, 1.13, commit=new)]
    # the newest training row has no MFU row of its own run: the cell is not built from two runs
    assert not [line for line in render.render_headline(rows, "en") if line.startswith("| training speed")]
    lines = [line for line in render.render_headline(rows + [row(MFU, 0.6, commit=new)], "en")
             if line.startswith("| training speed")]
    assert len(lines) == 1 and "1.13x (fp32, 60% MFU)" in lines[0] and "commit bbbbbbb" in lines[0]
    assert "1.67" not in lines[0]


def test_an_old_row_shows_its_date_and_where_it_came_from():
    old = row(TRAIN, 1.05, commit=None, date="2026-11-30", recorded_in="f1845d1")
    assert render.measured(old) == "2026-11-30, commit not recorded (row from f1845d1)"
    assert render.measured(row(TRAIN, 1.0, dirty=True)) == "2026-12-06, commit aaaaaaa+"


def test_a_figure_without_rows_is_named_not_shown():
    bf16 = row("train: tokens/s, ours bf16 autocast vs ours fp32", 2.9, peer="ours fp32")
    lines = render.render_headline([row(TRAIN, 1.05), row(MFU, 0.5), bf16], "en")
    assert lines[-1].startswith("Not shown until") and "`make bench FIGURE=decode_paths`" in lines[-1]
    assert "`make bench FIGURE=train`" not in lines[-1]


def test_a_withdrawn_row_is_listed_with_its_reason_and_never_shown():
    rows = [row(TRAIN, 1.05, withdrawn="measured something else"), row(MFU, 0.5)]
    assert not [line for line in render.render_headline(rows, "en") if line.startswith("| training speed")]
    text = "\n".join(render.render_results(rows))
    assert "Why: measured something else" in text and f"| {TRAIN} |" not in text


def test_results_md_no_longer_contradicts_itself():
    """RESULTS.md showed greedy batch 1 against CTranslate2 as 1.07x and as 0.32x, two measurements of different
    things (a random model forced to 64 tokens, and real sentences); the first is withdrawn, with its reason: its
    rows are listed under "Withdrawn rows" and never in the table."""
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    table, withdrawn = text[text.index("<!-- figures:results -->"):text.index("Withdrawn rows")], \
        text[text.index("Withdrawn rows"):]
    forced = [line for line in table.splitlines() if line.startswith("| decode fp32:") and "CTranslate2" in line]
    assert forced == [], forced
    assert "decode fp32: greedy, batch 1, 64 new tokens" in withdrawn


def test_every_row_can_be_traced():
    rows = results.load()
    assert rows
    for r in rows:
        assert run.resolve([r["name"]])[0] in run.FIGURES and r["date"] and r["cpu"], r["figure"]
        assert r["commit"] or r["commit_note"].startswith("not recorded"), r["figure"]
        if r["commit"]:  # written by results.py: everything the issue asks a row to record
            assert {"command", "dirty", "simd", "load_before", "load_after", "versions"} <= set(r), r["figure"]
            assert r["command"][1] == f"benchmarks/bench_{r['name']}.py"


def test_every_named_figure_has_a_script_and_every_table_names_a_figure():
    for name in run.FIGURES:
        assert (ROOT / "benchmarks" / f"bench_{name}.py").is_file(), name
    assert {h.name for h in render.HEADLINE} <= set(run.FIGURES)
    assert run.resolve(["floor,paths"]) == ["decode", "decode_paths"]
    with pytest.raises(SystemExit, match="no figure named 'nope'"):
        run.resolve(["nope"])


def test_a_benchmark_script_records_and_a_test_or_a_smoke_run_does_not(tmp_path, monkeypatch):
    assert not results.recording()  # this process is pytest: benchlib.emit writes nothing
    assert results.recording(["/x/benchmarks/bench_padding.py", "--threads", "1"])
    assert not results.recording(["/x/benchmarks/bench_padding.py", "--quick"])
    assert not results.recording(["/x/benchmarks/benchlib.py"])
    out = tmp_path / "results.jsonl"
    monkeypatch.setattr(results, "_PROVENANCE", {})
    written = results.append({"figure": "tests: collected in x", "ours": 3.0}, path=out,
                             argv=[str(ROOT / "benchmarks" / "bench_tests.py"), "--threads", "1"])
    assert json.loads(out.read_text(encoding="utf-8")) == written
    assert written["name"] == "tests" and written["command"] == ["python", "benchmarks/bench_tests.py", "--threads",
                                                                  "1"]
    assert len(written["commit"]) == 40 and isinstance(written["dirty"], bool)
    assert written["cpu"] and isinstance(written["simd"], list) and "torch" in written["versions"]
    assert len(written["load_before"]) == len(written["load_after"]) == 3 and written["date"]


# names, versions and units a Chinese table keeps as they are: products, libraries, code, number formats
KEPT = {"fp32", "bf16", "int8", "float32", "paper-base", "autocast", "torch.compile", "eager", "greedy_decode",
        "ctranslate2", "ct2", "onnxruntime", "torch.nn.transformer", "gemv", "flop", "kv", "hf", "d_model",
        "marianmtmodel.generate", "hugging", "face", "max_tokens", "en-zh", "adam", "bleu", "sacrebleu", "chrf", "mib",
        "rss", "intel(r", "xeon(r", "processor", "amd", "epyc", "avx2", "avx-512", "amx", "avx512-bf16", "mfu",
        "cpu", "cli", "p99", "onnx", "runtime", "ms", "torch"}


def english_words(line: str) -> list[str]:
    """The words of a rendered Chinese line that are neither code (`...`), a link target, a name kept as is (KEPT),
    a commit, a number with its unit nor a bare letter: what a Chinese reader would meet as English."""
    line = re.sub(r"`[^`]*`|\[[^\]]*\]\([^)]*\)", " ", line)
    words = [w.strip(".,()") for w in re.findall(r"[\w][\w./()+-]*", line, re.A)]
    return [w for w in words if re.search(r"[A-Za-z]", w) and w.lower() not in KEPT
            and not re.fullmatch(r"[0-9a-f]{7}\+?|[A-Za-z]\d*|\d[\d.,]*[A-Za-z%]?", w)]


def test_the_chinese_tables_speak_chinese():
    """docs/zh/performance.md's and README.zh-CN.md's rendered tables name each figure, unit and peer in Chinese
    (they showed results.jsonl's English row labels); the English pages keep results.jsonl's own words."""
    rows = results.load()
    for table in (render.render_performance, render.render_headline, render.render_decode_cells):
        english = {w for line in table(rows, "zh") for w in english_words(line)}
        assert not english, (table.__name__, sorted(english))
    en = "\n".join(render.render_performance(rows, "en"))
    assert "| train: tokens/s, fp32, paper-base 6+6, 32 x ~16 tokens |" in en
    zh = "\n".join(render.render_performance(rows, "zh"))
    assert "| 训练：词元/秒，fp32，paper-base 6+6，32 句 × 约 16 个词元 |" in zh and "train:" not in zh


def test_the_decode_cells_table_has_one_table_per_cpu_kind_and_marks_a_missing_cell():
    """docs/performance.md's matrix of bench_decode_paths.py: candidates x the four cells, each cell its ratio to
    CTranslate2 float32, BLEU and identical share, from that CPU kind's rows only; a cell without a row shows "-"."""
    def cell(name, w, b, r, cpu):
        return row(f"decode paths: {w}, batch {b}, {name} vs CTranslate2 float32", r, peer=render.CT2, bleu=40.0,
                   identical_to_eager_fp32="30/30", **cpu)
    rows = [cell(n, w, b, 1.5, XEON) for n in ("default fp32", "bf16") for w, b in render.CELLS]
    rows += [cell("default fp32", "greedy", 1, 0.75, EPYC)]
    lines = render.render_decode_cells(rows, "en")
    assert sum(line.startswith("| candidate |") for line in lines) == 2
    xeon, epyc = "\n".join(lines).split("AMD EPYC")
    assert xeon.count(" | 1.50x; 40.00; 30/30" * 4 + " |") == 2 and "0.75x" not in xeon
    assert "| default fp32 (`--step auto`, warm cache) | 0.75x; 40.00; 30/30 | - | - | - |" in epyc
    assert "bf16" not in epyc.split("| --- |")[-1]  # a candidate without rows on that CPU has no line


def test_a_figure_without_a_translation_would_show_as_english():
    assert english_words("| decode fp32: greedy, batch 1 | 230 tok/s |") == ["decode", "greedy", "batch", "tok/s"]
    label = render.figure_label("decode fp32: greedy, batch 1, 64 new tokens", "zh")
    assert label == "fp32 解码：贪心，批 1，64 个新词元"


def test_every_shown_figure_names_the_script_that_measures_it_now():
    """A figure on a page whose script was folded into another (bench_engines.py, bench_decode_floor.py) names the
    one that measures it now: its `make bench FIGURE=NAME` runs it."""
    for fig, _ in render.PERFORMANCE:
        assert render._name_of([], fig) in run.FIGURES, fig
    assert "decode_paths" in {h.name for h in render.HEADLINE if any("engines:" in fig for fig, _ in h.keys)}
    assert (ROOT / "benchmarks" / "bench_engines.py").exists() is False
    assert run.resolve(["engines"]) == ["decode_paths"]


def test_our_dropped_int8_is_neither_measured_nor_shown_and_the_page_says_why():
    """The torch engine's int8 is gone (CTranslate2's int8 is the int8 path): no benchmark imports it, no table shows
    its rows (they stay in results.jsonl), and the performance table says why in one line."""
    scripts = [p for p in (ROOT / "benchmarks").glob("*.py") if "quantize" in p.read_text(encoding="utf-8")]
    assert scripts == []
    rows = results.load()
    assert any(r["figure"] == "decode paths: greedy, batch 1, int8 vs CTranslate2 float32" for r in rows)
    for lang in ("en", "zh"):
        text = "\n".join(render.render_performance(rows, lang) + render.render_headline(rows, lang))
        assert ", int8 vs CTranslate2" not in text and "decode int8:" not in text and "quality: BLEU, int8" not in text
        assert ("ct2 int8 vs CTranslate2 float32" if lang == "en" else "ct2 int8 对比 CTranslate2 float32") in text
        assert sum("--engine ctranslate2 --dtype int8" in line for line in text.splitlines()) == 1


def test_the_bench_extra_installs_what_the_benchmarks_run_and_nothing_else():
    """`make bench` installs `.[bench]`: the engines bench_decode_paths.py checks for parity (the export extra), serve's
    packages, and the peers the benchmarks import; no package that nothing uses (psutil was one)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]

    def names(reqs):
        return {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in reqs}

    bench = names(extras["bench"])
    imported = {m.group(1).lower() for p in (ROOT / "benchmarks").glob("*.py")
                for m in re.finditer(r"^\s*(?:import|from) (\w+)", p.read_text(encoding="utf-8"), re.M)}
    assert names(extras["export"]) <= bench
    assert bench <= names(extras["export"]) | names(extras["serve"]) | imported


def test_the_pages_a_run_renders_do_not_make_the_next_figure_dirty(monkeypatch):
    """run.py renders the pages after each call: a second call measuring the same commit is not "+", while any other
    change (src/ above all) still is. results.OUTPUTS must be render.PAGES and results.jsonl."""
    assert results.OUTPUTS == {*render.PAGES, "benchmarks/results.jsonl"}

    def fake(status):
        def run(cmd, **kw):
            out = "a" * 40 + "\n" if "rev-parse" in cmd else status
            return type("Done", (), {"returncode": 0, "stdout": out})()
        return run

    monkeypatch.setattr(results.subprocess, "run", fake(" M README.md\n M benchmarks/results.jsonl\n"))
    assert results.git_commit() == ("a" * 40, False)
    monkeypatch.setattr(results.subprocess, "run", fake(" M README.md\n M src/scratchformer/decoding/captured.py\n"))
    assert results.git_commit() == ("a" * 40, True)
