from delivery.cli.commands import PATH_SHOWN, path_line


def test_a_short_path_is_shown_whole() -> None:
    path = ["start", *(f"s{i}" for i in range(PATH_SHOWN - 2)), "exit"]
    assert path_line(path) == " -> ".join(path)


def test_a_long_path_shows_its_ends_and_counts_the_middle() -> None:
    path = ["start", *(f"s{i}" for i in range(1, 5001)), "exit"]
    line = path_line(path)
    assert line.startswith("start -> s1 -> ")
    assert line.endswith("-> s4999 -> s5000 -> exit")
    assert f"... ({len(path) - PATH_SHOWN} more stages) ..." in line
    shown = [part for part in line.split(" -> ") if not part.startswith("...")]
    assert len(shown) == PATH_SHOWN
