"""Everything that configures a compile, in one place: the pipeline flags and every ``FLOWC_*``
environment variable.

This module sits at the bottom of ``compiler/`` (beside ``errors``): every floor may read it,
and it imports no floor. Its two halves:

- **Pipeline flags**, in the way ``XLA_FLAGS`` works: one table of flags (``FLAGS``) parsed from
  a string or a list (``--passes=cse,simplify --dump-to=dump/``) into a frozen
  ``PipelineOptions``, mirrored by the ``FLOWC_FLAGS`` environment variable. The CLI's argparse
  helpers are in ``compiler/flags.py``.
- **The environment**: ``ENVIRONMENT`` documents each ``FLOWC_*`` variable (docs/options.md
  prints the same table); ``setting(name)`` reads one when asked, never at import time, and
  ``Environment.read()`` takes a frozen snapshot of them all. ``code_tag()`` is the part of the
  environment that changes generated code: compile caches put it in their keys.

Pass names are checked against the pass registry, which sits on a higher floor: the pass
manager registers its checker here (``set_pass_name_check``) when it is imported.
"""
from __future__ import annotations

import dataclasses
import difflib
import os
import shlex
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from runtime.errors import FlowcError

# The passes that run when ``--passes`` is not given, in order.
DEFAULT_PIPELINE = ("prune", "infer-shapes", "fold-constants", "cse", "simplify", "layout",
                    "fold-batch-norm", "place", "legalize-types", "fuse-updates",
                    "fuse-accumulate", "fuse-conv", "fuse-matmul-bias", "fuse", "partition",
                    "plan-memory")

# Constant folding does not materialize results with more elements than this.
DEFAULT_FOLD_MAX_ELEMENTS = 1 << 20


class PipelineError(FlowcError):
    """A pipeline that cannot run as asked: unknown pass names, bad flags or flag values."""


class FlagError(PipelineError):
    """An unknown flag, a missing value or a value of the wrong kind."""


# --- pass names: checked by the pass registry, which registers itself from above ---------
_PASS_NAME_CHECK: List[Callable[[Sequence[str], str], None]] = []


def set_pass_name_check(check: Callable[[Sequence[str], str], None]) -> None:
    """Install the function that raises for an unknown pass name (``compiler.passes.manager``
    does, on import)."""
    _PASS_NAME_CHECK[:] = [check]


def check_pass_names(names: Sequence[str], where: str = "") -> None:
    """Raise the pass registry's error for the first unknown name in ``names`` (``compiler``'s
    ``__init__`` imports the pass manager, so the check is installed before any flag is read)."""
    for check in _PASS_NAME_CHECK:
        check(names, where)


@dataclass(frozen=True)
class PipelineOptions:
    """Parsed pipeline flags (``FLAGS``; mirrored by the FLOWC_FLAGS environment variable)."""
    passes: Optional[tuple] = None                 # None: the default pipeline
    disable: tuple = ()
    print_ir_after: tuple = ()
    print_ir_after_all: bool = False
    print_ir_before_all: bool = False
    dump_to: Optional[str] = None
    verify_each: bool = True
    time_passes: bool = False
    keep_going: bool = False
    fold_max_elements: int = DEFAULT_FOLD_MAX_ELEMENTS
    log_device_placement: bool = False
    cpu_devices: int = 1                           # the process's devices: CPU:0..N-1
    allow_soft_placement: bool = False             # an unsatisfiable request: any device
    devices: tuple = ()                            # or explicit full device names
    default_device: str = ""                       # unconstrained ops (default: the first CPU)
    profile: bool = False                          # codegen: per-kernel timers (instrument.py)
    check_numerics: bool = False                   # codegen: stop at the first NaN/Inf output

    def pipeline(self) -> List[str]:
        """The pass names that run, in order: the chosen (or default) passes minus disabled ones."""
        names = list(self.passes) if self.passes is not None else list(DEFAULT_PIPELINE)
        # --check-numerics names the exact op that made a NaN: every op keeps its own kernel.
        off = set(self.disable) | ({"fuse"} if self.check_numerics else set())
        return [n for n in names if n not in off]

    def validate(self) -> None:
        """Raise UnknownPassError if any option names a pass that does not exist."""
        check_pass_names(self.passes or (), " in --passes")
        check_pass_names(self.disable, " in --disable-passes")
        check_pass_names(self.print_ir_after, " in --print-ir-after")


# --- the flag table ------------------------------------------------------------------------
ENV_VAR = "FLOWC_FLAGS"


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
         "write NNNN.after_<pass>.ir per pass, passes.tsv, and reproducer.ir on failure to DIR "
         "(a Session or flowc train: one DIR/step-<hash> folder per compiled step, listed in "
         "DIR/steps.tsv)"),
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
FLAGS_BY_NAME: Dict[str, Flag] = {f.name: f for f in FLAGS}
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
        flag = FLAGS_BY_NAME.get(name)
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


# --- the environment -----------------------------------------------------------------------
@dataclass(frozen=True)
class EnvVar:
    """One ``FLOWC_*`` variable: what it sets, who reads it, and whether its value changes the
    generated code (then it is part of every compile cache key)."""
    name: str
    meaning: str
    read_by: str
    changes_code: bool = False


ENVIRONMENT: Tuple[EnvVar, ...] = (
    EnvVar("FLOWC_FLAGS", "pipeline flags (the table above), under the flags a command is given",
           "compiler/options.py"),
    EnvVar("FLOWC_CACHE_DIR", "where compiled modules, artifacts and rendered templates are cached "
           "(default ~/.cache/flowc)", "compiler/build_cache.py, runtime/fastcall.py"),
    EnvVar("FLOWC_STREAM_MIN_BYTES", "least output size (bytes) an elementwise loop writes with "
           "streaming stores (default: the last-level cache size)", "compiler/codegen/elementwise.py",
           changes_code=True),
    EnvVar("FLOWC_CC_JOBS", "compiler processes one module's build may run at once (default: one "
           "per core; 1 builds each module as one translation unit)", "compiler/codegen/build.py"),
    EnvVar("FLOWC_CC_MIN_UNIT_COST", "least estimated compile cost worth a translation unit of its "
           "own (0 splits every module)", "compiler/codegen/build.py"),
    EnvVar("FLOWC_CONV_ENGINE", "auto (default): each float32 convolution and convolution "
           "gradient (Conv2DBackpropInput/Filter) runs on oneDNN where it is installed and the "
           "shape is large enough (checked at run time for dims known only then), else on "
           "flowc's kernels; onednn: every one oneDNN can run; blas: never oneDNN",
           "compiler/codegen/c_ops/conv_engine.py",
           changes_code=True),
    EnvVar("FLOWC_CONV_TUNE", "least flops (default 10000000) of a convolution of static shape "
           "run on oneDNN whose implementation is the fastest oneDNN offers for the machine "
           "(brgconv, jit, jit_1x1 ...), timed on its first call; 0: oneDNN's first always",
           "compiler/codegen/c_ops/conv_engine.py", changes_code=True),
    EnvVar("FLOWC_GROUPED_CONV", "auto (default): a grouped Conv2D that flowc's own kernels "
           "run is computed directly (conv_grouped_direct.c.j2) when its groups have at most "
           "64 input and 64 output channels and its filter, as that kernel reads it, is at "
           "most 2 MiB, else by im2col + a gemm per group; direct: directly wherever the "
           "shape allows; gemm: never directly",
           "compiler/codegen/c_ops/conv.py", changes_code=True),
    EnvVar("FLOWC_GEMM_ENGINE", "auto (default): each float32 matrix product of at least "
           "16384 multiply-adds runs on oneDNN's sgemm where oneDNN is installed, else on "
           "OpenBLAS; onednn: every float32 one; blas: never oneDNN",
           "compiler/codegen/c_ops/gemm_engine.py", changes_code=True),
    EnvVar("FLOWC_ONEDNN_ROOT", "a prefix with oneDNN's include/oneapi/dnnl and lib/libdnnl.so.3 "
           "(default: this Python's, where the onednn-cpu-gomp wheels install); 0: no oneDNN",
           "compiler/codegen/onednn.py", changes_code=True),
    EnvVar("FLOWC_CUDA_ARCH", "GPU architecture of --target cuda (sm_NN, or sim; default sm_90)",
           "compiler/codegen/cuda_build.py", changes_code=True),
    EnvVar("FLOWC_NVCC", "the nvcc to use (default: on PATH, CUDA_HOME, CUDA_PATH, /usr/local/cuda)",
           "compiler/codegen/cuda_build.py"),
    EnvVar("FLOWC_CUDA_CUBLAS", "0: GPU matrix products without cuBLAS",
           "compiler/codegen/cuda_build.py", changes_code=True),
    EnvVar("FLOWC_CUBLAS_HOME", "a folder with cuBLAS's include/cublas_v2.h and its library",
           "compiler/codegen/cuda_build.py", changes_code=True),
    EnvVar("FLOWC_CUDA_CUDNN", "0: GPU convolutions without cuDNN",
           "compiler/codegen/cuda_build.py", changes_code=True),
    EnvVar("FLOWC_CUDNN_HOME", "a folder with cuDNN's include/cudnn.h and its library",
           "compiler/codegen/cuda_build.py", changes_code=True),
    EnvVar("FLOWC_CUDA_CONV", "auto (default): each GPU convolution's shape runs on the faster "
           "of cuDNN and the generated kernel, timed on its first call; cudnn: on cuDNN "
           "wherever it takes the shape; generated: never on cuDNN",
           "compiler/codegen/cuda_build.py", changes_code=True),
    EnvVar("FLOWC_CUDA_CONV_LOG", "1: a GPU module prints each convolution shape's choice "
           "(cuDNN or the generated kernel, with both times) to stderr, read at each run",
           "codegen_templates/cuda/conv_cudnn.cu.j2 (the generated code)"),
    EnvVar("FLOWC_CUDA_SIMULATOR", "1: the CUDA simulator is this process's GPU (GPU code runs on "
           "the CPU)", "runtime/cuda_module.py", changes_code=True),
    EnvVar("FLOWC_NUM_THREADS", "threads of the generated code's parallel loops, gemms and "
           "convolutions (default 1), read at each run", "codegen_templates/c/parallel.c.j2 (the "
           "generated code)"),
    EnvVar("FLOWC_CUDA_SIMULATOR_FAULTS", "a file the CUDA simulator appends each out-of-bounds "
           "access it finds to (besides stderr)", "runtime/csrc/cuda_sim/cuda_runtime.h"),
    EnvVar("FLOWC_FASTCALL", "0: call compiled steps through cffi instead of the C fast path",
           "runtime/fastcall.py"),
    EnvVar("FLOWC_SANITIZE", "address,undefined (or one of them): build compiled C and the C "
           "runtime with AddressSanitizer and UBSan, every report fatal; the process needs "
           "libasan preloaded (runtime/sanitize.py, tests/sanitizers.py)",
           "compiler/codegen/build.py, compiler/codegen/c_library.py, runtime/fastcall.py",
           changes_code=True),
    EnvVar("FLOWC_TOKEN", "the shared token a task requires and a client sends",
           "compiler/cli/serve.py, dsl/distributed.py"),
)
ENVIRONMENT_BY_NAME: Dict[str, EnvVar] = {v.name: v for v in ENVIRONMENT}


def setting(name: str, environ: Optional[Mapping[str, str]] = None) -> str:
    """The value of the documented variable ``name`` ('' when unset), read now."""
    if name not in ENVIRONMENT_BY_NAME:
        raise KeyError(f"{name} is not a documented flowc environment variable")
    environ = os.environ if environ is None else environ
    return environ.get(name, "")


def number_setting(name: str, default, convert: Callable[[str], Any], least, what: str,
                   error: Callable[[str], Exception] = FlowcError):
    """The documented variable ``name`` read now as a number (``convert``: int or float),
    ``default`` when unset; raises ``error("NAME must be <what>, not '<text>'")`` when it is not
    one of at least ``least``."""
    text = setting(name).strip()
    if not text:
        return default
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or value < least:
        raise error(f"{name} must be {what}, not {text!r}")
    return value


@dataclass(frozen=True)
class Environment:
    """A snapshot of every documented ``FLOWC_*`` variable (unset ones are '')."""
    values: Tuple[Tuple[str, str], ...]

    @classmethod
    def read(cls, environ: Optional[Mapping[str, str]] = None) -> "Environment":
        return cls(tuple((v.name, setting(v.name, environ)) for v in ENVIRONMENT))

    def __getitem__(self, name: str) -> str:
        return dict(self.values)[name]

    def code_tag(self) -> str:
        """The variables that change generated code, as text for a cache key ('' when none
        is set, so keys made with the defaults stay as they were)."""
        return ";".join(f"{name}={value}" for name, value in self.values
                        if value and ENVIRONMENT_BY_NAME[name].changes_code)


def code_tag(environ: Optional[Mapping[str, str]] = None) -> str:
    """``Environment.read(environ).code_tag()``: what compile cache keys add for the environment."""
    return Environment.read(environ).code_tag()
