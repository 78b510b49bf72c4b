"""joblib on the cluster (import ftfarm.joblib: the backend "ftfarm"):
results in the order of the calls, n_jobs=-1 as the cluster's slots,
remote exceptions, nested parallel calls run in the task, and
scikit-learn's GridSearchCV (45 fits) with the scores n_jobs=1 gives,
its fits run in the slots' interpreters, through a slot SIGKILLed in the
middle of the search."""
import json
import os
import signal
import sys
import threading
import time

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "python"))
joblib = pytest.importorskip("joblib")
import ftfarm.joblib  # noqa: E402,F401


def square(x):
    return x * x


def where(_):
    return os.getpid(), os.getppid()


def nested(n):
    """A parallel call inside a task: it runs in the task's process."""
    return joblib.Parallel(n_jobs=-1)(joblib.delayed(where)(i)
                                      for i in range(n))


@pytest.mark.timeout(300)
def test_joblib_calls_in_order_with_every_slot(make_cluster):
    c = make_cluster(nodes=1, workers_per_node=2, heartbeat_ms=500)
    c.start()
    with joblib.parallel_backend("ftfarm", config=str(c.config)):
        out = joblib.Parallel(n_jobs=-1)(joblib.delayed(square)(i)
                                         for i in range(5000))
        assert out == [i * i for i in range(5000)]
        assert joblib.effective_n_jobs(-1) == 2
        assert joblib.effective_n_jobs(-2) == 1
        pids = joblib.Parallel(n_jobs=-1, batch_size=1)(
            joblib.delayed(where)(i) for i in range(40))
        assert os.getpid() not in {p for p, _ in pids}
        slots = set(c.worker_pids())
        assert {pp for _, pp in pids} <= slots, (pids, slots)
        with pytest.raises(ValueError, match="invalid literal") as e:
            joblib.Parallel(n_jobs=2)(joblib.delayed(int)(x)
                                      for x in ["1", "2", "x"])
        assert "int" in e.value.remote_traceback
        # Nested: the inner calls run in the outer call's process.
        inner = joblib.Parallel(n_jobs=2, batch_size=1)(
            joblib.delayed(nested)(3) for _ in range(2))
        for calls in inner:
            assert len({p for p, _ in calls}) == 1, calls


def scored(estimator, X, y, log):
    """accuracy, and the process it was computed in written to LOG."""
    with open(log, "a") as f:
        f.write(json.dumps([os.getpid(), os.getppid()]) + "\n")
    return estimator.score(X, y)


@pytest.mark.timeout(600)
@pytest.mark.heavy
def test_grid_search_same_scores_in_the_slots_through_a_slot_killed(
        make_cluster, tmp_path):
    pytest.importorskip("sklearn")
    import functools
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC
    c = make_cluster(nodes=1, workers_per_node=2, heartbeat_ms=500)
    c.start()
    X, y = load_digits(return_X_y=True)
    grid = {"C": [0.5, 1, 10], "gamma": [0.0005, 0.001, 0.002]}
    log = tmp_path / "fits.jsonl"
    scorer = functools.partial(scored, log=str(log))
    local = GridSearchCV(SVC(), grid, cv=5, n_jobs=1, scoring=scorer).fit(X, y)
    log.write_text("")
    killed = []

    def killer():
        # Once fits are running in the slots, one slot dies.
        while not killed and time.monotonic() < deadline:
            if log.exists() and len(log.read_text().splitlines()) >= 6:
                busy = [w["pid"] for w in c.status()["workers"]
                        if w["state"] == "busy"]
                if busy:
                    os.kill(busy[0], signal.SIGKILL)
                    killed.append(busy[0])
                    return
            time.sleep(0.02)
    deadline = time.monotonic() + 120
    k = threading.Thread(target=killer)
    with joblib.parallel_backend("ftfarm", config=str(c.config)):
        k.start()
        farm = GridSearchCV(SVC(), grid, cv=5, n_jobs=-1,
                            scoring=scorer, pre_dispatch="all").fit(X, y)
    k.join()
    assert killed, "no slot was killed mid-search"
    assert len(farm.cv_results_["params"]) * 5 == 45
    for key in local.cv_results_:
        if "test_score" in key:
            assert np.array_equal(local.cv_results_[key],
                                  farm.cv_results_[key]), key
    assert farm.best_params_ == local.best_params_
    # Every fit was scored in a slot's interpreter, none here.
    fits = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(fits) >= 45
    parents = {pp for _, pp in fits}
    assert os.getpid() not in {p for p, _ in fits}
    assert parents <= c.seen_pids | set(c.worker_pids()), \
        (parents, c.seen_pids)
    evs = [e["event"] for e in c.events()]
    assert "worker_dead" in evs
