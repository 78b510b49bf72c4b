"""A call's argument that stands for another call's value (a future
passed as an argument, executor.py), as it travels to the slot.

The slot (_slot.py) puts in its place the value the master sent with the
task: input K of the task's "inputs", call I of the task it names.
Nothing else is imported: the slots' interpreters load this module.
"""


class Ref:
    """Input K's value, call I of its task."""

    __slots__ = ("k", "i")

    def __init__(self, k, i=0):
        self.k, self.i = k, i

    def __reduce__(self):
        return (Ref, (self.k, self.i))

    def __repr__(self):
        return f"<the value of input {self.k}>"
