"""Builds and runs the Apache Flink word count of tests/java-flink (Flink 2.2.1 with
flink-connector-kafka 5.0.0-2.2) as a separate JVM - a local mini cluster, job manager and task
managers in one process - so that a test can SIGKILL the whole job and start it again from its
latest retained checkpoint.

The build is offline, like streams_util.py's (whose `ModuleApp` it uses): scripts/test.sh's
install step resolves the module's classpath once, here `mvn -o` copies it into a tmp dir and
javac compiles the job against it. A module of its own keeps Flink off the other classpaths."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from java_util import JVM_FLAGS
from streams_util import Instance, ModuleApp

FLINK_DIR = Path(__file__).parent.parent / "java-flink"
MAIN = "dev.strata.flink.WordCount"
# A mini cluster needs more heap than a client scenario (java_util's 256 MiB): its job manager,
# task managers, network buffers and the job's state share the JVM.
# The sink's INFO lines (transactions recovered and committed, lingering ones aborted) and the
# checkpoint coordinator's (each checkpoint's duration), with times, are the evidence of what a
# restart did on the broker and how long it took, kept in the job's log.
FLINK_JVM_FLAGS = [f for f in JVM_FLAGS if not f.startswith("-Xmx")] + [
    "-Xmx512m", "-Dorg.slf4j.simpleLogger.log.org.apache.flink.connector.kafka.sink=info",
    "-Dorg.slf4j.simpleLogger.log.org.apache.flink.runtime.checkpoint.CheckpointCoordinator=info",
    "-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"]


def latest_checkpoint(checkpoint_dir: Path) -> Path | None:
    """The newest completed checkpoint under `checkpoint_dir` (`<job id>/chk-N/_metadata`, across
    the job ids of every run: a restored job continues its checkpoint ids but has a new job id),
    or None. `_metadata` is written to a temporary name and renamed when the checkpoint is
    complete, so its presence marks a completed checkpoint."""
    found = completed_checkpoints(checkpoint_dir)
    return max(found)[2] if found else None


def completed_checkpoints(checkpoint_dir: Path) -> list[tuple[float, int, Path]]:
    """(mtime of `_metadata`, checkpoint id, chk-N dir) of each completed checkpoint; one that the
    running job subsumes (deletes) while this looks is left out."""
    out = []
    for m in checkpoint_dir.glob("*/chk-*/_metadata"):
        try:
            out.append((m.stat().st_mtime, int(m.parent.name[4:]), m.parent))
        except FileNotFoundError:
            continue
    return out


def halt_file(checkpoint_dir: Path) -> Path:
    """The file whose appearance halts the job after a checkpoint completed and before the sink
    committed it (HaltBeforeCommit.java)."""
    return checkpoint_dir / "halt-before-commit"


# HaltBeforeCommit.HALT_STATUS: the job halted itself before a commit.
HALT_STATUS = 77


class FlinkApp(ModuleApp):
    """The compiled job and its classpath."""

    MODULE_DIR = FLINK_DIR
    WHAT = "Flink"

    def command(self, bootstrap: str, job_name: str, input_topic: str, output_topic: str,
                checkpoint_dir: Path) -> list[str]:
        """The java command line of the job, restored from the newest retained checkpoint in
        `checkpoint_dir` if there is one. `job_name` is the sink's transactional id prefix (the
        same on every start, so a restored job finds its lingering transactions) and names the
        source's consumer group. `STRATA_FLINK_GUARANTEE` (EXACTLY_ONCE) is the sink's delivery
        guarantee: AT_LEAST_ONCE is the checker's negative control, expected to fail under kills;
        `STRATA_FLINK_NAMING` (INCREMENTING) the sink's transaction naming strategy."""
        cp = os.pathsep.join([str(self.classes), f"{self.lib}/*"])
        guarantee = os.environ.get("STRATA_FLINK_GUARANTEE", "EXACTLY_ONCE")
        naming = os.environ.get("STRATA_FLINK_NAMING", "INCREMENTING")
        restore = latest_checkpoint(checkpoint_dir)
        return ["java", *FLINK_JVM_FLAGS, f"-Dstrata.guarantee={guarantee}", f"-Dstrata.naming={naming}",
                f"-Dstrata.halt.file={halt_file(checkpoint_dir)}",
                "-cp", cp, MAIN, bootstrap, input_topic, output_topic, f"{job_name}-group", job_name,
                str(checkpoint_dir), *([str(restore)] if restore else [])]


class FlinkJob(Instance):
    """The job's JVM: started, SIGKILLed and started again on the same checkpoint dir (streams_util's
    Instance, whose `state_dir` is the checkpoint dir here). Running means: the job was submitted
    and has completed a checkpoint since this start."""

    def start(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.started_at = time.time()
        self.restored_from = latest_checkpoint(self.state_dir)  # what app.command passes
        super().start()

    def checkpoints_since_start(self) -> int:
        return sum(1 for mtime, _, _ in completed_checkpoints(self.state_dir) if mtime >= self.started_at)

    def running(self) -> bool:
        return self.alive() and self.checkpoints_since_start() > 0

    def halt_before_commit(self, timeout: float = 60) -> list[str]:
        """Makes the job halt right after a checkpoint completed, before the sink commits that
        checkpoint's transactions; returns the transactional ids it left prepared."""
        halt_file(self.state_dir).touch()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the job did not halt before a commit in {timeout} s") from None
        halted = [x for x in self.current_log().splitlines() if x.startswith("HALT BEFORE COMMIT ")]
        assert rc == HALT_STATUS and halted, f"the job exited {rc}, not halted before a commit:\n{self.tail()}"
        return halted[-1].split()[3:]
