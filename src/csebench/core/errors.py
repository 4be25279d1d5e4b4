"""Errors that the CLI reports as one clear line and a non-zero exit."""


class CsebenchError(Exception):
    """A user-facing error: bad input, bad config, missing file. Message says what and how to fix."""


class ConfigError(CsebenchError):
    pass


class DataError(CsebenchError):
    pass


class TrainingError(CsebenchError):
    pass
