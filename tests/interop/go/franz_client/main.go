// A small twmb/franz-go program (kgo and kadm, the versions in ../go.mod) driven by
// tests/interop/test_go_franz.py (and, for transact, test_go_franz_cluster.py) against the real
// strata binary. BOOTSTRAP is host:port[,host:port...]. Every wait is bounded.
//
//	franz_client produce BOOTSTRAP TOPIC N PARTITIONS
//	    kgo's default producer (idempotent, acks=all) sends N records ("fr-<i>", key "k<i>",
//	    partition i mod PARTITIONS) in one ProduceSync, prints one "partition offset value"
//	    line per record in send order;
//	franz_client consume BOOTSTRAP TOPIC GROUP N
//	    a kgo.ConsumerGroup member (cooperative-sticky, the default balancer) reads N records
//	    from the start, prints one "partition offset value" line per record, describes its
//	    group with kadm while still in it (one "group {json}" line), commits what it read
//	    with CommitRecords and leaves the group;
//	franz_client txn BOOTSTRAP TOPIC N
//	    a kgo.TransactionalID producer runs three transactions of N records each on
//	    partition 0: "c1-<i>" committed, "a-<i>" aborted, "c2-<i>" committed; prints
//	    "commit|abort partition offset value" per record;
//	franz_client admin-create BOOTSTRAP TOPIC PARTITIONS
//	    kadm CreateTopic (replication factor 1), then ListTopics until it lists TOPIC with
//	    PARTITIONS partitions; prints one "created {json}" line;
//	franz_client admin-describe BOOTSTRAP TOPIC GROUP
//	    kadm ListStartOffsets, ListEndOffsets, FetchOffsets(GROUP) and DescribeGroups(GROUP);
//	    prints one "described {json}" line;
//	franz_client transact BOOTSTRAP IN_TOPIC OUT_TOPIC GROUP TXN_ID EXPECTED
//	    consume-transform-produce in a kgo.GroupTransactSession (group GROUP, read_committed,
//	    transactional id TXN_ID): the records of each poll (at most 100) are copied, key and
//	    value, to the same partition of OUT_TOPIC in one transaction that also commits the
//	    group's offsets; prints "committed N" or "aborted N" per transaction and "done TOTAL"
//	    once EXPECTED records were committed (within transactDeadline); franz-go's info log
//	    goes to stderr (each distinct line at most 20 times).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const deadline = 60 * time.Second

const clientID = "strata-interop-franz"

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail("not a number: %q", s)
	}
	return n
}

func client(bootstrap string, opts ...kgo.Opt) *kgo.Client {
	opts = append([]kgo.Opt{kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ClientID(clientID)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fail("client: %v", err)
	}
	return cl
}

func printJSON(tag string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fail("json: %v", err)
	}
	fmt.Printf("%s %s\n", tag, b)
}

func produce(bootstrap, topic string, n, partitions int) {
	cl := client(bootstrap, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte("k" + strconv.Itoa(i)), Value: []byte("fr-" + strconv.Itoa(i)),
			Partition: int32(i % partitions)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		fail("produce: %v", err)
	}
	for _, r := range recs {
		fmt.Printf("%d %d %s\n", r.Partition, r.Offset, r.Value)
	}
}

func consume(bootstrap, topic, group string, n int) {
	cl := client(bootstrap, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close() // leaves the group
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var read []*kgo.Record
	for len(read) < n {
		fs := cl.PollRecords(ctx, n-len(read))
		if ctx.Err() != nil {
			fail("read %d of %d records in %v", len(read), n, deadline)
		}
		fs.EachError(func(t string, p int32, err error) { fmt.Fprintf(os.Stderr, "fetch %s/%d: %v\n", t, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			fmt.Printf("%d %d %s\n", r.Partition, r.Offset, r.Value)
			read = append(read, r)
		})
	}
	describeOwnGroup(ctx, cl, group)
	if err := cl.CommitRecords(ctx, read...); err != nil {
		fail("commit: %v", err)
	}
}

// describeOwnGroup prints what DescribeGroups says of the group while this member is in it.
func describeOwnGroup(ctx context.Context, cl *kgo.Client, group string) {
	gs, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err != nil {
		fail("describe groups: %v", err)
	}
	g := gs[group]
	if g.Err != nil {
		fail("describe group %s: %v", group, g.Err)
	}
	assigned := map[string][]int32{}
	for _, m := range g.Members {
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				assigned[t.Topic] = append(assigned[t.Topic], t.Partitions...)
			}
		}
	}
	printJSON("group", map[string]any{"state": g.State, "protocol_type": g.ProtocolType,
		"protocol": g.Protocol, "members": len(g.Members), "assigned": assigned})
}

func txn(bootstrap, topic string, n int) {
	cl := client(bootstrap, kgo.DefaultProduceTopic(topic), kgo.TransactionalID("strata-franz-"+topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for _, t := range []struct {
		prefix, verb string
		end          kgo.TransactionEndTry
	}{{"c1-", "commit", kgo.TryCommit}, {"a-", "abort", kgo.TryAbort}, {"c2-", "commit", kgo.TryCommit}} {
		if err := cl.BeginTransaction(); err != nil {
			fail("begin: %v", err)
		}
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Value: []byte(t.prefix + strconv.Itoa(i)), Partition: 0}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			fail("produce %s: %v", t.prefix, err)
		}
		if err := cl.EndTransaction(ctx, t.end); err != nil {
			fail("end transaction (%s): %v", t.verb, err)
		}
		for _, r := range recs {
			fmt.Printf("%s %d %d %s\n", t.verb, r.Partition, r.Offset, r.Value)
		}
	}
}

func adminCreate(bootstrap, topic string, partitions int) {
	cl := client(bootstrap)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	r, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		fail("create topic: %v", err)
	}
	for {
		ts, err := adm.ListTopics(ctx)
		if err == nil && ts.Has(topic) && len(ts[topic].Partitions) == partitions {
			printJSON("created", map[string]any{"topic": r.Topic, "partitions": r.NumPartitions,
				"listed_partitions": len(ts[topic].Partitions), "topic_id": ts[topic].ID.String()})
			return
		}
		select {
		case <-ctx.Done():
			fail("topic %s with %d partitions not listed in %v (last error: %v)", topic, partitions, deadline, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func adminDescribe(bootstrap, topic, group string) {
	cl := client(bootstrap)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	offsets := func(what string, l kadm.ListedOffsets, err error) map[int32]int64 {
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			fail("%s: %v", what, err)
		}
		out := map[int32]int64{}
		l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return out
	}
	start, err := adm.ListStartOffsets(ctx, topic)
	startOffsets := offsets("list start offsets", start, err)
	end, err := adm.ListEndOffsets(ctx, topic)
	endOffsets := offsets("list end offsets", end, err)
	fetched, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		fail("fetch offsets: %v", err)
	}
	committed := map[int32]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			committed[o.Partition] = o.At
		}
	})
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil || gs[group].Err != nil {
		fail("describe group: %v %v", err, gs[group].Err)
	}
	g := gs[group]
	printJSON("described", map[string]any{"start": startOffsets, "end": endOffsets, "committed": committed,
		"group": map[string]any{"state": g.State, "protocol_type": g.ProtocolType, "members": len(g.Members)}})
}

// transactDeadline bounds the whole transact run, which outlives broker restarts.
const transactDeadline = 120 * time.Second

// maxPerTransaction caps the records of one poll, so that a run is many transactions.
const maxPerTransaction = 100

// quietLog passes on each distinct line of franz-go's log at most maxRepeats times: a client
// retrying in a tight loop logs the same line per try, and the run must neither fill the disk
// nor push the lines that explain it out of the test's view.
type quietLog struct {
	mu         sync.Mutex // franz-go logs from many goroutines
	seen       map[string]int
	maxRepeats int
}

func (q *quietLog) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seen[string(p)]++
	switch n := q.seen[string(p)]; {
	case n <= q.maxRepeats:
		return os.Stderr.Write(p)
	case n == q.maxRepeats+1:
		fmt.Fprintf(os.Stderr, "(the line above is repeated; its next repeats are not logged)\n")
	}
	return len(p), nil
}

func transact(bootstrap, in, out, group, txnID string, expected int) {
	// RequireStableFetchOffsets is not passed: it is deprecated and a no-op in this franz-go,
	// whose group consumers always ask for stable offsets (KIP-447).
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ClientID(clientID), kgo.TransactionalID(txnID), kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic(out),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.WithLogger(kgo.BasicLogger(&quietLog{seen: map[string]int{}, maxRepeats: 20}, kgo.LogLevelInfo, nil)))
	if err != nil {
		fail("transact session: %v", err)
	}
	defer sess.Close() // aborts an open transaction and leaves the group
	ctx, cancel := context.WithTimeout(context.Background(), transactDeadline)
	defer cancel()
	total := 0
	for total < expected {
		if ctx.Err() != nil {
			fail("committed %d of %d records in %v", total, expected, transactDeadline)
		}
		// A short poll, so that the deadline is checked while nothing arrives.
		pollCtx, pollCancel := context.WithTimeout(ctx, 2*time.Second)
		fs := sess.PollRecords(pollCtx, maxPerTransaction)
		pollCancel()
		if fs.IsClientClosed() {
			fail("client closed after %d of %d records", total, expected)
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				fmt.Fprintf(os.Stderr, "fetch %s/%d: %v\n", t, p, err)
			}
		})
		n := fs.NumRecords()
		if n == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			fail("begin: %v", err)
		}
		// A failed produce aborts what is still buffered; End then aborts the transaction.
		e := kgo.AbortingFirstErrPromise(sess.Client())
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: out, Partition: r.Partition, Key: r.Key, Value: r.Value}, e.Promise())
		})
		if err := e.Err(); err != nil {
			fmt.Fprintf(os.Stderr, "produce in transaction: %v\n", err)
		}
		// End commits unless a produce failed or the group rebalanced; an abort rewinds the
		// session to the last committed offsets, so the next polls read the records again.
		// An error is not retryable (franz-go's documentation): the run ends.
		committed, err := sess.End(ctx, e.Err() == nil)
		if err != nil {
			fail("end transaction after %d of %d records: %v", total, expected, err)
		}
		if committed {
			total += n
			fmt.Printf("committed %d\n", n)
		} else {
			fmt.Printf("aborted %d\n", n)
		}
	}
	fmt.Printf("done %d\n", total)
}

func main() {
	usage := "usage: franz_client produce BOOTSTRAP TOPIC N PARTITIONS | consume BOOTSTRAP TOPIC GROUP N | " +
		"txn BOOTSTRAP TOPIC N | admin-create BOOTSTRAP TOPIC PARTITIONS | admin-describe BOOTSTRAP TOPIC GROUP | " +
		"transact BOOTSTRAP IN_TOPIC OUT_TOPIC GROUP TXN_ID EXPECTED"
	a := os.Args
	switch {
	case len(a) == 6 && a[1] == "produce":
		produce(a[2], a[3], atoi(a[4]), atoi(a[5]))
	case len(a) == 6 && a[1] == "consume":
		consume(a[2], a[3], a[4], atoi(a[5]))
	case len(a) == 5 && a[1] == "txn":
		txn(a[2], a[3], atoi(a[4]))
	case len(a) == 5 && a[1] == "admin-create":
		adminCreate(a[2], a[3], atoi(a[4]))
	case len(a) == 5 && a[1] == "admin-describe":
		adminDescribe(a[2], a[3], a[4])
	case len(a) == 8 && a[1] == "transact":
		transact(a[2], a[3], a[4], a[5], a[6], atoi(a[7]))
	default:
		fail("%s", usage)
	}
}
