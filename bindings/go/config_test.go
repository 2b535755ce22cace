package stagger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }
func errorsIs(err, target error) bool     { return errors.Is(err, target) }

func TestBadSettingsAreConfigErrorsNamingTheField(t *testing.T) {
	cases := []struct {
		opts  []Option
		field string
	}{
		{[]Option{WithSetting("fanout.jitter", "2")}, "settings.fanout.jitter"},
		{[]Option{WithSetting("fanout.max_in_flight", "three")}, "settings.fanout.max_in_flight"},
		{[]Option{WithPreset("eventually")}, "preset"},
		{[]Option{WithSASL(ScramSHA512, "", "pw")}, "sasl.username"},
		{[]Option{WithSASL("GSSAPI", "u", "pw")}, "sasl.mechanism"},
		{[]Option{WithMaxFrameSize(10)}, "max_frame_size"},
	}
	for _, c := range cases {
		_, err := NewClient([]string{"127.0.0.1:9092"}, c.opts...)
		var cerr *ConfigError
		if !errors.As(err, &cerr) || cerr.Field != c.field {
			t.Errorf("want a ConfigError for %s, got %v", c.field, err)
			continue
		}
		_, err = Metadata(context.Background(), []string{"127.0.0.1:9092"}, c.opts...)
		if !errors.As(err, &cerr) || cerr.Field != c.field {
			t.Errorf("Metadata: want a ConfigError for %s, got %v", c.field, err)
		}
	}
	_, err := Metadata(context.Background(), nil)
	var cerr *ConfigError
	if !errors.As(err, &cerr) || cerr.Field != "seeds" {
		t.Errorf("no seeds: %v", err)
	}
	_, err = Metadata(context.Background(), []string{"no-port"})
	if !errors.As(err, &cerr) || !strings.HasPrefix(cerr.Field, "seeds") {
		t.Errorf("a seed without a port: %v", err)
	}
}

func TestValidSettingsAndPresetsAreTaken(t *testing.T) {
	for _, preset := range []string{PresetAdaptive, PresetSequential, PresetAllAtOnce, PresetStaggered} {
		c, err := NewClient([]string{"127.0.0.1:1"}, WithPreset(preset), WithSetting("refresh_interval", "1min"),
			WithSetting("retry.retries", "0"), WithClientID("orders-service"), WithTopics("orders"))
		if err != nil {
			t.Fatalf("%s: %v", preset, err)
		}
		if c.interval != time.Minute {
			t.Errorf("refresh interval %v", c.interval)
		}
		_ = c.Close()
	}
	c, err := NewClient([]string{"127.0.0.1:1"}, WithSetting("fanout.stagger.adaptive.silent_tls", "20ms"))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
}

func TestSecretsAreNeverPrinted(t *testing.T) {
	const password, token = "hunter2-password", "eyJ-token-secret"
	refused := refusedAddress(t)
	c, err := NewClient([]string{refused}, WithSASL(ScramSHA256, "alice", password), WithSetting("retry.retries", "0"))
	if err != nil {
		t.Fatal(err)
	}
	_, rerr := c.Refresh(testContext(t))
	cfg, _ := newConfig([]string{refused}, []Option{WithSASL(Plain, "alice", password)})
	printed := []string{
		fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprint(rerr), fmt.Sprintf("%+v", rerr),
		fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg),
	}
	_ = c.Close()
	tokenCfg, _ := newConfig([]string{refused}, []Option{WithOAuthBearer(func(context.Context) (string, error) { return token, nil })})
	printed = append(printed, fmt.Sprintf("%+v", tokenCfg), fmt.Sprintf("%#v", tokenCfg))
	_, err = NewClient([]string{refused}, WithSASL(ScramSHA256, "", password))
	printed = append(printed, fmt.Sprint(err))
	for _, p := range printed {
		if strings.Contains(p, password) || strings.Contains(p, token) {
			t.Errorf("a secret was printed: %s", p)
		}
	}
}
