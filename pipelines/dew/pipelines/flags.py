"""How every job reads its command line: its own flags, Beam's, and nothing else.

A job's flags and Beam's PipelineOptions share one command line. A flag neither of them knows would
reach Beam's PipelineOptions, which drops it with a log line nobody sees: `--seqlen 1024` or
`--val-fraction 0.1` would run the job without them. So anything unknown is refused before the
pipeline is built, naming the closest flag that exists. Abbreviations are refused too, as Beam's own
parser does: `--seq` silently meaning `--seq_len` today could mean another flag tomorrow.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import math
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from dew.data import formats
from dew.data.errors import UserError


class UsageError(UserError):
    """A command line the job cannot run: the message says what is wrong and what to type instead."""


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default where it has a real one; required flags and unset values say nothing."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.required or action.default in (None, [], argparse.SUPPRESS):
            return action.help or ""
        return super()._get_help_string(action) or ""


def parser(prog: str, description: str) -> argparse.ArgumentParser:
    """A job's argument parser: defaults in --help, no abbreviations, and --verbose."""
    p = argparse.ArgumentParser(prog=prog, description=description, formatter_class=_Help, allow_abbrev=False)
    switch(p, "--verbose", "on failure show the traceback (and Beam's own logs)")
    return p


def verbose(argv: Sequence[str]) -> bool:
    """Whether argv asks for --verbose, however it is spelled, whatever else it holds."""
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    switch(p, "--verbose", "")
    try:
        return bool(p.parse_known_args(argv)[0].verbose)
    except argparse.ArgumentError:  # --verbose=maybe: the job's own parser says what is wrong with it
        return False


def _truth(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"takes true or false, got {text!r}")


def switch(p: argparse.ArgumentParser, name: str, help: str) -> None:
    """A boolean flag: `--pack` and `--no-pack`, and `--pack=true` / `--pack=false` as flex templates pass it.

    The Dataflow flex-template launcher hands every parameter over as `--name=value`, booleans included.
    """
    off = f"--no-{name[2:]}"
    text = f"{help}; {off} turns it off"
    p.add_argument(name, nargs="?", const=True, default=False, type=_truth, metavar="true|false", help=text)
    p.add_argument(off, dest=name[2:], action="store_false", help=argparse.SUPPRESS)


def positive_int(text: str) -> int:
    """An argparse type for a count: refused at the command line, naming its flag, rather than as a
    ValueError from deep inside the job after Beam has started."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive int, got {text!r}")
    return value


def shard_count(text: str) -> int:
    """An argparse type for --num_shards: a positive count a shard name can spell (formats.MAX_SHARDS)."""
    value = positive_int(text)
    if value > formats.MAX_SHARDS:
        raise argparse.ArgumentTypeError(f"a split holds at most {formats.MAX_SHARDS} shards, got {text!r}")
    return value


def positive_number(text: str) -> float:
    """An argparse type for a finite amount above zero (a budget, a size, a weight), which may be
    written as `2e9`."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def committed_io(p: argparse.ArgumentParser, *, inputs: str, output: str) -> None:
    """--input (required, repeatable) and --output (required): the first flags of every job that commits a
    directory, each with its job's own `inputs` and `output` help."""
    p.add_argument("--input", action="append", required=True, help=inputs)
    p.add_argument("--output", required=True, help=output)


def shard_sizing(p: argparse.ArgumentParser, *, count: str, size: str | None = None) -> None:
    """--shard_size_mb (with its `size` help; left out when None, for a job that sizes shards otherwise)
    and --num_shards (with its `count` help). shard_bytes() reads the size back."""
    if size is not None:
        p.add_argument("--shard_size_mb", type=positive_number, default=256.0, help=size)
    p.add_argument("--num_shards", type=shard_count, default=None, help=count)


def shard_bytes(args: argparse.Namespace) -> int:
    """--shard_size_mb as bytes, at least one."""
    return max(1, int(args.shard_size_mb * (1 << 20)))


def max_drop_fraction(p: argparse.ArgumentParser, *, default: float, dropped: str) -> None:
    """--max_drop_fraction of a job over documents, which says how its documents go (`dropped`, `removed`)."""
    p.add_argument(
        "--max_drop_fraction",
        type=float,
        default=default,
        help=f"share of the documents read that may be {dropped}; more, or none written, fails the job uncommitted",
    )


def overwrite(p: argparse.ArgumentParser) -> None:
    """--overwrite: the last flag of every job that commits a directory."""
    switch(p, "--overwrite", "replace an output written by another config")


def option_strings(p: argparse.ArgumentParser) -> list[str]:
    return [option for action in p._actions for option in action.option_strings]


def beam_parser() -> argparse.ArgumentParser:
    """Every flag Beam's PipelineOptions knows: each options class's own, as Beam gathers them itself."""
    from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

    def every(cls: type[PipelineOptions]) -> Iterable[type[PipelineOptions]]:
        for sub in cls.__subclasses__():
            yield sub
            yield from every(sub)

    # A class imported twice (a re-run main session) would add its flags twice: one of each name.
    classes = {str(cls): cls for cls in every(PipelineOptions)}
    p = _BeamArgumentParser(allow_abbrev=False, add_help=False)
    for cls in classes.values():
        cls._add_argparse_args(p)
    return p


def parse(p: argparse.ArgumentParser, argv: Sequence[str] | None, *, beam: bool) -> tuple[Any, list[str]]:
    """(the job's flags, the Beam flags) of argv; anything else raises UsageError, suggesting a flag.

    Unknown flags are found before a missing required one is: `--ouput x` is a misspelt --output, and
    saying only that --output is missing would hide the typo.
    """
    with _nothing_required(p):
        _, rest = p.parse_known_args(argv)
    _refuse_unknown(p, rest, beam=beam)
    args, rest = p.parse_known_args(argv)
    _expand_home(args)
    _refuse_output_over_input(args)
    return args, rest


# The flags that name files or folders; a gs:// value never starts with `~`, so it passes unchanged.
_PATH_FLAGS = ("input", "output", "corpus")


def _expand_home(args: argparse.Namespace) -> None:
    """Makes a leading `~` of a path flag the user's home, as a shell would have done unquoted.

    A quoted glob ('~/raw/*.jsonl') or `--output=~/c` reaches the job with the `~` intact, and Beam
    would take it as a folder named `~` under the working directory.
    """
    for name in _PATH_FLAGS:
        value = getattr(args, name, None)
        if isinstance(value, str):
            setattr(args, name, os.path.expanduser(value))
        elif isinstance(value, list):
            setattr(args, name, [os.path.expanduser(v) if isinstance(v, str) else v for v in value])


# What a committed directory may come to hold, tried against the input patterns: a shard of any format
# (a later run may pick another --format), the derived files, stats.json and meta.json.
_OUTPUT_FILES = (
    *(f"train-00000-of-00001.{ext}" for ext in formats.SHARD_EXTENSIONS),
    "train.pieces.npz",
    "stats.json",
    "meta.json",
)


def _refuse_output_over_input(args: argparse.Namespace) -> None:
    output = getattr(args, "output", None)
    if not isinstance(output, str):
        return
    # plan-mixture's --corpus DIR=WEIGHT is parsed into (DIR, weight): its --output must not land in a
    # corpus, where mixture.json written as meta.json replaced the corpus's commit.
    for flag in ("input", "corpus"):
        given = getattr(args, flag, None) or []
        paths = [given] if isinstance(given, str) else [g[0] if isinstance(g, tuple) else g for g in given]
        refusal = output_over_input(output, paths, flag=f"--{flag}")
        if refusal:
            raise UsageError(refusal)


def output_over_input(output: str, inputs: Sequence[str], *, flag: str = "--input") -> str | None:
    """Why `output` may not be written where it is, or None: it is an --input, lies inside an --input
    folder, or holds files an --input glob matches.

    Such a job reads what it writes: the next run takes its own shards for input, and with --overwrite
    it deletes the input it is about to read (caption-tokenize's whole input) before failing on it.
    """
    where = _comparable(output)
    for given in inputs:
        pattern = _comparable(given)
        if not any(c in pattern for c in "*?["):
            if where == pattern:
                relation = "the same as"
            elif where.startswith(pattern + "/"):
                relation = "inside"
            else:
                continue
        elif any(_glob(pattern).fullmatch(f"{where}/{name}") for name in _OUTPUT_FILES):
            relation = "matched by"
        else:
            continue
        return (
            f"--output {output!r} is {relation} {flag} {given!r}: the job would write over what it reads "
            f"(a rerun reads its own output; --overwrite deletes the input). Choose an --output outside every {flag}"
        )
    return None


def _comparable(path: str) -> str:
    if "://" in path:
        return path.rstrip("/")
    return os.path.abspath(os.path.expanduser(path))


def _glob(pattern: str) -> re.Pattern[str]:
    """`pattern` as Beam's file systems match it: `**` crosses folders, `*` and `?` stay within one."""
    parts = re.split(r"(\*\*|\*|\?)", pattern)
    wild = {"**": ".*", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(wild.get(part) or re.escape(part) for part in parts))


@contextlib.contextmanager
def _nothing_required(p: argparse.ArgumentParser) -> Iterator[None]:
    required = [action for action in p._actions if action.required]
    for action in required:
        action.required = False
    try:
        yield
    finally:
        for action in required:
            action.required = True


def _refuse_unknown(p: argparse.ArgumentParser, rest: list[str], *, beam: bool) -> None:
    known = option_strings(p)
    unknown = rest
    if beam and rest:
        other = beam_parser()
        _, unknown = other.parse_known_args(rest)
        known += option_strings(other)
    if unknown:
        raise UsageError(_refusal(p.prog, unknown, known, beam=beam))


def _refusal(prog: str, unknown: list[str], known: list[str], *, beam: bool) -> str:
    flags = [arg.split("=", 1)[0] for arg in unknown if arg.startswith("-")]
    if not flags:
        return f"unexpected argument {' '.join(unknown)!r}: every value follows its --flag"
    lines = []
    for flag in flags:
        near = difflib.get_close_matches(flag, known, n=1)
        lines.append(f"unknown flag {flag}" + (f": did you mean {near[0]}?" if near else ""))
    beam_too = " and Beam's pipeline options (--runner, --project, ...)" if beam else ""
    lines.append(f"`{prog} --help` lists the flags it takes{beam_too}")
    return "\n".join(lines)
