"""The one exception meant for people rather than programmers."""


class UserError(Exception):
    """Bad input from the person running the tool: the message is one line that says what to do.

    The CLI prints it on stderr and exits with status 2; the Python API lets it propagate.
    """
