package coord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Credentials in an etcd endpoint authenticate the client and appear nowhere: not in
// Client.Endpoints, not in any error (wrong password, unreachable endpoint).
func TestEndpointCredentialsAuthenticateAndAreRedacted(t *testing.T) {
	const secret = "PLANTEDetcdSecret"
	e, err := StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ep := e.Endpoints()[0]
	withCreds := strings.Replace(ep, "http://", "http://root:"+secret+"@", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Without authentication enabled the credentials are accepted and unused.
	c, err := Connect(ctx, Config{Endpoints: []string{withCreds}})
	if err != nil {
		t.Fatalf("connect with credentials to a cluster without auth: %v", err)
	}
	if got := c.Endpoints(); len(got) != 1 || got[0] != ep {
		t.Fatalf("Endpoints() = %v, want %v", got, ep)
	}
	// Enable authentication: root with the planted password.
	cli := c.Etcd()
	if _, err := cli.RoleAdd(ctx, "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserAdd(ctx, "root", secret); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()

	ok, err := Connect(ctx, Config{Endpoints: []string{withCreds}})
	if err != nil {
		t.Fatalf("connect with the right password: %v", err)
	}
	if _, err := ok.Etcd().Put(ctx, "k", "v"); err != nil {
		t.Fatalf("authenticated put: %v", err)
	}
	ok.Close()

	wrong := strings.Replace(ep, "http://", "http://root:WRONG"+secret+"@", 1)
	if _, err := Connect(ctx, Config{Endpoints: []string{wrong}, DialTimeout: 2 * time.Second}); err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("connect with a wrong password: %v", err)
	}
	if _, err := Connect(ctx, Config{Endpoints: []string{ep}, DialTimeout: 2 * time.Second}); err == nil {
		t.Fatal("connect without credentials to a cluster with auth succeeded")
	}

	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	for _, dead := range []string{
		fmt.Sprintf("http://root:%s@127.0.0.1:%d", secret, port),
		fmt.Sprintf("root:%s@127.0.0.1:%d", secret, port),
	} {
		_, err := Connect(ctx, Config{Endpoints: []string{dead}, DialTimeout: 300 * time.Millisecond})
		if !errors.Is(err, ErrConnect) || strings.Contains(err.Error(), secret) {
			t.Fatalf("connect to %s: %v", RedactEndpoint(dead), err)
		}
	}
	_, err = Connect(ctx, Config{Endpoints: []string{withCreds, strings.Replace(withCreds, secret, "other", 1)}})
	if !errors.Is(err, ErrConnect) || strings.Contains(err.Error(), secret) {
		t.Fatalf("endpoints with different credentials: %v", err)
	}
}

func TestRedactEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"http://u:pw@127.0.0.1:2379": "http://REDACTED@127.0.0.1:2379",
		"u:pw@127.0.0.1:2379":        "REDACTED@127.0.0.1:2379",
		"https://u@h:1/x":            "https://REDACTED@h:1/x",
		"http://127.0.0.1:2379":      "http://127.0.0.1:2379",
		"127.0.0.1:2379":             "127.0.0.1:2379",
	} {
		if got := RedactEndpoint(in); got != want {
			t.Errorf("RedactEndpoint(%q) = %q, want %q", in, got, want)
		}
	}
}
