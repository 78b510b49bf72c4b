"""Bash completion (scripts/completion/ftfarm) driven the way bash drives
it: COMP_WORDS and COMP_CWORD set, the function called, COMPREPLY read,
in a real bash, against the ftfarm of this build and a running cluster
(node names, batch ids)."""
import shlex
import subprocess

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "completion" / "ftfarm"


def complete(ftfarm, *words, env=None):
    """What _ftfarm offers for the command line WORDS (the last one being
    completed) typed after FTFARM."""
    line = " ".join(shlex.quote(str(w)) for w in (ftfarm, *words))
    prog = (f". {shlex.quote(str(SCRIPT))}\n"
            f"COMP_WORDS=({line})\n"
            f"COMP_CWORD={len(words)}\n"
            "_ftfarm\n"
            "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    return sorted(w for w in r.stdout.split("\n") if w)


@pytest.mark.timeout(200)
def test_completes_commands_options_nodes_and_batch_ids(make_cluster):
    c = make_cluster(nodes=2, workers_per_node=1, heartbeat_ms=500)
    ftfarm = c.ftfarm
    # Commands: every one the command itself lists, and those only.
    table = subprocess.run([ftfarm, "help"], capture_output=True,
                           text=True, timeout=30).stdout
    listed = sorted({line.split()[1] for line in table.splitlines()
                     if line.startswith("  ftfarm ")} | {"help"})
    assert complete(ftfarm, "") == listed
    assert complete(ftfarm, "dr") == ["drain"]
    assert complete(ftfarm, "st") == ["start", "status", "stop"]
    assert complete(ftfarm, "help", "wa") == ["wait", "watch"]
    # Options, from the command's own usage.
    assert complete(ftfarm, "submit", "--af") == ["--after", "--after-any"]
    assert complete(ftfarm, "batch", "-c", c.config, "--") == \
        ["--help", "--json", "--reconnect-timeout"]
    assert complete(ftfarm, "drain", "--") == ["--help", "--json"]
    # The config's path is a file.
    assert complete(ftfarm, "status", "-c", str(c.config)[:-2]) == \
        [str(c.config)]

    # From the running cluster: its node names, its batch ids.
    c.start()
    ids = []
    for _ in range(3):
        r = c.cli("submit", "-c", c.config, "--wait", "--", "true")
        assert r.returncode == 0, r.stderr
        ids.append(r.stdout.split()[0])
    for cmd in ("drain", "undrain", "reboot"):
        assert complete(ftfarm, cmd, "-c", c.config, "") == \
            ["node1", "node2"], cmd
    assert complete(ftfarm, "drain", "-c", c.config, "node2") == ["node2"]
    for cmd in ("wait", "cat", "cancel", "batch", "forget"):
        assert complete(ftfarm, cmd, "-c", c.config, "") == sorted(ids), cmd
    # The config from FTFARM_CONFIG, as the command reads it.
    env = dict(c.env, FTFARM_CONFIG=str(c.config))
    assert complete(ftfarm, "wait", "", env=env) == sorted(ids)
    # A cluster that is down: nothing to offer, and no error.
    c.stop()
    assert complete(ftfarm, "drain", "-c", c.config, "") == []
