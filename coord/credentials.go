package coord

import (
	"fmt"
	"net/url"
	"strings"
)

// redacted replaces credentials in an endpoint shown in a message.
const redacted = "REDACTED"

// RedactEndpoint returns an etcd endpoint fit for messages, logs and output: its user
// info (http://user:password@host:2379) becomes REDACTED. Connect removes user info from
// the endpoints it dials (and uses it to authenticate), so Client.Endpoints and every
// error of this package already carry none.
func RedactEndpoint(ep string) string {
	if info, host, ok := splitUserinfo(ep); ok && info != "" {
		return strings.Replace(ep, info+"@"+host, redacted+"@"+host, 1)
	}
	return ep
}

// RedactEndpoints is RedactEndpoint of each endpoint.
func RedactEndpoints(eps []string) []string {
	out := make([]string, len(eps))
	for i, ep := range eps {
		out[i] = RedactEndpoint(ep)
	}
	return out
}

// splitUserinfo finds the user info of an endpoint, with or without a scheme
// ("http://u:p@h:2379", "u:p@h:2379"), and the host part that follows it.
func splitUserinfo(ep string) (info, host string, ok bool) {
	rest := ep
	if _, r, found := strings.Cut(ep, "://"); found {
		rest = r
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return "", rest, false
	}
	return rest[:at], rest[at+1:], true
}

// endpointAuth takes the user info out of cfg.Endpoints: it returns the endpoints to dial
// and the user name and password to authenticate with (cfg.Username and cfg.Password
// when set). Endpoints that carry different credentials are an error.
func endpointAuth(cfg Config) (eps []string, user, password string, err error) {
	user, password = cfg.Username, cfg.Password
	var fromURL string
	for _, ep := range cfg.Endpoints {
		info, host, ok := splitUserinfo(ep)
		if !ok {
			eps = append(eps, ep)
			continue
		}
		clean := strings.Replace(ep, info+"@"+host, host, 1)
		eps = append(eps, clean)
		if fromURL != "" && info != fromURL {
			return nil, "", "", fmt.Errorf("%w: endpoints %v carry different credentials", ErrConnect, RedactEndpoints(cfg.Endpoints))
		}
		fromURL = info
	}
	if fromURL != "" && cfg.Username == "" {
		u, p, _ := strings.Cut(fromURL, ":")
		if uu, err := url.PathUnescape(u); err == nil {
			u = uu
		}
		if pp, err := url.PathUnescape(p); err == nil {
			p = pp
		}
		user, password = u, p
	}
	return eps, user, password, nil
}
