"""Apache Kafka's own command-line tools (the `kafka-tools` jar that `scripts/kafka.sh install`
resolves), run with `java -cp` as the `bin/kafka-*.sh` scripts run them, and their transcripts.

A tool scenario is a list of steps (`Tool` invocations, and `Action`s the test performs between
them, such as stopping a node). `transcript()` runs them and renders what the tools printed, with
the volatile parts masked (ports, topic ids, timestamps, rates), in a form that is the same on
Apache Kafka and on Strata when both behave alike. test_kafka_tools.py compares it with the
transcript recorded from Apache Kafka (`kafka_tools_golden/`).

Each JVM is small (-Xmx256m, C1 only, the serial collector): the tools are short-lived and the
suite shares two cores. Log4j output (the clients' WARN lines, which depend on timing) goes to a
file next to the test, not into the transcript; what a tool itself prints to stdout and stderr
does. Every run has a deadline: a tool that hangs on a request the broker never answers fails
the test with its output so far.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from broker import REPO_ROOT

KAFKA_SH = REPO_ROOT / "scripts" / "kafka.sh"
GOLDEN_DIR = Path(__file__).parent / "kafka_tools_golden"

# The main class each bin/kafka-*.sh script of Kafka 4.4 runs (checked against the jars).
MAIN_CLASS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    # Kafka's verification clients (tests/kafkatest drives them the same way).
    "verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "transactional-message-copier": "org.apache.kafka.tools.TransactionalMessageCopier",
}

JVM_OPTS = ["-Xmx256m", "-Xms32m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k",
            "-Djava.awt.headless=true"]

LOG4J = """status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:strata.tools.log}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = FILE
"""

_classpath: str | None = None


def classpath() -> str:
    """`scripts/kafka.sh classpath` (Kafka's broker and tools jars); raises if not installed."""
    global _classpath
    if _classpath is None:
        p = subprocess.run([str(KAFKA_SH), "classpath"], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"Kafka's tools are not installed (scripts/kafka.sh install): {p.stderr}")
        _classpath = p.stdout.strip()
    return _classpath


def java_bin() -> str:
    if os.environ.get("KAFKA_JAVA"):
        return os.environ["KAFKA_JAVA"]
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return str(Path(home, "bin", "java"))
    return "java"


def command(tool: str, args: list[str], log_dir: Path) -> list[str]:
    """The `java -cp` command line of `tool` (a bin/ script name, MAIN_CLASS) with `args`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    config = log_dir / "tools-log4j2.properties"
    if not config.exists():
        config.write_text(LOG4J)
    return [java_bin(), *JVM_OPTS, f"-Dlog4j2.configurationFile={config}",
            f"-Dstrata.tools.log={log_dir / 'tools.log'}", "-cp", classpath(), MAIN_CLASS[tool], *args]


def run(tool: str, args: list[str], log_dir: Path, timeout: float = 90.0,
        stdin: str | None = None) -> subprocess.CompletedProcess:
    """Runs `tool` to completion; a tool still running after `timeout` s is killed and fails the
    caller with what it printed (a request the broker never answered)."""
    cmd = command(tool, args, log_dir)
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=stdin,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise AssertionError(f"{tool} {' '.join(args)} still running after {timeout:.0f} s (a hang):\n"
                             f"{out}\n{err}") from None


# Masks applied to every transcript, in order: what differs between two runs of the same steps
# on the same broker (ports, ids, clocks), never what a broker decides.
COMMON_MASKS: list[tuple[str, str]] = [
    (r"127\.0\.0\.1:\d+", "127.0.0.1:<port>"),
    (r"(TopicId: )[A-Za-z0-9_-]{22}", r"\1<topic-id>"),
    # Epoch milliseconds (2001..2286) and formatted dates.
    (r"\b1\d{12}\b", "<epoch-ms>"),
    (r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}[:.,]\d{3}", "<time>"),
    (r"/tmp/\S+?/(node\d|broker\d)/data", r"<\1-data>"),
]


@dataclass
class Tool:
    """One tool invocation. `{bootstrap}` in an argument is the target's bootstrap servers;
    `{dir}` the test's scratch directory. `masks` are extra (regex, replacement) pairs for
    outputs that carry measurements (rates, latencies) or values a broker chooses freely (a
    member id). `note` is printed in the transcript before the command."""
    tool: str
    args: list[str]
    masks: list[tuple[str, str]] = field(default_factory=list)
    stdin: str | None = None
    timeout: float = 90.0
    sort_lines: bool = False


@dataclass
class Action:
    """Something the test does between tool steps (writes records, stops a node); `text` goes
    into the transcript so a reader sees why the next output changes."""
    text: str
    fn: Callable[[], None]


def normalize(text: str, masks: list[tuple[str, str]], sort_lines: bool = False) -> list[str]:
    """The lines of a tool's output with `masks` applied, Java stack frames (`\\tat ...`, whose
    line numbers say nothing about the broker) and log4j's own status lines left out, and runs
    of blanks collapsed (the tools pad columns to the widest value, which masks change)."""
    lines = []
    for line in text.splitlines():
        if re.match(r"^\s+at \S+\(.*\)$", line) or re.match(r"^\s+\.\.\. \d+ more$", line):
            continue
        line = re.sub(r"[ \t]+", " ", line).rstrip()
        for pattern, repl in masks:
            line = re.sub(pattern, repl, line)
        lines.append(line)
    while lines and not lines[-1]:
        lines.pop()
    return sorted(lines) if sort_lines else lines


def transcript(steps: list, bootstrap: str, scratch: Path) -> str:
    """Runs `steps` in order and returns the masked transcript: each command with its output
    (stdout, then stderr) and its exit status when it is not 0."""
    out: list[str] = []
    for step in steps:
        if isinstance(step, Action):
            step.fn()
            out += [f"# {step.text}", ""]
            continue
        args = [a.replace("{bootstrap}", bootstrap).replace("{dir}", str(scratch)) for a in step.args]
        p = run(step.tool, args, scratch / "logs", step.timeout, step.stdin)
        shown = [a.replace(str(scratch), "{dir}") for a in step.args]
        masks = COMMON_MASKS + step.masks
        out += normalize("$ " + " ".join([step.tool, *shown]), COMMON_MASKS)
        out += normalize(p.stdout, masks, step.sort_lines)
        err = normalize(p.stderr, masks, step.sort_lines)
        if err:
            out += ["[stderr]", *err]
        if p.returncode != 0:
            out.append(f"[exit {p.returncode}]")
        out.append("")
    return "\n".join(out)
