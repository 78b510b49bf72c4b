"""ftfarm from Python: drive a running ftfarm cluster.

    import ftfarm

    with ftfarm.Client("config/local.json") as c:
        bid = c.submit({"name": "hello", "tasks": [
            {"type": "exec", "argv": ["echo", "hi"]}]})
        row = c.wait(bid)
        for r in c.results(bid):
            print(r["task"], r["status"], r["stdout"], end="")

Client speaks the master's control protocol as the ftfarm command does
(see docs/python.md and ftfarm(1)).  Every failure is an ftfarm.Error
whose message is what the ftfarm command would print, with the exit
status it would give in .exit.
"""
from ._errors import Error
from ._client import Client

__version__ = "0.4.0"

__all__ = ["Client", "Error", "__version__"]
