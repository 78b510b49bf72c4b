"""The package's one exception class (ftfarm.Error)."""


class Error(Exception):
    """What went wrong, in the words the ftfarm command would print.

    ``str(e)`` is the message: the master's own when it refused a request
    (a bad batch names the key and where it is), else what the client
    found (no master running, the connection closed, a config that cannot
    be read).  ``e.exit`` is the exit status the ftfarm command gives for
    it: the master's ``"exit"`` when it sent one (2: bad input), 2 for a
    config that cannot be used, 1 otherwise.
    """

    def __init__(self, message, exit=1):
        super().__init__(message)
        self.exit = exit
