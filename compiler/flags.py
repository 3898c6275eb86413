"""The pipeline flags on a command line: argparse helpers that add the table of flags
(``compiler.options.FLAGS``) to a command's parser and read them back as ``PipelineOptions``.
Parsing flag strings, ``FLOWC_FLAGS`` and the options themselves live in ``compiler/options.py``.
"""
from __future__ import annotations

import argparse
from typing import List, Optional

from compiler.options import ENV_VAR, FLAGS, Flag, PipelineOptions, parse_flags

# --- argparse, for the CLI ---------------------------------------------------------------
_ADDED = "_flowc_pipeline_flags"        # namespace attr: which flags the helper added


def _dest(flag: Flag) -> str:
    return flag.name.replace("-", "_")


def add_pipeline_arguments(parser: argparse.ArgumentParser,
                           include_passes: bool = True) -> argparse._ArgumentGroup:
    """Add the pipeline flags to ``parser`` as one argument group (dests: flag names with
    underscores, e.g. ``args.dump_to``); read them back with ``options_from_args``.

    ``include_passes=False`` leaves out ``--passes`` for commands whose pipeline is fixed.
    """
    group = parser.add_argument_group("pass pipeline", f"(also read from ${ENV_VAR}; flags given here win)")
    added = [f for f in FLAGS if include_passes or f.name != "passes"]
    parser.set_defaults(**{_ADDED: tuple(f.name for f in added)})
    for flag in added:
        opt = f"--{flag.name}"
        if flag.kind == "bool":
            group.add_argument(opt, dest=_dest(flag), action="store_true", default=None, help=flag.help)
        elif flag.kind == "passes":
            group.add_argument(opt, dest=_dest(flag), action="append", metavar="PASS,...", help=flag.help)
        else:
            group.add_argument(opt, dest=_dest(flag), metavar="DIR" if flag.kind == "path" else "N",
                               help=flag.help)
    return group


def _given(args: argparse.Namespace) -> List[str]:
    """The pipeline flags given on the command line, as ``--flag=value`` tokens."""
    tokens: List[str] = []
    added = getattr(args, _ADDED, None)
    for flag in FLAGS:
        if added is not None and flag.name not in added:
            continue
        value = getattr(args, _dest(flag), None)
        if value is None or value is False:
            continue
        if flag.kind == "bool":
            tokens.append(f"--{flag.name}")
        elif flag.kind == "passes":
            tokens.extend(f"--{flag.name}={v}" for v in value)
        else:
            tokens.append(f"--{flag.name}={value}")
    return tokens


def pipeline_flags_given(args: argparse.Namespace) -> bool:
    """Whether any pipeline flag was given (commands that run no passes can warn)."""
    return bool(_given(args))


def options_from_args(args: argparse.Namespace,
                      base: Optional[PipelineOptions] = None) -> PipelineOptions:
    """PipelineOptions from a namespace parsed with a parser set up by add_pipeline_arguments."""
    return parse_flags(_given(args), base)

