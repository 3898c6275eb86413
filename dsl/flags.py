"""``tf.app.flags`` / ``tf.flags`` (TF1, absl's API) on argparse: ``DEFINE_string``,
``DEFINE_integer``, ``DEFINE_float``, ``DEFINE_boolean``, ``DEFINE_list``, ``DEFINE_enum`` and
``FLAGS``. As in TF1, ``FLAGS`` parses ``sys.argv`` (known flags only) the first time a flag is
read, and ``fl.app.run`` parses strictly and calls ``main`` with the remaining arguments.
Booleans take ``--name``, ``--noname`` or ``--name=true|false``."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List, Optional

__all__ = ["FLAGS", "FlagValues", "Error", "IllegalFlagValueError", "UnrecognizedFlagError",
           "DEFINE_string", "DEFINE_integer", "DEFINE_float", "DEFINE_boolean", "DEFINE_bool",
           "DEFINE_list", "DEFINE_enum", "DEFINE_multi_string", "DEFINE_multi_integer",
           "mark_flag_as_required", "mark_flags_as_required"]


class Error(Exception):
    """absl's ``flags.Error``."""


class IllegalFlagValueError(Error):
    pass


class UnrecognizedFlagError(Error):
    pass


def _parse_bool(text) -> bool:
    if isinstance(text, bool):
        return text
    low = str(text).lower()
    if low in ("true", "t", "1", "yes", "y"):
        return True
    if low in ("false", "f", "0", "no", "n"):
        return False
    raise ValueError(f"Non-boolean argument to boolean flag: {text!r}")


class _Flag:
    def __init__(self, name: str, default, help: str, parse, kind: str, multi: bool = False,
                 enum_values: Optional[List[str]] = None):
        self.name, self.help, self.parse, self.kind = name, help, parse, kind
        self.multi, self.enum_values = multi, enum_values
        self.default = None if default is None else self.convert(default)
        self.value = self.default
        self.present = False

    def convert(self, raw):
        try:
            if self.multi:
                items = raw if isinstance(raw, (list, tuple)) else [raw]
                return [self.parse(v) for v in items]
            value = self.parse(raw)
        except (TypeError, ValueError) as e:
            raise IllegalFlagValueError(f"flag --{self.name}={raw}: {e}") from None
        if self.enum_values is not None and value not in self.enum_values:
            raise IllegalFlagValueError(f"flag --{self.name}={raw}: value should be one of "
                                        f"<{'|'.join(self.enum_values)}>")
        return value


def _list(text) -> list:
    if isinstance(text, (list, tuple)):
        return [str(v) for v in text]
    return [v.strip() for v in str(text).split(",") if v.strip()]


class FlagValues:
    """The registry and values of flags (absl's ``FlagValues``; ``FLAGS`` is the global one)."""

    def __init__(self):
        object.__setattr__(self, "_flags", {})
        object.__setattr__(self, "_parsed", False)
        object.__setattr__(self, "_required", [])

    # --- definition -----------------------------------------------------------------------
    def _define(self, flag: _Flag) -> None:
        if flag.name in self._flags:
            raise Error(f"The flag '{flag.name}' is defined twice.")
        self._flags[flag.name] = flag

    # --- parsing ----------------------------------------------------------------------------
    def _parser(self) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
        for f in self._flags.values():
            if f.kind == "bool":
                p.add_argument(f"--{f.name}", dest=f.name, nargs="?", const="true",
                               default=argparse.SUPPRESS)
                p.add_argument(f"--no{f.name}", dest=f.name, action="store_const",
                               const="false", default=argparse.SUPPRESS)
            else:
                p.add_argument(f"--{f.name}", dest=f.name, default=argparse.SUPPRESS,
                               action="append" if f.multi else "store")
        return p

    def __call__(self, argv: List[str], known_only: bool = False) -> List[str]:
        """Parse ``argv`` (``argv[0]`` is the program); returns ``argv[0]`` and the arguments
        that are not flags."""
        argv = list(argv)
        args = argv[1:]
        if "--" in args:
            cut = args.index("--")
            args, tail = args[:cut], args[cut + 1:]
        else:
            tail = []
        parser = self._parser()
        namespace, rest = parser.parse_known_args(args)
        unknown = [a for a in rest if a.startswith("--") or (a.startswith("-") and len(a) > 1
                                                             and not a[1].isdigit())]
        if unknown and not known_only:
            name = unknown[0].lstrip("-").split("=")[0]
            raise UnrecognizedFlagError(f"Unknown command line flag '{name}'")
        for name, raw in vars(namespace).items():
            flag = self._flags[name]
            flag.value = flag.convert(raw)
            flag.present = True
        object.__setattr__(self, "_parsed", True)
        if not known_only:
            for name in self._required:
                if self._flags[name].value is None:
                    raise IllegalFlagValueError(f"flag --{name} must have a value other than "
                                                "None.")
        return argv[:1] + [a for a in rest if known_only or a not in unknown] + tail

    def is_parsed(self) -> bool:
        return self._parsed

    def mark_as_parsed(self) -> None:
        object.__setattr__(self, "_parsed", True)

    def unparse_flags(self) -> None:
        for f in self._flags.values():
            f.value, f.present = f.default, False
        object.__setattr__(self, "_parsed", False)

    # --- values -----------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        flags = object.__getattribute__(self, "_flags")
        if name not in flags:
            raise AttributeError(name)
        if not object.__getattribute__(self, "_parsed"):
            self(sys.argv, known_only=True)                # TF1's wrapper: parse on first use
        return flags[name].value

    def __setattr__(self, name: str, value) -> None:
        if name not in self._flags:
            raise AttributeError(f"no flag named {name!r}")
        flag = self._flags[name]
        flag.value = flag.convert(value) if value is not None else None

    def __contains__(self, name: str) -> bool:
        return name in self._flags

    def __iter__(self):
        return iter(list(self._flags))

    def __getitem__(self, name: str) -> _Flag:
        return self._flags[name]

    def __delattr__(self, name: str) -> None:
        del self._flags[name]

    def flag_values_dict(self) -> Dict[str, Any]:
        return {name: f.value for name, f in self._flags.items()}

    def get_flag_value(self, name: str, default):
        return self._flags[name].value if name in self._flags else default


FLAGS = FlagValues()


def _define(kind: str, parse, name: str, default, help: str, flag_values: FlagValues,
            **extra) -> _Flag:
    flag = _Flag(name, default, help, parse, kind, **extra)
    flag_values._define(flag)
    return flag


def DEFINE_string(name, default, help, flag_values=FLAGS, **_):  # noqa: N802,A002
    return _define("string", str, name, default, help, flag_values)


def DEFINE_integer(name, default, help, lower_bound=None, upper_bound=None,  # noqa: N802,A002
                   flag_values=FLAGS, **_):
    def parse(v):
        n = int(v)
        if (lower_bound is not None and n < lower_bound) or \
                (upper_bound is not None and n > upper_bound):
            raise ValueError(f"{n} is outside [{lower_bound}, {upper_bound}]")
        return n
    return _define("int", parse, name, default, help, flag_values)


def DEFINE_float(name, default, help, lower_bound=None, upper_bound=None,  # noqa: N802,A002
                 flag_values=FLAGS, **_):
    def parse(v):
        x = float(v)
        if (lower_bound is not None and x < lower_bound) or \
                (upper_bound is not None and x > upper_bound):
            raise ValueError(f"{x} is outside [{lower_bound}, {upper_bound}]")
        return x
    return _define("float", parse, name, default, help, flag_values)


def DEFINE_boolean(name, default, help, flag_values=FLAGS, **_):  # noqa: N802,A002
    return _define("bool", _parse_bool, name, default, help, flag_values)


DEFINE_bool = DEFINE_boolean


def DEFINE_list(name, default, help, flag_values=FLAGS, **_):  # noqa: N802,A002
    return _define("list", _list, name, default, help, flag_values)


def DEFINE_enum(name, default, enum_values, help, flag_values=FLAGS, **_):  # noqa: N802,A002
    return _define("enum", str, name, default, help, flag_values,
                   enum_values=[str(v) for v in enum_values])


def DEFINE_multi_string(name, default, help, flag_values=FLAGS, **_):  # noqa: N802,A002
    return _define("multi_string", str, name, default, help, flag_values, multi=True)


def DEFINE_multi_integer(name, default, help, flag_values=FLAGS, **_):  # noqa: N802,A002
    return _define("multi_int", int, name, default, help, flag_values, multi=True)


def mark_flag_as_required(flag_name: str, flag_values: FlagValues = FLAGS) -> None:
    flag_values._required.append(flag_name)


def mark_flags_as_required(flag_names, flag_values: FlagValues = FLAGS) -> None:
    for name in flag_names:
        mark_flag_as_required(name, flag_values)
