"""ftfarm from Python: drive a running ftfarm cluster.

    import ftfarm

    with ftfarm.Client("config/local.json") as c:
        bid = c.submit({"name": "hello", "tasks": [
            {"type": "exec", "argv": ["echo", "hi"]}]})
        row = c.wait(bid)
        for r in c.results(bid):
            print(r["task"], r["status"], r["stdout"], end="")

    with ftfarm.Executor("config/local.json") as ex:
        print(sum(ex.map(pow, range(1000), range(1000))))

Client speaks the master's control protocol as the ftfarm command does
(see docs/python.md and ftfarm(1)).  Every failure is an ftfarm.Error
whose message is what the ftfarm command would print, with the exit
status it would give in .exit.  Executor is a concurrent.futures.Executor
whose calls run in Python interpreters the cluster's slots keep alive.

Client, Executor and RemoteTraceback are imported when first used: the
slots' interpreters import ftfarm._slot, and so this file, and the
client's modules (sockets, MUNGE, threads) would cost each of them some
50 ms at its start for nothing.
"""
import importlib

from ._errors import Error

__version__ = "0.4.0"

__all__ = ["Client", "Error", "Executor", "RemoteTraceback", "__version__"]

_LAZY = {"Client": "._client", "Executor": ".executor",
         "RemoteTraceback": "._calls"}


def __getattr__(name):
    """ftfarm.NAME for the names of _LAZY, imported now."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'ftfarm' has no attribute '{name}'")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
