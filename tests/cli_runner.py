"""Running the flowc command line in-process for tests."""
from compiler.cli import main


def flowc(capsys, *args):
    """Run ``flowc args`` in this process; returns (exit status, stdout, stderr)."""
    try:
        rc = main([str(a) for a in args])
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err
