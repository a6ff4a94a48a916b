// A small segmentio/kafka-go program (the version in ../go.mod) driven by
// tests/interop/test_go_kafkago.py against the real strata binary. Every wait is bounded.
//
//	kafkago_client produce BOOTSTRAP TOPIC N
//	    a kafka.Writer (RequiredAcks all, round-robin balancer) writes N records ("kg-<i>",
//	    key "k<i>") in one WriteMessages call; prints one "partition offset value" line per
//	    record as its Completion reports it;
//	kafkago_client consume BOOTSTRAP TOPIC GROUP N
//	    a kafka.Reader with GroupID reads N records from the first offset with FetchMessage,
//	    commits them with CommitMessages (synchronously: CommitInterval 0), prints one
//	    "partition offset value" line per record and closes (leaving the group).
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

const deadline = 60 * time.Second

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

func produce(bootstrap, topic string, n int) {
	var mu sync.Mutex
	var acked []kafka.Message
	w := &kafka.Writer{
		Addr:         kafka.TCP(bootstrap),
		Topic:        topic,
		Balancer:     &kafka.RoundRobin{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 10 * time.Millisecond,
		WriteTimeout: 30 * time.Second,
		Completion: func(ms []kafka.Message, err error) {
			if err == nil {
				mu.Lock()
				acked = append(acked, ms...)
				mu.Unlock()
			}
		},
	}
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte("k" + strconv.Itoa(i)), Value: []byte("kg-" + strconv.Itoa(i))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	err := w.WriteMessages(ctx, msgs...)
	if cerr := w.Close(); err == nil {
		err = cerr // Close waits for the Completion calls
	}
	if err != nil {
		fail("write: %v", err)
	}
	for _, m := range acked {
		fmt.Printf("%d %d %s\n", m.Partition, m.Offset, m.Value)
	}
}

func consume(bootstrap, topic, group string, n int) {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:        []string{bootstrap},
		GroupID:        group,
		Topic:          topic,
		StartOffset:    kafka.FirstOffset,
		MaxWait:        200 * time.Millisecond,
		CommitInterval: 0,
	})
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for i := 0; i < n; i++ {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			fail("read %d of %d records: %v", i, n, err)
		}
		fmt.Printf("%d %d %s\n", m.Partition, m.Offset, m.Value)
		if err := r.CommitMessages(ctx, m); err != nil {
			fail("commit %d/%d: %v", m.Partition, m.Offset, err)
		}
	}
	if err := r.Close(); err != nil {
		fail("close: %v", err)
	}
}

func main() {
	a := os.Args
	switch {
	case len(a) == 5 && a[1] == "produce":
		produce(a[2], a[3], atoi(a[4]))
	case len(a) == 6 && a[1] == "consume":
		consume(a[2], a[3], a[4], atoi(a[5]))
	default:
		fail("usage: kafkago_client produce BOOTSTRAP TOPIC N | consume BOOTSTRAP TOPIC GROUP N")
	}
}
