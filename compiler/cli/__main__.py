"""``python3 -m compiler.cli``: the same as the ``flowc`` command."""
import sys

from compiler.cli import main

sys.exit(main())
