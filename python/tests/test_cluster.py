"""Sharded campaigns on real job engines: scripts/cluster/ on a one-node Slurm cluster started here (munged,
slurmctld, slurmd on localhost; Debian's slurm-wlm and munge, installed with apt-get when missing), and the
Kubernetes manifests checked against the Kubernetes schema.

The Slurm test needs root (to install the packages and run the daemons): it fails in CI (CI=true) when Slurm
cannot be set up, and is skipped, saying why, only on a machine where the user is not root."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import ROOT

CLUSTER = ROOT / "scripts" / "cluster"
# a short deterministic campaign that finds bugs of two signatures, in both shards (--mode random: every test
# depends on (seed, test id) alone)
CAMPAIGN = ["--target", "tract", "--mode", "random", "--tests", "100", "--seed", "1", "--jobs", "1"]
DAEMONS = ["munged", "slurmctld", "slurmd", "sbatch", "scontrol"]
DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}


def _cannot(why: str):
    """Slurm cannot be set up: a failure in CI and for root, a skip only for a user who is not root."""
    if os.environ.get("CI") == "true" or os.geteuid() == 0:
        pytest.fail(why)
    pytest.skip(f"{why} (needs root to install slurm-wlm and munge and run their daemons; run as root or in CI)")


def _install():
    if all(os.path.exists(_bin(d)) for d in DAEMONS):
        return
    if os.geteuid() != 0:
        _cannot("Slurm is not installed")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "slurm-wlm", "munge"]):
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            _cannot(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")


def _bin(name: str) -> str:
    """A daemon's path: root's PATH may lack /usr/sbin."""
    return shutil.which(name) or f"/usr/sbin/{name}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: pathlib.Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else f"({path} is missing)"


class Cluster:
    """A one-node Slurm cluster in a temporary directory; every command runs with its SLURM_CONF."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self.procs: list[subprocess.Popen] = []
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.jobs: list[str] = []

    def logs(self) -> str:
        return "\n".join(f"--- {n}\n{_tail(self.root / n)}" for n in ("munged.log", "slurmctld.log", "slurmd.log"))

    def start(self):
        if os.geteuid() != 0:
            _cannot("a Slurm cluster cannot be started by a user who is not root")
        r = self.root
        key = r / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        sock = r / "munge.sock"
        self._spawn([_bin("munged"), "--foreground", "--force", f"--key-file={key}", f"--socket={sock}",
                     f"--pid-file={r / 'munged.pid'}", f"--log-file={r / 'munged.log'}",
                     f"--seed-file={r / 'munged.seed'}"], "munged")
        self._wait(lambda: sock.exists(), "munged's socket")
        # the node as slurmd sees it (CPUs, sockets, cores, memory), so that it is not drained for a mismatch
        p = subprocess.run([_bin("slurmd"), "-C"], capture_output=True, text=True)
        node = p.stdout.splitlines()[0] if p.returncode == 0 and p.stdout else ""
        if not node.startswith("NodeName="):
            _cannot(f"slurmd -C failed: {p.stderr}")
        host = node.split()[0].split("=", 1)[1]
        (r / "state").mkdir()
        (r / "spool").mkdir()
        self.conf.write_text("\n".join([
            "ClusterName=oatest",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={sock}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "MpiDefault=none",
            "ReturnToService=2",
            "MinJobAge=600",
            f"{node} NodeAddr=127.0.0.1 State=UNKNOWN",
            f"PartitionName=oatest Nodes={host} Default=YES MaxTime=INFINITE State=UP",
        ]) + "\n")
        self._spawn([_bin("slurmctld"), "-D", "-c", "-f", str(self.conf)], "slurmctld")
        self._spawn([_bin("slurmd"), "-D", "-f", str(self.conf)], "slurmd")
        self._wait(lambda: self.run(["sinfo", "-h", "-o", "%t"], check=False).stdout.strip() in ("idle", "mix"),
                   "the node to be idle")

    def _spawn(self, cmd: list[str], name: str):
        out = open(self.root / f"{name}.out", "w")
        self.procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env))

    def _wait(self, ready, what: str, limit: float = 120.0):
        end = time.monotonic() + limit
        while time.monotonic() < end:
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead:
                _cannot(f"{', '.join(dead)} ended while waiting for {what}:\n{self.logs()}")
            if ready():
                return
            time.sleep(0.5)
        _cannot(f"Slurm did not come up: no {what} after {limit:.0f} s:\n{self.logs()}")

    def run(self, cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
        p = subprocess.run(cmd, capture_output=True, text=True, env={**self.env, **kw.pop("env", {})}, **kw)
        if check and p.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}\n{self.logs()}")
        return p

    def states(self, job: str) -> list[str]:
        """The states of a job (one per array task)."""
        out = self.run(["scontrol", "-o", "show", "job", job], check=False).stdout
        return [w.split("=", 1)[1] for line in out.splitlines() for w in line.split() if w.startswith("JobState=")]

    def stop(self):
        for j in self.jobs:
            self.run(["scancel", j], check=False)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


@pytest.fixture
def cluster():
    _install()
    # a short path: munged's socket path must fit a sockaddr_un
    root = pathlib.Path(tempfile.mkdtemp(prefix="oatest-slurm-"))
    c = Cluster(root)
    try:
        c.start()
        yield c
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


def _bugs(run: pathlib.Path) -> dict[str, dict]:
    """Every triaged entry of a run by `<folder>/<signature>`: bugs/ and the other result classes beside it."""
    return {f"{p.parent.parent.name}/{p.parent.name}": json.loads(p.read_text()) for p in run.glob("*/*/bug.json")}


def test_slurm_array_job_and_dependent_merge_find_the_bugs_of_the_unsharded_campaign(cluster, oatest, oatest_bin):
    results = cluster.root / "campaign"
    p = cluster.run(["bash", str(CLUSTER / "submit-slurm.sh"), "2", *CAMPAIGN], cwd=cluster.root,
                    env={"OATEST_BIN": str(oatest_bin), "OATEST_RESULTS": str(results), "OATEST_TRIAGE_REST": "1"})
    words = p.stdout.split()
    array, merge = words[words.index("array") + 2], words[words.index("merge") + 2]
    cluster.jobs = [array, merge]
    # wait for the merge job, which Slurm starts only after every shard ended (afterany)
    end = time.monotonic() + 600
    while not (set(cluster.states(merge)) & DONE):
        assert time.monotonic() < end, f"the merge job did not end in 600 s: {cluster.states(merge)}\n{cluster.logs()}"
        time.sleep(1)
    logs = "\n".join(f"--- {f.name}\n{_tail(f)}" for f in sorted((results / "logs").glob("*.out")))
    assert cluster.states(array) == ["COMPLETED", "COMPLETED"], logs
    assert cluster.states(merge) == ["COMPLETED"], logs

    # the same campaign, unsharded, triaged to the end like the shards
    whole = cluster.root / "whole"
    oatest("fuzz", *CAMPAIGN, "--out", whole)
    oatest("triage", whole)
    merged = results / "merged"
    shards = [results / "shard-0", results / "shard-1"]
    names = lambda run, folder: sorted(p.name for p in (run / folder).iterdir())  # noqa: E731
    assert names(merged, "findings") == names(whole, "findings")
    assert all(names(s, "findings") for s in shards), "both shards find something"
    assert names(merged, "examples") == names(whole, "examples")
    bugs, want = _bugs(merged), _bugs(whole)
    assert len(want) >= 2, f"the campaign finds bugs of several signatures: {sorted(want)}"
    assert sorted(bugs) == sorted(want), "the merged signatures (in every result folder) are the unsharded campaign's"
    for sig, rec in bugs.items():
        base = lambda fs: sorted(pathlib.Path(f).name for f in fs)  # noqa: E731
        assert base(rec["findings"]) == base(want[sig]["findings"]), sig
        # the smallest representative of the shards' is kept
        sizes = [_bugs(s)[sig]["triage"]["nodes"] for s in shards if sig in _bugs(s)]
        assert rec["triage"]["nodes"] == min(sizes), sig
    stats, whole_stats = (json.loads((r / "stats.json").read_text()) for r in (merged, whole))
    for k in ("tests_executed", "tests_valid", "findings_raw", "findings_unique", "by_symptom", "passes_fired",
              "entries_by_class"):
        assert stats[k] == whole_stats[k], k
    assert [s["shard"] for s in stats["shards"]] == ["0/2", "1/2"]
    # merging again adds nothing
    again = oatest("merge", "--out", merged).stdout
    assert "new: nothing; 0 files updated, 0 representatives replaced" in again, again


def test_kubernetes_manifests_follow_the_kubernetes_schema():
    import kubernetes_validate
    import yaml

    files = sorted(CLUSTER.glob("*.yaml"))
    assert files, f"no Kubernetes manifests in {CLUSTER}"
    kinds = []
    for f in files:
        for doc in yaml.safe_load_all(f.read_text()):
            # strict: unknown fields are errors too
            kubernetes_validate.validate(doc, "1.33", strict=True)
            kinds.append((doc["kind"], doc["spec"].get("completionMode")))
    assert ("Job", "Indexed") in kinds, kinds
