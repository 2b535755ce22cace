// Command bootstrap is the recipe for a Sarama or franz-go user: before building your Kafka
// client, ask stagger which seeds are alive and which broker answered, and hand the client
// an ordered seed list (md.Seeds()): the broker that answered first, then every other broker
// the cluster lists and every seed, except the ones stagger saw failing (refused, reset,
// timed out) or silent (connected or not, never answered: hung or blackholed) during its
// refresh. Kafka's metadata still lists a hung broker (a stopped process stays registered)
// and these clients start at a random seed of their list, so a bad broker left in it would
// still cost them a timeout now and then; left out, a hung, killed or blackholed seed at the
// head of your list costs milliseconds instead.
//
//	go run ./examples/bootstrap -seeds kafka-1:9092,kafka-2:9092,kafka-3:9092
//
// Copy main's body into your program; it needs nothing but this package.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"stagger.dev/go/stagger"
)

func main() {
	seedList := flag.String("seeds", "127.0.0.1:9092", "comma-separated host:port of the bootstrap brokers")
	timeout := flag.Duration("timeout", 15*time.Second, "give up after this long")
	listedOrder := flag.Bool("listed-order", false, "ask the seeds in the order listed (default: shuffled, as Kafka clients do)")
	flag.Parse()
	seeds := strings.Split(*seedList, ",")

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	// WithTopics() with no topic asks for the brokers only: a small answer. Add
	// stagger.WithTLS(tlsConfig) and stagger.WithSASL(stagger.ScramSHA512, user, password)
	// as your client uses them.
	opts := []stagger.Option{stagger.WithTopics()}
	if *listedOrder {
		opts = append(opts, stagger.WithSetting("shuffle_seeds", "false"))
	}
	md, err := stagger.Metadata(ctx, seeds, opts...)
	var refresh *stagger.RefreshError
	if errors.As(err, &refresh) {
		fmt.Fprintln(os.Stderr, "no seed answered:")
		for _, b := range refresh.Brokers {
			fmt.Fprintf(os.Stderr, "  %s: %s\n", b.Address, b.Story)
		}
		os.Exit(1)
	} else if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	fmt.Printf("answered by %s in %v (cluster %s)\n", md.AnsweredBy, md.Elapsed.Round(time.Millisecond), md.ClusterID)
	for _, a := range md.Attempts {
		fmt.Printf("  %-24s %s %s%s\n", a.Broker, a.Outcome, a.Reason, a.Error)
	}
	listed := make([]string, len(md.Brokers))
	for i, b := range md.Brokers {
		listed[i] = b.Address()
	}
	fmt.Println("listed:", strings.Join(listed, ","))
	// The broker that answered, then the listed brokers and the seeds stagger did not see
	// failing or silent.
	ordered := md.Seeds()
	fmt.Println("seeds:", strings.Join(ordered, ","))

	// Hand the ordered list to your client's constructor:
	//
	//	sarama:   client, err := sarama.NewClient(ordered, sarama.NewConfig())
	//	franz-go: client, err := kgo.NewClient(kgo.SeedBrokers(ordered...))
	//	config files: bootstrap.servers=<strings.Join(ordered, ",")>
}
