"""Broker CPU per fetch of one kafka-python consumer (which uses incremental fetch sessions,
KIP-227) assigned every partition of a PARTITIONS-partition topic, for SECONDS while one record
a loop goes to the partitions in turn: the broker started with
max.incremental.fetch.session.cache.slots=SLOTS (0: no sessions, every fetch is full).

Usage: .venv/bin/python benches/fetch_sessions_cpu.py STRATA_BIN SLOTS PARTITIONS SECONDS
(run SLOTS 0 and 1000 in turn, a few times, and compare broker_cpu_ms_per_fetch)."""
import os, shutil, subprocess, sys, tempfile, time, socket
from kafka import KafkaConsumer, TopicPartition
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

strata, slots, partitions, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
d = tempfile.mkdtemp()
def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
port, mport = free(), free()
b = f"127.0.0.1:{port}"
proc = subprocess.Popen([strata, "--override", f"listeners=PLAINTEXT://{b}", "--override", f"advertised.listeners=PLAINTEXT://{b}",
                         "--override", f"log.dirs={d}", "--override", f"metrics.listener=http://127.0.0.1:{mport}",
                         "--override", f"max.incremental.fetch.session.cache.slots={slots}"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close(); break
    except OSError:
        time.sleep(0.05)
a = AdminClient({"bootstrap.servers": b})
a.create_topics([NewTopic("many", partitions, 1)])["many"].result(timeout=30)
p = Producer({"bootstrap.servers": b})
c = KafkaConsumer(bootstrap_servers=b, fetch_max_wait_ms=100, enable_auto_commit=False)
c.assign([TopicPartition("many", i) for i in range(partitions)])
c.seek_to_beginning()
c.poll(timeout_ms=1000)

import urllib.request
def fetches():
    for line in urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics").read().decode().splitlines():
        if line.startswith('kafka_network_requestmetrics_requests_total{request="Fetch"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0

def cpu():
    f = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

f0 = fetches()
t0, c0, n, got = time.monotonic(), cpu(), 0, 0
while time.monotonic() - t0 < seconds:
    p.produce("many", value=b"x", partition=n % partitions); n += 1; p.poll(0)
    for recs in c.poll(timeout_ms=50).values():
        got += len(recs)
el, used = time.monotonic() - t0, cpu() - c0
nf = fetches() - f0
p.flush(5)
c.close()
proc.terminate(); proc.wait()
shutil.rmtree(d, ignore_errors=True)
print(f"slots={slots} partitions={partitions} broker_cpu_s={used:.2f} fetches={nf:.0f} broker_cpu_ms_per_fetch={1000*used/max(nf,1):.3f} over {el:.1f}s produced={n} consumed={got}")
