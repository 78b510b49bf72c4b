"""The manual against the code: every command, option, control request,
configuration key, batch key and counter the code declares is in its
manual page; every page renders without a warning and is installed; every
command answers --help; the README and BENCHMARKS.md open the way a
newcomer needs.  A failure names what is missing and where it is declared.
No cluster is started: this file takes a few seconds."""
import os
import re
import subprocess

import pytest

from conftest import BIN, ROOT

MAN = ROOT / "man"
PAGES = ["ftfarm.1", "ftfarm.json.5", "ftfarm-batch.5", "ftfarm-events.7"]


def src(path):
    return (ROOT / path).read_text()


def section(page, title):
    """The text of PAGE's ".SH TITLE" or ".SS TITLE" (up to the next
    heading of the same or a higher level)."""
    text = (MAN / page).read_text()
    for mac in (".SH", ".SS"):
        m = re.search(rf"^{mac} \"?{re.escape(title)}\"?$", text, re.M)
        if m:
            stop = r"^\.SH " if mac == ".SH" else r"^\.S[HS] "
            rest = text[m.end():]
            end = re.search(stop, rest, re.M)
            return rest[:end.start()] if end else rest
    raise AssertionError(f"man/{page} has no section \"{title}\"")


def entries(text):
    """The names of the .TP entries of TEXT (".B name", ".BR name ...",
    and .TQ's)."""
    return set(re.findall(r"^\.(?:TP|TQ)\n\.BR? \"?([A-Za-z0-9_.]+)",
                          text, re.M))


def jfield_tables(path):
    """{table name: [keys]} of PATH's `static const struct jfield
    NAME[] = {...}` tables."""
    out = {}
    for name, body in re.findall(
            r"static const struct jfield (\w+)\[\] = \{(.*?)\n\};",
            src(path), re.S):
        out[name] = re.findall(r"\{ \"([a-z_0-9]+)\",", body)
    return out


def cli_commands():
    return re.findall(r"\{ \"([a-z]+)\", cli_\w+, [01],", src("cli/main.c"))


def run(*args):
    return subprocess.run([str(BIN / "ftfarm"), *args], capture_output=True,
                          text=True, timeout=30, env={**os.environ,
                                                      "FTFARM_CONFIG": ""})


@pytest.mark.timeout(60)
@pytest.mark.parametrize("page", PAGES)
def test_page_renders_without_warnings(page):
    r = subprocess.run(["man", "--warnings", "-l", str(MAN / page)],
                       capture_output=True, text=True, timeout=30,
                       env={**os.environ, "MANWIDTH": "80",
                            "LC_ALL": "C.UTF-8"})
    assert r.returncode == 0 and r.stderr == "", (page, r.stderr)
    assert len(r.stdout) > 500, page


@pytest.mark.timeout(60)
def test_make_install_puts_the_pages(tmp_path):
    r = subprocess.run(["make", "-s", "-C", str(ROOT), "install-man",
                        f"PREFIX={tmp_path}"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    man = tmp_path / "share" / "man"
    for page in PAGES:
        assert (man / f"man{page[-1]}" / page).is_file(), page
    r = subprocess.run(["make", "-s", "-C", str(ROOT), "uninstall-man",
                        f"PREFIX={tmp_path}"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert not any(p.is_file() for p in man.rglob("*")), list(man.rglob("*"))


@pytest.mark.timeout(120)
def test_every_command_answers_help():
    cmds = cli_commands()
    assert len(cmds) >= 16, cmds
    for args in (["--help"], ["help"], ["-h"]):
        r = run(*args)
        assert r.returncode == 0, (args, r.stderr)
        for c in cmds:
            assert f"ftfarm {c}" in r.stdout, (args, c, r.stdout)
    for c in cmds:
        for args in ([c, "--help"], ["help", c], [c, "-h"]):
            r = run(*args)
            assert r.returncode == 0, (args, r.stdout, r.stderr)
            assert r.stdout.startswith(f"usage: ftfarm {c}"), (args, r.stdout)
    # Errors in usage still exit 2.
    for args in ([], ["nosuch"], ["help", "nosuch"], ["submit", "--bogus"],
                 ["status"], ["wordcount", "--shards", "x"]):
        r = run(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)


def test_ftfarm_1_has_every_command_option_and_request():
    listed = entries(section("ftfarm.1", "COMMANDS"))
    for c in cli_commands():
        assert c in listed, \
            f"command \"{c}\" (cli/main.c) is not in man/ftfarm.1 COMMANDS"
    options = section("ftfarm.1", "OPTIONS").replace("\\-", "-")
    opts = re.search(r"static const struct option opts\[\] = \{(.*?)\};",
                     src("cli/main.c"), re.S).group(1)
    for o in re.findall(r"\{ \"([a-z-]+)\",", opts):
        assert re.search(rf"--{re.escape(o)}\b", options), \
            f"option --{o} (cli/main.c) is not in man/ftfarm.1 OPTIONS"
    requests = entries(section("ftfarm.1", "CONTROL REQUESTS"))
    for name in re.findall(r"X\(\w+, \"([a-z_]+)\", CTL_ROLE",
                           src("common/ctl.h")):
        assert name in requests, (f"control request \"{name}\" "
                                  "(common/ctl.h) is not in man/ftfarm.1 "
                                  "CONTROL REQUESTS")


# Where each jfield table's keys are documented: (page, section).
CONFIG_TABLES = {
    "common/config.c": {
        "top_fields": ("ftfarm.json.5", "Top-level keys"),
        "node_fields": ("ftfarm.json.5", "Node keys"),
        "bmc_fields": ("ftfarm.json.5", "bmc keys"),
        "control_fields": ("ftfarm.json.5", "control keys"),
        "http_fields": ("ftfarm.json.5", "http keys"),
        "join_fields": ("ftfarm.json.5", "join keys"),
        "join_host_fields": ("ftfarm.json.5", "Node keys"),
    },
    "common/batch.c": {
        "batch_fields": ("ftfarm-batch.5", "Batch keys"),
    },
    "worker/tasks/exec.c": {
        "exec_fields": ("ftfarm-batch.5", "Task keys"),
    },
    "worker/tasks/sleep.c": {
        "sleep_fields": ("ftfarm-batch.5", "Task keys"),
    },
    "worker/tasks/python.c": {
        "python_fields": ("ftfarm-batch.5", "Task keys"),
    },
    "worker/tasks/wc_job.c": {
        "job_fields": ("ftfarm-batch.5", "Job keys: wordcount"),
    },
    "worker/tasks/relax_check.c": {
        "job_fields": ("ftfarm-batch.5", "Job keys: relax"),
        "task_fields": None,            # planned by the job, not written
    },
    "worker/gang/ftar_job.c": {
        "job_fields": ("ftfarm-batch.5", "Job keys: ftallreduce (a gang task)"),
    },
    "worker/gang/pipe_job.c": {
        "job_fields": ("ftfarm-batch.5", "Job keys: pipeline (a gang task)"),
    },
}


@pytest.mark.parametrize("path", sorted(CONFIG_TABLES))
def test_every_key_is_documented(path):
    tables = jfield_tables(path)
    assert tables, f"no jfield table found in {path}"
    for table, keys in tables.items():
        assert table in CONFIG_TABLES[path], \
            (f"{path}: table {table} has no place in the manual: add its "
             "keys to a page and the table to CONFIG_TABLES in "
             "tests/integration/test_docs.py")
        where = CONFIG_TABLES[path][table]
        if where is None:
            continue
        listed = entries(section(*where))
        for k in keys:
            assert k in listed, (f"key \"{k}\" ({path}: {table}) is not in "
                                 f"man/{where[0]} \"{where[1]}\"")


def test_every_counter_is_documented():
    listed = entries(section("ftfarm-events.7", "METRICS"))
    counters = re.findall(r"X\(\w+,\s*\"(\w+)\"",
                          src("master/master.h").split("FT_COUNTERS(X)")[1]
                          .split("struct counters")[0])
    assert len(counters) >= 6, counters
    for c in counters:
        assert f"ftfarm_{c}_total" in listed, \
            (f"counter ftfarm_{c}_total (master/master.h FT_COUNTERS) is "
             "not in man/ftfarm-events.7 METRICS")


def test_readme_is_a_front_door():
    lines = src("README.md").splitlines()
    assert len(lines) <= 300, len(lines)
    head = "\n".join(lines[:40])
    assert "make demo" in head and "make test" in head, head
    for page in ("ftfarm(1)", "ftfarm.json(5)", "ftfarm-batch(5)",
                 "ftfarm-events(7)"):
        assert page in src("README.md"), page
    # Every file of docs/ it points to exists.
    for ref in re.findall(r"\]\((docs/[^)#]+)", src("README.md")):
        assert (ROOT / ref).is_file(), ref


def test_benchmarks_lead_with_todays_table():
    head = src("BENCHMARKS.md").splitlines()[:80]
    table = "\n".join(line for line in head if line.startswith("|"))
    for name in ("xargs", "`wc -w`", "mpi4py"):
        assert name in table, name


def test_workflows_md_shows_the_example_and_the_profile():
    """docs/workflows.md shows config/workflow.smk as it is (less its
    comment) and every key the profile's config.yaml sets."""
    doc = src("docs/workflows.md")
    shown = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    example = re.sub(r"\A(#.*\n)+", "", src("config/workflow.smk"))
    assert shown == example, "docs/workflows.md: the Snakefile shown is " \
        "not config/workflow.smk"
    keys = re.findall(r"^([a-z-]+):", src("scripts/snakemake/ftfarm/"
                                          "config.yaml"), re.M)
    assert keys, "no key in the profile's config.yaml"
    for k in keys:
        assert f"| `{k}` |" in doc, f"docs/workflows.md: key {k} " \
            "(scripts/snakemake/ftfarm/config.yaml) not in its table"
