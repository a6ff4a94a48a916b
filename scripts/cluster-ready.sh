# Sourced by scripts that start a Strata cluster by hand (scripts/librdkafka-suite.sh,
# benches/cluster-mode.sh).
#
# wait_for_brokers STRATA COUNT PORT...: waits until the node on each PORT of 127.0.0.1
# describes a cluster of COUNT brokers; returns 1 (naming the port) after 10 s.
# Listening is not registered: a node stays fenced until the controller has its first
# heartbeat, and DescribeCluster and Metadata list unfenced brokers only, so a topic of
# replication factor COUNT created before then is refused.
wait_for_brokers() {
    local strata=$1 count=$2 port seen
    shift 2
    for port in "$@"; do
        for _ in $(seq 200); do
            seen=$("$strata" cluster info -b "127.0.0.1:$port" --format json 2>/dev/null \
                | grep -o '"port":' | wc -l || true)
            [ "$seen" = "$count" ] && break
            sleep 0.05
        done
        [ "$seen" = "$count" ] || { echo "node on port $port sees $seen of $count brokers" >&2; return 1; }
    done
}
