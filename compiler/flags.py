"""Pipeline flags, in the way ``XLA_FLAGS`` works: one table of flags parsed from a string or a
list (``--passes=cse,simplify --dump-to=dump/``) into a frozen ``PipelineOptions``, mirrored by
the ``FLOWC_FLAGS`` environment variable, and shared with the CLI through argparse helpers.

The environment is read only when asked (``options_from_environment``, ``resolve_options``),
which the pass manager does when a pipeline starts; explicit options win over it.
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import shlex
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from compiler.passes.manager import PipelineError, PipelineOptions, check_pass_names

ENV_VAR = "FLOWC_FLAGS"


class FlagError(PipelineError):
    """An unknown flag, a missing value or a value of the wrong kind."""


@dataclass(frozen=True)
class Flag:
    """One flag: its name (without ``--``), the kind of value, and the option field it sets."""
    name: str
    kind: str                   # "passes" (comma list of pass names), "bool", "path", "int"
    field: str
    help: str
    value: Any = True           # what a bool flag stores (``--no-verify`` stores False)


FLAGS: List[Flag] = [
    Flag("passes", "passes", "passes", "run exactly these passes, in order (default: the standard pipeline)"),
    Flag("disable-passes", "passes", "disable", "skip these passes"),
    Flag("print-ir-after", "passes", "print_ir_after", "print the IR after these passes"),
    Flag("print-ir-after-all", "bool", "print_ir_after_all", "print the IR after every pass"),
    Flag("print-ir-before-all", "bool", "print_ir_before_all", "print the IR before every pass"),
    Flag("dump-to", "path", "dump_to",
         "write NNNN.after_<pass>.ir per pass, passes.tsv, and reproducer.ir on failure to DIR"),
    Flag("time-passes", "bool", "time_passes", "print the time each pass took"),
    Flag("keep-going", "bool", "keep_going", "continue after a failing pass if the graph is still valid"),
    Flag("no-verify", "bool", "verify_each", "do not run the verifier after each pass", value=False),
    Flag("fold-max-elements", "int", "fold_max_elements",
         "largest result (in elements) constant folding materializes"),
    Flag("log-device-placement", "bool", "log_device_placement",
         "print where the place pass put each node, and why"),
    Flag("cpu-devices", "int", "cpu_devices", "number of CPU devices of the process (default 1)"),
    Flag("allow-soft-placement", "bool", "allow_soft_placement",
         "place a node whose requested device does not exist on another device"),
    Flag("profile", "bool", "profile",
         "time every kernel (flowc run --profile, RunOptions FULL_TRACE); off: no timer code"),
    Flag("check-numerics", "bool", "check_numerics",
         "stop a step at the first op whose floating-point output has NaN or Inf"),
]
_BY_NAME: Dict[str, Flag] = {f.name: f for f in FLAGS}
_DEFAULTS = PipelineOptions()


def known_flags() -> List[str]:
    return [f"--{f.name}" for f in FLAGS]


def _unknown_flag(token: str, where: str) -> FlagError:
    name = token.split("=", 1)[0]
    close = difflib.get_close_matches(name, known_flags(), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return FlagError(f"unknown flag '{name}'{where}{hint}; known flags: {', '.join(known_flags())}")


def _split_names(text: str) -> tuple:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def _convert(flag: Flag, raw: Optional[str], where: str) -> Any:
    """The option value of ``--flag=raw`` (``raw`` None: the flag was given without a value)."""
    if flag.kind == "bool":
        if raw is None:
            return flag.value
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes"):
            return flag.value
        if lowered in ("0", "false", "no"):
            return not flag.value
        raise FlagError(f"--{flag.name}{where} takes no value or true/false, got '{raw}'")
    if raw is None:
        raise FlagError(f"--{flag.name}{where} needs a value (--{flag.name}=...)")
    if flag.kind == "passes":
        names = _split_names(raw)
        check_pass_names(names, f" in --{flag.name}{where}")
        return names
    if flag.kind == "int":
        try:
            value = int(raw)
        except ValueError:
            raise FlagError(f"--{flag.name}{where} needs an integer, got '{raw}'") from None
        if value < 0:
            raise FlagError(f"--{flag.name}{where} must not be negative, got {value}")
        return value
    if not raw:
        raise FlagError(f"--{flag.name}{where} needs a non-empty value")
    return raw


def _tokens(flags: Union[str, Sequence[str]]) -> List[str]:
    return shlex.split(flags) if isinstance(flags, str) else list(flags)


def parse_flags(flags: Union[str, Sequence[str]], base: Optional[PipelineOptions] = None,
                *, source: str = "") -> PipelineOptions:
    """Parse ``--flag=value`` / ``--flag value`` tokens onto ``base`` (default options).

    Pass lists given more than once accumulate; other flags take the last value.
    """
    where = f" (in {source})" if source else ""
    opts = base or PipelineOptions()
    updates: Dict[str, Any] = {}
    tokens = _tokens(flags)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("--"):
            raise FlagError(f"expected a flag starting with '--'{where}, got '{token}'")
        name, eq, raw = token[2:].partition("=")
        flag = _BY_NAME.get(name)
        if flag is None:
            raise _unknown_flag(token, where)
        value_text: Optional[str] = raw if eq else None
        if value_text is None and flag.kind != "bool":
            if i >= len(tokens) or tokens[i].startswith("--"):
                raise FlagError(f"--{flag.name}{where} needs a value (--{flag.name}=...)")
            value_text = tokens[i]
            i += 1
        value = _convert(flag, value_text, where)
        if flag.kind == "passes" and flag.field in updates:
            value = updates[flag.field] + value
        updates[flag.field] = value
    return dataclasses.replace(opts, **updates)


def options_from_environment(environ: Optional[Mapping[str, str]] = None) -> PipelineOptions:
    """Options from the FLOWC_FLAGS environment variable (defaults when it is unset)."""
    environ = os.environ if environ is None else environ
    return parse_flags(environ.get(ENV_VAR, ""), source=ENV_VAR)


def resolve_options(explicit: Optional[PipelineOptions] = None,
                    environ: Optional[Mapping[str, str]] = None) -> PipelineOptions:
    """FLOWC_FLAGS options overridden by every field of ``explicit`` that differs from the default."""
    env = options_from_environment(environ)
    if explicit is None:
        return env
    overrides = {f.name: getattr(explicit, f.name) for f in dataclasses.fields(PipelineOptions)
                 if getattr(explicit, f.name) != getattr(_DEFAULTS, f.name)}
    return dataclasses.replace(env, **overrides)


def format_flags(options: PipelineOptions) -> str:
    """The flag string that parses back to ``options`` (only fields that differ from the default)."""
    parts = []
    for flag in FLAGS:
        value = getattr(options, flag.field)
        if value == getattr(_DEFAULTS, flag.field):
            continue
        if flag.kind == "bool":
            parts.append(f"--{flag.name}")
        elif flag.kind == "passes":
            parts.append(f"--{flag.name}={','.join(value)}")
        else:
            parts.append(shlex.quote(f"--{flag.name}={value}"))
    return " ".join(parts)


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

