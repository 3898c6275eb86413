"""``flowc run``: load an artifact with the runtime alone (its GPU modules on this machine's
GPU, or on the CUDA simulator where they were built for it), feed ``.npy`` files (or the arrays
of ``.npz`` archives, by name), print or save
the fetched values; with ``--profile`` (an artifact compiled with ``--profile``), also the time
of each kernel (``runtime/profile.py``)."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import zipfile
from typing import Dict, List, Optional, Sequence

import numpy as np

from runtime import profile
from runtime.artifact import Artifact, load_artifact, verify_artifact
from runtime.errors import FeedError, FlowcError
from runtime.manifest import read_manifest
from runtime.signing import load_key


class CommandLineError(FlowcError):
    """A command-line value that cannot be used (a malformed --feed, an unknown --fetch, ...)."""


def _spec_text(spec) -> str:
    dims = "*" if spec.shape is None else ",".join("?" if d is None else str(d) for d in spec.shape)
    return f"{spec.dtype.ir_name}[{dims}]"


def parse_feeds(items: Sequence[str], archives: Sequence[str] = ()) -> Dict[str, np.ndarray]:
    """The feeds of ``--feed NAME=FILE.npy`` pairs and ``--feeds FILE.npz`` archives (every
    array of an archive feeds the tensor of its name); a name given twice is an error.
    ``allow_pickle`` stays off."""
    feeds: Dict[str, np.ndarray] = {}
    origin: Dict[str, str] = {}
    for path in archives:
        for name, value in _read_npz(path).items():
            if name in feeds:
                raise CommandLineError(f"feed '{name}' is given twice ({origin[name]} and "
                                       f"--feeds {path})")
            feeds[name], origin[name] = value, f"--feeds {path}"
    for item in items:
        name, eq, path = item.partition("=")
        if not eq or not name or not path:
            raise CommandLineError(f"--feed expects NAME=FILE.npy, got '{item}'")
        if name in feeds:
            where = f" ({origin[name]} and --feed)" if name in origin else ""
            raise CommandLineError(f"--feed '{name}' is given twice{where}")
        if not os.path.isfile(path):
            raise CommandLineError(f"--feed {name}: {path}: no such file")
        try:
            value = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise CommandLineError(f"--feed {name}: {path} is not a readable .npy file: {e}") from None
        if not isinstance(value, np.ndarray):
            value.close()
            raise CommandLineError(f"--feed {name}: {path} holds several arrays (.npz); "
                                   f"give one .npy file per feed, or pass --feeds {path}")
        feeds[name] = value
    return feeds


def _read_npz(path: str) -> Dict[str, np.ndarray]:
    """Every array of the ``.npz`` archive ``path``, by name (``np.savez``'s keyword names)."""
    if not os.path.isfile(path):
        raise CommandLineError(f"--feeds {path}: no such file")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise CommandLineError(f"--feeds {path} is not a readable .npz file: {e}") from None
    if isinstance(loaded, np.ndarray):
        raise CommandLineError(f"--feeds {path} holds one unnamed array (.npy); pass it as "
                               "--feed NAME=FILE.npy, or save the feeds with "
                               "numpy.savez(FILE, name=array, ...)")
    try:
        with loaded:
            return {name: loaded[name] for name in loaded.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:  # damaged, or objects
        raise CommandLineError(f"--feeds {path} is not a readable .npz file: {e}") from None


def _check_feeds(artifact: Artifact, feeds: Dict[str, np.ndarray]) -> None:
    known = {s.name: s for s in artifact.feeds}
    unknown = [n for n in feeds if n not in known]
    if unknown:
        takes = ", ".join(f"{s.name} {_spec_text(s)}" for s in artifact.feeds) or "no feeds"
        raise FeedError(f"unknown feed '{unknown[0]}'; this artifact takes {takes}")
    missing = [s for s in artifact.feeds if s.name not in feeds]
    if missing:
        raise FeedError("missing feed(s): " + ", ".join(f"{s.name} {_spec_text(s)}" for s in missing)
                        + f"; pass --feed {missing[0].name}=FILE.npy (or --feeds FILE.npz)")


def select_fetches(artifact: Artifact, names: Sequence[str]) -> List[int]:
    """Indices of the named fetches among the artifact's (all of them when none are named)."""
    have = [s.name for s in artifact.fetches]
    if not names:
        return list(range(len(have)))
    out = []
    for name in dict.fromkeys(names):
        if name not in have:
            raise CommandLineError(f"unknown fetch '{name}'; this artifact fetches "
                                   f"{', '.join(have) or 'nothing'}")
        out.append(have.index(name))
    return out


def format_value(name: str, value: np.ndarray) -> str:
    """``name = array(...)`` with continuation lines aligned under the array."""
    prefix = f"{name} = "
    text = np.array_repr(np.asarray(value))
    return prefix + text.replace("\n", "\n" + " " * len(prefix))


def save_values(path: str, values: Dict[str, np.ndarray]) -> str:
    """One value -> ``.npy``; several (or a ``.npz`` path) -> ``.npz`` keyed by fetch name."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    if path.endswith(".npz"):
        with open(path, "wb") as f:
            np.savez(f, **values)
        return path
    if len(values) > 1:
        raise CommandLineError(f"--save {path}: {len(values)} fetches need a .npz path "
                               "(or choose one with --fetch)")
    if not path.endswith(".npy"):
        raise CommandLineError(f"--save {path}: expected a .npy or .npz path")
    with open(path, "wb") as f:
        np.save(f, next(iter(values.values())))
    return path


def cmd_run(args: argparse.Namespace) -> int:
    """Run one step of an artifact and print (or save) the fetched values."""
    if not os.path.isdir(args.artifact):
        raise CommandLineError(f"{args.artifact}: no such artifact folder")
    key = load_key(args.verify_key, "--verify-key") if getattr(args, "verify_key", None) \
        else None
    artifact, context = load_any_artifact(args.artifact, key)
    with context:
        return _run(args, artifact)


def load_any_artifact(path: str, verify_key: Optional[bytes] = None):
    """(the artifact, the context its runs need): CPU artifacts load with the runtime alone;
    one with GPU modules through ``runtime.cuda_module`` (its GPU's context entered around
    runs; none for modules built for the CUDA simulator). ``verify_key``: refuse it unless
    it is signed with that key. The artifact is checked whole before any GPU is touched,
    and a CPU artifact once, by ``load_artifact`` (checking it here first hashed every file
    twice: 0.2 s of CPU instead of 0.14 s to load a 90 MB ResNet-18 artifact)."""
    devices = read_manifest(path).get("devices")
    if not (isinstance(devices, list)
            and any(isinstance(d, dict) and d.get("kind") == "cuda" for d in devices)):
        return load_artifact(path, verify_key=verify_key), contextlib.nullcontext()
    devices = verify_artifact(path, verify_key)["devices"]
    gpu = [d for d in devices if d["kind"] == "cuda"]
    from runtime.cuda_module import SIMULATED_ARCH, CudaContext, load_cuda_artifact
    context = None
    if any(d.get("arch") != SIMULATED_ARCH for d in gpu):
        context = CudaContext(0)
    return (load_cuda_artifact(path, context, verify_key=verify_key),
            context or contextlib.nullcontext())


def _run(args: argparse.Namespace, artifact: Artifact) -> int:
    if getattr(args, "checkpoint", None):
        from runtime.checkpoint import CheckpointError
        from runtime.checkpoint_state import resolve_checkpoint
        try:
            artifact.restore(resolve_checkpoint(args.checkpoint))
        except CheckpointError as e:
            problems = getattr(e, "mismatches", None)
            if not problems:
                raise
            raise CommandLineError(f"checkpoint {resolve_checkpoint(args.checkpoint)} does "
                                   f"not match artifact {args.artifact}: "
                                   + "; ".join(problems)) from None
    feeds = parse_feeds(args.feed, getattr(args, "feeds", None) or ())
    indices = select_fetches(artifact, args.fetch)
    _check_feeds(artifact, feeds)
    steps = getattr(args, "profile", None)
    repeat = getattr(args, "repeat", 1)
    if repeat < 1:
        raise CommandLineError(f"--repeat {repeat}: the number of runs must be at least 1")
    if repeat > 1 and steps is not None:
        raise CommandLineError("--repeat and --profile both set how many steps run: give one "
                               "(--profile STEPS times each kernel over STEPS runs)")
    report = None
    if steps is None:
        results = _repeated_runs(artifact, feeds, repeat)
    else:
        results, report = _profiled_run(artifact, feeds, steps, args.artifact)
    values = {artifact.fetches[i].name: results[i] for i in indices}
    if args.save:
        written = save_values(args.save, values)
        print(f"wrote {written} ({', '.join(values)})")
    else:
        with np.printoptions(threshold=args.threshold):
            for name, value in values.items():
                sys.stdout.write(format_value(name, value) + "\n")
    if report is not None:
        sys.stdout.write("\n" + report.format())
    return 0


def _repeated_runs(artifact: Artifact, feeds: Dict[str, np.ndarray], repeat: int):
    """Run ``repeat`` steps; the last one's fetches. More than one: the time per run on
    stderr (median and fastest, the first run included: the artifact is already loaded)."""
    times = []
    results = None
    for _ in range(repeat):
        start = time.perf_counter()
        results = artifact.run(feeds)
        times.append(time.perf_counter() - start)
    if repeat > 1:
        times.sort()
        print(f"flowc: {repeat} runs: median {_ms(times[len(times) // 2])}, fastest "
              f"{_ms(times[0])} per run", file=sys.stderr)
    return results


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.1f} us"


def _profiled_run(artifact: Artifact, feeds: Dict[str, np.ndarray], steps: int, path: str):
    """Run ``steps`` steps with fresh kernel counters: the last step's fetches, the Profile."""
    if steps < 1:
        raise CommandLineError(f"--profile {steps}: the number of steps must be at least 1")
    if not profile.is_profiled(artifact.executable):
        raise CommandLineError(f"{path} was compiled without profiling: compile it with "
                               "`flowc compile MODEL -o DIR --profile` to time its kernels")
    results, report = profile.profile_runs(artifact.executable, lambda: artifact.run(feeds),
                                           steps)
    return results[-1], report
