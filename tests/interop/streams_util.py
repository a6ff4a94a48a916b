"""Builds and runs the Kafka Streams word count of tests/java-streams (kafka-streams, the newest
served 4.x) as separate JVM processes, so that a test can SIGKILL and restart each instance.

The build is offline, like java_util.py's: scripts/test.sh's install step resolves the module's
classpath once (`mvn dependency:copy-dependencies`); here the same goal runs with `mvn -o` into a
tmp dir, so a missing artifact fails the build instead of being fetched at test time, and the
source is compiled with javac against it. A module of its own keeps kafka-streams off the
classpaths of the kafka-clients scenarios (tests/java)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from java_util import JVM_FLAGS

STREAMS_DIR = Path(__file__).parent.parent / "java-streams"
MAIN = "dev.strata.streams.WordCount"


def build_module(module_dir: Path, classes: Path, lib: Path, what: str) -> None:
    """Copies a Maven module's classpath offline into `lib` (`mvn -o`: resolved by
    scripts/test.sh's install step, never fetched here) and compiles its sources into `classes`
    with javac. Shared by the JVM applications that each have a module of their own
    (tests/java-streams, tests/java-flink)."""
    for tool in ("mvn", "javac", "java"):
        assert shutil.which(tool), f"{tool} not on PATH: the {what} test needs a JDK 17+ and Maven"
    r = subprocess.run(["mvn", "-o", "-q", "-B", "-Dstyle.color=never", "dependency:copy-dependencies",
                        f"-DoutputDirectory={lib}"], cwd=module_dir, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (f"mvn -o could not copy {what}'s classpath; run scripts/test.sh's "
                               f"install step:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    sources = sorted(str(p) for p in (module_dir / "src" / "main" / "java").rglob("*.java"))
    r = subprocess.run(["javac", "-Xlint:all", "--release", "17", "-d", str(classes), "-cp", f"{lib}/*", *sources],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"javac failed:\n{r.stderr[-3000:]}"


class ModuleApp:
    """A JVM application of a Maven module of its own, compiled into `out_dir` (classes/, and its
    classpath in lib/). Subclasses name the module and say how to run it."""

    MODULE_DIR: Path
    WHAT: str

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self.classes = out_dir / "classes"
        self.lib = out_dir / "lib"

    def build(self):
        build_module(self.MODULE_DIR, self.classes, self.lib, self.WHAT)
        return self


class StreamsApp(ModuleApp):
    """The compiled word count and its classpath."""

    MODULE_DIR = STREAMS_DIR
    WHAT = "kafka-streams"

    def command(self, bootstrap: str, application_id: str, input_topic: str, output_topic: str,
                state_dir: Path, replication: int = 3) -> list[str]:
        """The java command line of one word count instance. `STRATA_STREAMS_GUARANTEE` (default
        exactly_once_v2) sets its processing.guarantee: at_least_once is the checker's negative
        control, which is expected to fail under kills. `replication` is the internal topics'
        replication factor (1 on a one-node cluster)."""
        cp = os.pathsep.join([str(self.classes), f"{self.lib}/*"])
        guarantee = os.environ.get("STRATA_STREAMS_GUARANTEE", "exactly_once_v2")
        return ["java", *JVM_FLAGS, f"-Dstrata.guarantee={guarantee}", f"-Dstrata.replication={replication}", "-cp", cp, MAIN, bootstrap, application_id, input_topic, output_topic,
                str(state_dir)]


class JvmProcess:
    """A JVM application run as a separate process that a test starts, SIGKILLs and starts
    again: stdout and stderr go to one log file, appended across restarts, each start headed
    by `=== start N`. Subclasses say what to run (`command`)."""

    def __init__(self, name: str, log: Path):
        self.name, self.log = name, log
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} is running"
        self.starts += 1
        with open(self.log, "ab") as log:
            log.write(f"=== start {self.starts}\n".encode())
            log.flush()
            # The JVM's temporary files (Flink's mini cluster writes several directories per
            # start and cannot remove them when SIGKILLed) stay beside the log, not in /tmp.
            tmp = self.log.parent / f"{self.log.stem}-tmp"
            tmp.mkdir(parents=True, exist_ok=True)
            command = self.command()
            assert command[0] == "java", command
            command.insert(1, f"-Djava.io.tmpdir={tmp}")
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, and waits for the process to be gone."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def terminate(self, timeout: float) -> tuple[int | None, str | None]:
        """SIGTERM and wait up to `timeout` (then SIGKILL): (exit code, None), or (None, what
        went wrong)."""
        if self.proc is None or self.proc.poll() is not None:
            return None, f"{self.name} was not running"
        self.proc.terminate()
        try:
            return self.proc.wait(timeout), None
        except subprocess.TimeoutExpired:
            self.kill()
            return None, f"{self.name} still running {timeout} s after SIGTERM"

    def current_log(self) -> str:
        """The log of the current (or last) process."""
        return self.log.read_text(errors="replace").rsplit("=== start ", 1)[-1]

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


class Instance(JvmProcess):
    """One word count process: started, SIGKILLed and started again on the same state dir
    (exactly-once Streams then wipes its uncommitted local state and restores from the
    changelog)."""

    def __init__(self, app: StreamsApp, name: str, workdir: Path, args: tuple[str, str, str, str],
                 **options):
        """`options` are passed on to the app's `command` (the word count's `replication`)."""
        super().__init__(name, workdir / f"{name}.log")
        self.app, self.args, self.options = app, args, options
        self.state_dir = workdir / f"{name}-state"

    def command(self) -> list[str]:
        return self.app.command(*self.args[:4], self.state_dir, **self.options)

    def stop(self, timeout: float = 60) -> str | None:
        """SIGTERM; the application's shutdown hook closes KafkaStreams (which commits or aborts
        its open transactions and leaves the group). None if it ended closed - the JVM exits
        128 + SIGTERM after its hooks ran, and the hook logged that close() finished in
        NOT_RUNNING - else what went wrong."""
        rc, error = self.terminate(timeout)
        if error is not None:
            return error
        closed = [line for line in self.current_log().splitlines() if line.startswith("CLOSED ")]
        if rc != 128 + 15 or closed != ["CLOSED true NOT_RUNNING"]:
            return f"{self.name} exited {rc} after SIGTERM: {closed or 'no CLOSED line'}, states {self._states()[-3:]}"
        return None

    def _states(self) -> list[str]:
        """The state changes the current (or last) process logged."""
        return [line for line in self.current_log().splitlines() if line.startswith("STATE ")]

    def running(self) -> bool:
        """The current process is alive and its last state change is to RUNNING (it has its
        tasks and processes them)."""
        if not self.alive():
            return False
        states = self._states()
        return bool(states) and states[-1].endswith("-> RUNNING")
