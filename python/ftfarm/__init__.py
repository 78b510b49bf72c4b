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
"""
from ._errors import Error
from ._client import Client
from ._calls import RemoteTraceback
from .executor import Executor

__version__ = "0.4.0"

__all__ = ["Client", "Error", "Executor", "RemoteTraceback", "__version__"]
