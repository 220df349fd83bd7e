"""The robustness harness itself: a good command through the subprocess runner works, and a bad one is caught."""

from .conftest import assert_one_line_error, cli


def test_a_trained_toy_run_translates_through_the_subprocess_runner(toy_run):
    result = cli("translate", str(toy_run), "--beam", "1", "hello")
    assert result.code == 0 and result.out.strip(), result.err[-2000:]


def test_a_missing_run_directory_is_one_line(tmp_path):
    assert_one_line_error(cli("translate", str(tmp_path / "nothing"), "hello"), "does not exist", code=2)
