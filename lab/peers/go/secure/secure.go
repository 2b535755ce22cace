// Package secure reads the benchmark's SASL_SSL settings (bench.py --listener sasl_ssl) for
// the Go probes: PEERS_SECURITY_PROTOCOL=SASL_SSL, PEERS_SASL_MECHANISM (SCRAM-SHA-256 or
// SCRAM-SHA-512), PEERS_SASL_USERNAME, PEERS_SASL_PASSWORD and PEERS_CA_FILE (a PEM file).
// Each probe turns them into its own client's options.
package secure

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Settings is what a probe needs to connect over SASL_SSL.
type Settings struct {
	// TLS verifies the brokers against the benchmark's CA.
	TLS *tls.Config
	// Mechanism is SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string
	User      string
	Password  string
}

// FromEnv returns the SASL_SSL settings, or nil over PLAINTEXT.
func FromEnv() (*Settings, error) {
	if os.Getenv("PEERS_SECURITY_PROTOCOL") != "SASL_SSL" {
		return nil, nil
	}
	ca := os.Getenv("PEERS_CA_FILE")
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", ca)
	}
	mechanism := os.Getenv("PEERS_SASL_MECHANISM")
	if mechanism != "SCRAM-SHA-256" && mechanism != "SCRAM-SHA-512" {
		return nil, fmt.Errorf("PEERS_SASL_MECHANISM %q is not SCRAM-SHA-256 or SCRAM-SHA-512", mechanism)
	}
	return &Settings{
		TLS:       &tls.Config{RootCAs: pool},
		Mechanism: mechanism,
		User:      os.Getenv("PEERS_SASL_USERNAME"),
		Password:  os.Getenv("PEERS_SASL_PASSWORD"),
	}, nil
}
