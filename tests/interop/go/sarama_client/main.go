// A small IBM/sarama program (the version in ../go.mod) driven by
// tests/interop/test_go_clients.py against the real strata binary:
//
//	sarama_client produce BOOTSTRAP TOPIC N [idempotent]
//	    sends N records ("go-<i>", key "k<i>") with a sync producer (acks=all), prints
//	    one "partition offset" line per acknowledgement;
//	sarama_client consume BOOTSTRAP TOPIC GROUP N
//	    joins GROUP, reads N records from the oldest offset, marks them and commits
//	    them synchronously, prints one "partition offset value" line per record, and
//	    leaves the group.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

func config() *sarama.Config {
	c := sarama.NewConfig()
	// The request versions sarama sends follow Config.Version (its default is 2.8):
	// 4.0 makes it speak as to a current Kafka.
	c.Version = sarama.V4_0_0_0
	c.ClientID = "strata-interop-sarama"
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Return.Errors = true
	c.Metadata.Retry.Max = 20
	c.Metadata.Retry.Backoff = 250 * time.Millisecond
	return c
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func produce(bootstrap, topic string, n int, idempotent bool) {
	c := config()
	if idempotent {
		c.Producer.Idempotent = true
		c.Net.MaxOpenRequests = 1
		c.Producer.Retry.Max = 10
	}
	p, err := sarama.NewSyncProducer([]string{bootstrap}, c)
	if err != nil {
		fail("producer: %v", err)
	}
	defer p.Close()
	for i := 0; i < n; i++ {
		msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k" + strconv.Itoa(i)),
			Value: sarama.StringEncoder("go-" + strconv.Itoa(i))}
		partition, offset, err := p.SendMessage(msg)
		if err != nil {
			fail("send %d: %v", i, err)
		}
		fmt.Printf("%d %d\n", partition, offset)
	}
}

type handler struct {
	mu   sync.Mutex
	left int
	done chan struct{}
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		if h.left > 0 {
			fmt.Printf("%d %d %s\n", m.Partition, m.Offset, string(m.Value))
			s.MarkMessage(m, "")
			h.left--
			if h.left == 0 {
				// A synchronous OffsetCommit of what was marked, not left to the
				// commit interval.
				s.Commit()
				close(h.done)
			}
		}
		h.mu.Unlock()
	}
	return nil
}

func consume(bootstrap, topic, group string, n int) {
	c := config()
	c.Consumer.Offsets.CommitInterval = 100 * time.Millisecond
	g, err := sarama.NewConsumerGroup([]string{bootstrap}, group, c)
	if err != nil {
		fail("group: %v", err)
	}
	h := &handler{left: n, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for err := range g.Errors() {
			fmt.Fprintf(os.Stderr, "group error: %v\n", err)
		}
	}()
	go func() {
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, h); err != nil {
				fmt.Fprintf(os.Stderr, "consume: %v\n", err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	select {
	case <-h.done:
	case <-time.After(60 * time.Second):
		fail("read %d of %d records in 60 s", n-h.left, n)
	}
	// Closing commits what was marked (the offset manager flushes on close).
	cancel()
	if err := g.Close(); err != nil {
		fail("close: %v", err)
	}
}

func main() {
	if len(os.Args) < 5 {
		fail("usage: sarama_client produce BOOTSTRAP TOPIC N [idempotent] | consume BOOTSTRAP TOPIC GROUP N")
	}
	switch os.Args[1] {
	case "produce":
		n, _ := strconv.Atoi(os.Args[4])
		produce(os.Args[2], os.Args[3], n, len(os.Args) > 5 && os.Args[5] == "idempotent")
	case "consume":
		n, _ := strconv.Atoi(os.Args[5])
		consume(os.Args[2], os.Args[3], os.Args[4], n)
	default:
		fail("unknown mode %s", os.Args[1])
	}
}
