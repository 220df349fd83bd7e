"""decoding/copies.py: spans the model miscopied from the source are put back, and nothing else changes."""

import re

from hypothesis import given
from hypothesis import strategies as st

from scratchformer.decoding.copies import COPYABLE, repair_copies, repair_quotes


def test_a_miscopied_file_name_number_and_option_are_put_back():
    assert repair_copies("Rename it to gentoo.1.xml", "重命名为 gentoo.xmlent") == "重命名为 gentoo.1.xml"
    assert repair_copies("See Figure 16.223.", "见图 16.23。") == "见图 16.223。"
    assert repair_copies("Use the dlocate tool.", "使用 dlat 工具。") == "使用 dlocate 工具。"
    assert repair_copies("Run it with --show-overrides.", "用 -show-overide 运行。") == "用 --show-overrides 运行。"


def test_what_the_source_has_and_what_is_unlike_it_stay():
    assert repair_copies("Open gimp.", "打开 gimp。") == "打开 gimp。"  # an exact copy
    assert repair_copies("Close gimp.", "关闭 Debian。") == "关闭 Debian。"  # nothing like it in the source
    assert repair_copies("Open the file.", "打开 x86 文件。") == "打开 x86 文件。"
    assert repair_copies("打开文件", "打开 gimpp") == "打开 gimpp"  # a source without spans


def test_an_output_without_cjk_is_left_alone():
    """A German or English output: every word is Latin there, and 'Haus' is not a miscopied 'house'."""
    assert repair_copies("the house", "das Haus") == "das Haus"


def test_each_source_span_is_used_as_often_as_the_source_has_it():
    assert repair_copies("the Dialog", "Dialogen 对话框 Dialogs") == "Dialog 对话框 Dialogs"
    assert repair_copies("Dialog and Dialog", "Dialogen 和 Dialogs") == "Dialog 和 Dialog"
    assert repair_copies("Dialog", "Dialog 和 Dialogs") == "Dialog 和 Dialogs"  # the exact copy took it


def test_the_threshold_decides():
    assert repair_copies("gentoo", "运行 gent", threshold=0.9) == "运行 gent"
    assert repair_copies("gentoo", "运行 gent", threshold=0.5) == "运行 gentoo"


def test_repair_pairs_each_source_with_its_output():
    assert [repair_copies(s, o) for s, o in zip(["a dlocate", "x"], ["用 dlat", "好"])] == ["用 dlocate", "好"]


words = st.text(alphabet="abcdefgh0123456789.-/", min_size=1, max_size=8)


@given(st.lists(words, min_size=0, max_size=5), st.lists(st.one_of(words, st.sampled_from(["中文", "，", "。", " "])),
                                                           max_size=10))
def test_only_spans_change_and_each_changed_one_becomes_a_source_span(source_words, output_parts):
    source, output = " ".join(source_words), "".join(output_parts) + "的"
    repaired = repair_copies(source, output)
    skeleton = [COPYABLE.sub("#", t) for t in (output, repaired)]
    assert skeleton[0] == skeleton[1]  # CJK text, punctuation and spaces are untouched
    before, after = COPYABLE.findall(output), COPYABLE.findall(repaired)
    assert len(before) == len(after)
    spans = set(COPYABLE.findall(source))
    assert all(a == b or a in spans for b, a in zip(before, after))


def test_short_words_neither_change_nor_stand_in():
    assert repair_copies("Press Esc to exit.", "按 E 键退出。") == "按 E 键退出。"  # one character stays
    assert repair_copies("You can see it.", "你 cn 看到。") == "你 cn 看到。"  # "can" is translated, not copied
    assert repair_copies("Shift+Right Click", "Shift+右键") == "Shift+右键"  # a part of a source span
    assert repair_copies("the markdown file", "Markdown 文件") == "Markdown 文件"  # another case


def test_a_miscopied_quoted_name_is_put_back_whole():
    # "Histrion" is a word, not a broken span, so only the quoted name as a whole finds "Export Histogram"
    assert repair_copies("Section 8.53, “Export Histogram”", "第 8.53 节 “Histrion”") == "第 8.53 节 “Export Histogram”"
    assert repair_copies("The “Alien Map” Dialog", "“Alien Dialog” Dialog") == "“Alien Dialog” Dialog"  # no CJK
    assert repair_copies("Figure 16.219. The “Alien Map” Dialog", "图 16.219. “Alien Dialog” Dialog") \
        == "图 16.219. “Alien Map” Dialog"
    assert repair_quotes('Values: "off", "messages", "verbose".', "接受“打开”：“magessss”，接受“forsess”。") \
        == "接受“打开”：“messages”，接受“verbose”。"  # a translated name (CJK inside) stays, and uses up nothing


def test_quoted_names_keep_the_outputs_marks_and_spaces_and_right_ones_stay():
    assert repair_quotes("See “ Paths ” and “Stroke Path”.", "见「 Pths 」和“Stroke Path”。") \
        == "见「 Paths 」和“Stroke Path”。"
    assert repair_quotes("“Set Colormap”", "“set colormap”的") == "“set colormap”的"  # another case is a copy
    # two names left: a quoted part like neither stays
    assert repair_quotes("“Alpha” or “Beta”", "“Zzzz” 的") == "“Zzzz” 的"
    assert repair_quotes("“Alpha”", "“Zzzz” 的") == "“Alpha” 的"  # the only one left stands in


def test_a_formula_in_quotes_is_not_a_quoted_name():
    """「=IMTAN("4-3i")」 holds a quote mark: neither it nor the mismatched 「..." is a quotation."""
    out = '「=IMTAN("4-3i")」返回 0.0006。'
    assert repair_quotes('=IMTAN("4-3i") returns 0.0049.', out) == out


names = st.text(alphabet="abcdef XY", min_size=1, max_size=8).filter(str.strip)


@given(st.lists(names, min_size=1, max_size=3), st.lists(st.one_of(names.map(lambda n: f"“{n}”"), names,
                                                                       st.sampled_from(["中文", "，", " "])),
                                                             max_size=8))
def test_only_quoted_parts_change_and_each_changed_one_becomes_a_source_quotation(source_names, output_parts):
    source, output = " and ".join(f"“{n}”" for n in source_names), "".join(output_parts) + "的"
    repaired = repair_quotes(source, output)
    outside = [re.sub("“[^”]*”", "#", t) for t in (output, repaired)]
    assert outside[0] == outside[1]
    before, after = re.findall("“([^”]*)”", output), re.findall("“([^”]*)”", repaired)
    assert len(before) == len(after)
    assert all(a == b or a.strip() in {n.strip() for n in source_names} for b, a in zip(before, after))
