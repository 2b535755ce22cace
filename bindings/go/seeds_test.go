package stagger

import (
	"slices"
	"testing"
	"time"
)

// attempt is one report row for the Seeds tests: -1 for a step the attempt did not reach.
func attempt(broker, outcome string, connected, answered time.Duration) Attempt {
	return Attempt{Broker: broker, Outcome: outcome, Connected: connected, Answered: answered, Ended: 30 * time.Millisecond}
}

func TestSeedsLeaveOutEveryBrokerSeenFailingOrSilentAndKeepTheSlowAndTheUntried(t *testing.T) {
	milli := time.Millisecond
	md := &ClusterMetadata{
		// The cluster lists the hung broker (k2) and the refused one (k1) too.
		Brokers: []Broker{
			{NodeID: 5, Host: "k5", Port: 9092},
			{NodeID: 3, Host: "k3", Port: 9092},
			{NodeID: 1, Host: "k1", Port: 9092},
			{NodeID: 2, Host: "k2", Port: 9092},
			{NodeID: 4, Host: "k4", Port: 9092},
		},
		GivenSeeds: []string{"k1:9092", "k2:9092", "10.9.9.9:9092", "k3:9092", "k4:9092", "k6:9092"},
		AnsweredBy: "k4:9092",
		Attempts: []Attempt{
			attempt("k1:9092", "failed", -1, -1),              // refused
			attempt("k2:9092", "cancelled", 1*milli, -1),      // connected, then silent: hung
			attempt("10.9.9.9:9092", "cancelled", -1, -1),     // no connection: blackholed
			attempt("k3:9092", "cancelled", 2*milli, 9*milli), // answered, after the winner
			attempt("k4:9092", "won", 2*milli, 5*milli),
		},
	}
	// The winner; then the listed brokers in the metadata's order (k5 never tried, k3 only
	// slower), then the seeds the metadata does not list (k6 never tried).
	want := []string{"k4:9092", "k5:9092", "k3:9092", "k6:9092"}
	if got := md.Seeds(); !slices.Equal(got, want) {
		t.Fatalf("Seeds() = %v, want %v", got, want)
	}
}

func TestSeedsKeepABrokerWhoseAttemptStartedAfterTheWinningOne(t *testing.T) {
	milli := time.Millisecond
	hung := attempt("k1:9092", "cancelled", 1*milli, -1)
	winner := attempt("k2:9092", "won", 51*milli, 52*milli)
	winner.Started = 50 * milli
	late := attempt("k3:9092", "cancelled", -1, -1) // started 1 ms after the winner
	late.Started = 51 * milli
	md := &ClusterMetadata{
		Brokers: []Broker{
			{NodeID: 1, Host: "k1", Port: 9092}, {NodeID: 2, Host: "k2", Port: 9092}, {NodeID: 3, Host: "k3", Port: 9092},
		},
		AnsweredBy: "k2:9092",
		Attempts:   []Attempt{hung, winner, late},
	}
	if got, want := md.Seeds(), []string{"k2:9092", "k3:9092"}; !slices.Equal(got, want) {
		t.Fatalf("Seeds() = %v, want %v (k1 silent from the start, k3 had 1 ms)", got, want)
	}
}

func TestSeedsPutTheBrokerThatAnsweredFirstEvenAfterAnEarlierFailureOfIt(t *testing.T) {
	md := &ClusterMetadata{
		Brokers:    []Broker{{NodeID: 1, Host: "k1", Port: 9092}, {NodeID: 2, Host: "k2", Port: 9092}},
		GivenSeeds: []string{"k1:9092", "k2:9092"},
		AnsweredBy: "k2:9092",
		Attempts: []Attempt{
			attempt("k1:9092", "failed", -1, -1),
			attempt("k2:9092", "failed", -1, -1), // the first pass: refused
			attempt("k1:9092", "failed", -1, -1),
			attempt("k2:9092", "won", time.Millisecond, 2*time.Millisecond), // the second
		},
	}
	if got, want := md.Seeds(), []string{"k2:9092"}; !slices.Equal(got, want) {
		t.Fatalf("Seeds() = %v, want %v", got, want)
	}
}

func TestSeedsWithoutAttemptsListEveryBrokerAndSeed(t *testing.T) {
	md := &ClusterMetadata{
		Brokers:    []Broker{{NodeID: 1, Host: "k1", Port: 9092}, {NodeID: 2, Host: "::1", Port: 9093}},
		GivenSeeds: []string{"k1:9092", "k9:9092"},
		AnsweredBy: "k1:9092",
	}
	if got, want := md.Seeds(), []string{"k1:9092", "[::1]:9093", "k9:9092"}; !slices.Equal(got, want) {
		t.Fatalf("Seeds() = %v, want %v", got, want)
	}
}
