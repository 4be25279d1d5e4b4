"""Errors that the CLI reports as one clear line and a non-zero exit."""

MAX_LINE = 4000  # an error line quoting a value from a file stays readable: its middle is cut beyond this


class CsebenchError(Exception):
    """A user-facing error: bad input, bad config, missing file. Message says what and how to fix. A message longer
    than MAX_LINE characters (a value of millions of characters quoted in it) keeps its start and its end, which
    says what to do, and says how much was cut between them."""

    def __init__(self, *args):
        if len(args) == 1 and isinstance(args[0], str) and len(args[0]) > MAX_LINE:
            text = args[0]
            head, tail = MAX_LINE * 3 // 4, MAX_LINE // 5
            args = (f"{text[:head]} … ({len(text) - head - tail:,} characters cut) … {text[-tail:]}",)
        super().__init__(*args)


class ConfigError(CsebenchError):
    pass


class DataError(CsebenchError):
    pass


class TrainingError(CsebenchError):
    pass
