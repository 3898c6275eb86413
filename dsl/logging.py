"""``tf.logging`` (TF1): the verbosity levels and log functions TF1 programs call, on Python's
``logging`` (logger "flowc")."""
import logging as _logging

__all__ = ["DEBUG", "INFO", "WARN", "ERROR", "FATAL", "set_verbosity", "get_verbosity", "debug",
           "info", "warn", "warning", "error", "fatal", "log", "log_every_n", "log_first_n"]

DEBUG, INFO, WARN, ERROR, FATAL = (_logging.DEBUG, _logging.INFO, _logging.WARNING,
                                   _logging.ERROR, _logging.FATAL)
_logger = _logging.getLogger("flowc")
_counts = {}


def set_verbosity(level) -> None:
    _logger.setLevel(level)
    if not _logger.handlers and not _logging.getLogger().handlers:
        _logger.addHandler(_logging.StreamHandler())


def get_verbosity() -> int:
    return _logger.getEffectiveLevel()


def log(level, msg, *args, **kwargs) -> None:
    _logger.log(level, msg, *args, **kwargs)


def debug(msg, *args, **kwargs) -> None:
    _logger.debug(msg, *args, **kwargs)


def info(msg, *args, **kwargs) -> None:
    _logger.info(msg, *args, **kwargs)


def warning(msg, *args, **kwargs) -> None:
    _logger.warning(msg, *args, **kwargs)


warn = warning


def error(msg, *args, **kwargs) -> None:
    _logger.error(msg, *args, **kwargs)


def fatal(msg, *args, **kwargs) -> None:
    _logger.fatal(msg, *args, **kwargs)


def log_every_n(level, msg, n: int, *args) -> None:
    """Log on the 1st, (n+1)th, ... call from this call site."""
    import inspect
    frame = inspect.currentframe().f_back
    key = (frame.f_code.co_filename, frame.f_lineno)
    count = _counts.get(key, 0)
    _counts[key] = count + 1
    if count % max(int(n), 1) == 0:
        _logger.log(level, msg, *args)


def log_first_n(level, msg, n: int, *args) -> None:
    import inspect
    frame = inspect.currentframe().f_back
    key = (frame.f_code.co_filename, frame.f_lineno, "first")
    count = _counts.get(key, 0)
    _counts[key] = count + 1
    if count < n:
        _logger.log(level, msg, *args)
