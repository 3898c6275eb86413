"""fl.app.flags / fl.flags / fl.app.run (absl's API on argparse, TF1's parse-on-first-read)
and fl.gfile (os wrappers raising TensorFlow's error classes)."""
import os

import pytest

import dsl as fl
from dsl.flags import FlagValues


def _flags():
    fv = FlagValues()
    f = fl.flags
    f.DEFINE_string("data_dir", "/tmp/data", "where", flag_values=fv)
    f.DEFINE_integer("batch_size", 32, "batch", lower_bound=1, flag_values=fv)
    f.DEFINE_float("learning_rate", 0.01, "lr", flag_values=fv)
    f.DEFINE_boolean("fake_data", False, "fake", flag_values=fv)
    f.DEFINE_bool("verbose", True, "talk", flag_values=fv)
    f.DEFINE_list("layers", "64,32", "sizes", flag_values=fv)
    f.DEFINE_enum("mode", "train", ["train", "eval"], "mode", flag_values=fv)
    return fv


def test_defaults_and_parsing():
    fv = _flags()
    rest = fv(["prog", "--batch_size=8", "--learning_rate", "0.5", "--fake_data",
               "--noverbose", "--layers=1,2,3", "--mode=eval", "positional"])
    assert rest == ["prog", "positional"]
    assert (fv.data_dir, fv.batch_size, fv.learning_rate) == ("/tmp/data", 8, 0.5)
    assert fv.fake_data is True and fv.verbose is False
    assert fv.layers == ["1", "2", "3"] and fv.mode == "eval"
    fv.batch_size = 4
    assert fv.flag_values_dict()["batch_size"] == 4
    fv2 = _flags()
    fv2(["prog", "--fake_data=false"])
    assert fv2.fake_data is False and fv2.layers == ["64", "32"]


def test_errors():
    fv = _flags()
    with pytest.raises(fl.flags.UnrecognizedFlagError, match="nope"):
        fv(["prog", "--nope=1"])
    assert _flags()(["prog", "--nope=1"], known_only=True) == ["prog", "--nope=1"]
    with pytest.raises(fl.flags.IllegalFlagValueError):
        _flags()(["prog", "--batch_size=0"])
    with pytest.raises(fl.flags.IllegalFlagValueError, match="train|eval"):
        _flags()(["prog", "--mode=test"])
    with pytest.raises(fl.flags.Error, match="defined twice"):
        fl.flags.DEFINE_string("data_dir", "", "", flag_values=fv)


def test_first_read_parses_sys_argv_and_app_run(monkeypatch, capsys):
    fv = _flags()
    monkeypatch.setattr(fl.flags, "FLAGS", fv)
    monkeypatch.setattr("sys.argv", ["prog", "--batch_size=3", "--unknown_to_this=1"])
    assert fv.batch_size == 3                          # known flags only, as TF1's wrapper
    seen = []

    def main(argv):
        seen.append((argv, fv.learning_rate))
        return 0
    with pytest.raises(SystemExit) as e:
        fl.app.run(main, argv=["prog", "--learning_rate=2", "extra"])
    assert e.value.code == 0 and seen == [(["prog", "extra"], 2.0)]
    with pytest.raises(SystemExit) as e:
        fl.app.run(main, argv=["prog", "--bogus"])
    assert e.value.code == 1 and "Unknown command line flag 'bogus'" in capsys.readouterr().err
    assert fl.app.flags is fl.flags and fl.app.flags.FLAGS is fv


def test_gfile(tmp_path):
    d = os.path.join(tmp_path, "a", "b")
    fl.gfile.MakeDirs(d)
    fl.gfile.MakeDirs(d)                               # exists: fine
    assert fl.gfile.IsDirectory(d) and fl.gfile.Exists(d)
    path = os.path.join(d, "x.txt")
    with fl.gfile.GFile(path, "w") as f:
        f.write("one\ntwo\n")
    with fl.gfile.GFile(path) as f:
        assert f.readline() == "one\n" and list(f) == ["two\n"]
    with fl.gfile.Open(path, "rb") as f:
        assert f.read() == b"one\ntwo\n" and f.size() == 8
    assert fl.gfile.Glob(os.path.join(d, "*.txt")) == [path]
    assert fl.gfile.ListDirectory(os.path.join(tmp_path, "a")) == ["b"]
    fl.gfile.Copy(path, path + ".bak")
    with pytest.raises(fl.errors.AlreadyExistsError):
        fl.gfile.Copy(path, path + ".bak")
    fl.gfile.Rename(path + ".bak", path, overwrite=True)
    assert fl.gfile.Stat(path).length == 8
    assert [w[0] for w in fl.gfile.Walk(tmp_path)][0] == str(tmp_path)
    fl.gfile.Remove(path)
    with pytest.raises(fl.errors.NotFoundError):
        fl.gfile.Remove(path)
    with pytest.raises(fl.errors.NotFoundError):
        fl.gfile.GFile(path).read()
    with pytest.raises(fl.errors.NotFoundError):
        fl.gfile.ListDirectory(path)
    with pytest.raises(fl.errors.AlreadyExistsError):
        fl.gfile.MkDir(d)
    fl.gfile.DeleteRecursively(os.path.join(tmp_path, "a"))
    assert not fl.io.gfile.exists(d)
