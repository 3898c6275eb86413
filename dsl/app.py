"""``tf.app`` (TF1): ``fl.app.run(main)`` parses the command line into ``fl.app.flags.FLAGS``
(unknown flags are an error, as absl's) and exits with ``main(argv)``'s result, ``argv``
being the program name and the arguments that are not flags."""
from __future__ import annotations

import sys
from typing import Callable, List, Optional

from dsl import flags

__all__ = ["run", "flags"]


def run(main: Optional[Callable] = None, argv: Optional[List[str]] = None):
    """Parse the flags in ``argv`` (default ``sys.argv``), then ``sys.exit(main(rest))``;
    ``main`` defaults to the ``__main__`` module's ``main``."""
    argv = list(sys.argv if argv is None else argv)
    try:
        rest = flags.FLAGS(argv, known_only=False)
    except flags.Error as e:
        sys.stderr.write(f"FATAL Flags parsing error: {e}\n")
        sys.stderr.write("Pass --helpshort or --helpfull to see help on flags.\n")
        sys.exit(1)
    if main is None:
        main = sys.modules["__main__"].main
    sys.exit(main(rest))
