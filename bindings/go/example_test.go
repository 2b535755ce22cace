package stagger_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"stagger.dev/go/stagger"
)

// One refresh, and the seed list to hand to another Kafka client (Sarama, franz-go): the
// broker that answered first, then every other broker the cluster lists and every seed,
// less those stagger saw failing or silent (hung, blackholed) during the refresh.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	md, err := stagger.Metadata(ctx, []string{"kafka-1:9092", "kafka-2:9092", "kafka-3:9092"}, stagger.WithTopics())
	if err != nil {
		fmt.Println(err) // a *stagger.RefreshError: the last error and every broker's
		return
	}
	fmt.Println("answered by", md.AnsweredBy)
	ordered := md.Seeds()
	// sarama.NewClient(ordered, config) or kgo.NewClient(kgo.SeedBrokers(ordered...))
	fmt.Println(ordered)
}

// A long-lived client over TLS with SCRAM: its metadata is cached for the refresh interval
// and refreshed by the session itself.
func ExampleNewClient() {
	client, err := stagger.NewClient([]string{"kafka-1:9093", "kafka-2:9093"},
		stagger.WithTLS(&tls.Config{MinVersion: tls.VersionTLS12}),
		stagger.WithSASL(stagger.ScramSHA512, "orders", "secret"),
		stagger.WithSetting("refresh_interval", "60s"),
		stagger.WithSetting("fanout.stagger.adaptive.silent_tls", "20ms"),
		stagger.WithClientID("orders-service"),
		stagger.WithTopics("orders", "payments"))
	if err != nil {
		fmt.Println(err) // a *stagger.ConfigError names the field
		return
	}
	defer client.Close()
	md, err := client.Metadata(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	if orders, ok := md.Topic("orders"); ok {
		for _, p := range orders.Partitions {
			leader, _ := md.Broker(p.Leader)
			fmt.Println(p.ID, leader.Address())
		}
	}
	// A producer saw NOT_LEADER_OR_FOLLOWER: ask again, saying why.
	_, _ = client.RefreshBecause(context.Background(), stagger.CauseStaleMetadata, "")
}

// Every broker's error, when no broker answered.
func ExampleRefreshError() {
	_, err := stagger.Metadata(context.Background(), []string{"127.0.0.1:1"}, stagger.WithSetting("retry.retries", "0"))
	var refresh *stagger.RefreshError
	if errors.As(err, &refresh) {
		fmt.Println(refresh.Reason, refresh.Last.Kind)
		for _, b := range refresh.Brokers {
			fmt.Println(b.Address, b.Err.Kind)
		}
	}
	// Output:
	// all_failed refused
	// 127.0.0.1:1 refused
}

// OAUTHBEARER: the token func is called for every new connection.
func ExampleWithOAuthBearer() {
	token := func(ctx context.Context) (string, error) {
		return "eyJ...", nil // fetch from your identity provider, honouring ctx
	}
	_, _ = stagger.Metadata(context.Background(), []string{"kafka-1:9092"}, stagger.WithOAuthBearer(token))
}
