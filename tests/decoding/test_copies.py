"""decoding/copies.py: spans the model miscopied from the source are put back, and nothing else changes."""

from hypothesis import given
from hypothesis import strategies as st

from scratchformer.decoding.copies import COPYABLE, repair_all, repair_copies


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


def test_repair_all_pairs_sources_with_outputs():
    assert repair_all(["a dlocate", "x"], ["用 dlat", "好"]) == ["用 dlocate", "好"]


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
