"""The command line as a newcomer meets it: --version, help with a description and examples
for every command, one metavar style, a command's own usage on its errors, and inputs that
are directories or devices."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from delivery import __version__
from delivery.cli.main import COMMANDS as COMMAND_TABLE
from delivery.cli.main import EXAMPLES, _build_parser, _subparsers
from delivery.testing.cli import invoke

COMMANDS = sorted(_subparsers(_build_parser()))


def test_version_prints_the_package_version() -> None:
    code, out, err = invoke("--version")
    assert (code, out.strip(), err) == (0, f"delivery {__version__}", "")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_a_description_and_an_example_in_its_help(command: str) -> None:
    code, out, _ = invoke(command, "--help")
    assert code == 0
    sub = _subparsers(_build_parser())[command]
    assert sub.description, f"{command} has no description"
    assert "examples:\n  delivery " + command in out


def test_each_command_is_dispatched_under_the_name_its_parser_adds() -> None:
    # main.COMMANDS pairs each add_parser with a handler by name: a parser added under
    # another name, or out of the --help order, would fail to dispatch or list wrongly
    assert list(_subparsers(_build_parser())) == list(COMMAND_TABLE)


@pytest.mark.parametrize("command", sorted(EXAMPLES))
def test_every_example_parses(command: str) -> None:
    parser = _build_parser()
    text = "\n".join(EXAMPLES[command]).replace("\\\n", " ")  # continued lines joined
    for line in text.splitlines():
        # a redirection (`2> progress.log`) is the shell's, not an argument
        words = shlex.split(re.sub(r"\s\d?>\s*\S+", "", re.split(r"\s+#\s", line)[0]))
        args = parser.parse_args(words[1:])
        assert args.command == command


# the options a newcomer is told about (issue 39), each shown in use under its command's help
SHOWN = {"run": ["--repos-from", "--org", "--topic", "--dry-run", "--quiet",
                 "--agent scripted:"],
         "resume": ["--quiet", "2> "], "close": ["--delete-branches", "--comment"],
         "preflight": ["--org"], "runs": ["--json"]}


@pytest.mark.parametrize("command", sorted(SHOWN))
def test_the_newcomers_options_each_have_an_example_in_their_commands_help(
        command: str) -> None:
    code, out, _ = invoke(command, "--help")
    assert code == 0
    examples = out.split("\nexamples:\n", 1)[1].splitlines()
    missing = [option for option in SHOWN[command]
               if not any(line.startswith("  ") and option in line for line in examples)]
    assert missing == []


def test_the_top_level_help_shows_a_campaign_dry_run_with_the_offline_agent_and_close(
        ) -> None:
    code, out, _ = invoke("--help")
    assert code == 0
    examples = out.split("\nexamples:\n", 1)[1]
    assert "--agent scripted:examples/offline/campaign.toml --dry-run" in examples
    assert "delivery close --last" in examples


def test_metavars_are_upper_case_everywhere() -> None:
    seen = []
    for command, sub in _subparsers(_build_parser()).items():
        for action in sub._actions:
            if action.choices is not None or not (action.metavar or action.dest) or \
                    action.nargs == 0 or action.dest == "help":
                continue
            shown = action.metavar or (action.dest.upper() if action.option_strings
                                       else action.dest)
            words = re.findall(r"[A-Za-z_]+", str(shown).split(".")[0])
            seen += [(command, word) for word in words if word not in ("git",)
                     and not word.isupper()]
    assert seen == []


def test_a_misspelt_option_shows_that_commands_usage_and_the_nearest_option(
        tmp_path: Path) -> None:
    code, out, err = invoke("run", "--inptu", "ticket=T-1", tmp_path / "flow.dot")
    assert code == 2 and out == ""
    assert err.startswith("usage: delivery run ")
    assert "unrecognized arguments: --inptu" in err and "did you mean --input?" in err
    assert "Traceback" not in err


def test_a_missing_argument_shows_that_commands_usage() -> None:
    code, _, err = invoke("inspect", "--json", "--routes", "--bogus")
    assert code == 2
    assert err.startswith("usage: delivery inspect ")


def test_an_unknown_command_shows_the_top_level_usage() -> None:
    code, _, err = invoke("rnu")
    assert code == 2
    assert err.startswith("usage: delivery ") and "invalid choice: 'rnu'" in err


@pytest.mark.parametrize("command", ["run", "parse", "graph", "test"])
def test_a_directory_given_as_the_file_is_said_to_be_one(command: str,
                                                         tmp_path: Path) -> None:
    code, _, err = invoke(command, tmp_path)
    assert code == 2
    assert err.strip() == f"delivery {command}: {tmp_path}: is a directory; name a file in it"


@pytest.mark.parametrize("command", ["run", "parse", "graph", "test"])
def test_dev_null_is_refused_as_not_a_regular_file(command: str) -> None:
    code, _, err = invoke(command, "/dev/null")
    assert code == 2
    assert "/dev/null: is not a regular file" in err
