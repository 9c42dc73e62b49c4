package store

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Redacted replaces credentials in a redacted store URL.
const Redacted = "REDACTED"

// Redact returns a store URL fit for messages, logs and output: user info (s3's
// ACCESS_KEY_ID:SECRET_ACCESS_KEY) becomes REDACTED, so do the values of query parameters
// whose names look secret (containing secret, token, key, password, passwd, credential,
// signature or auth) and the user info of URLs nested in query values (endpoint=…).
// Query parameters come out sorted by name. A URL that does not parse gives
// "<unparseable store URL>". Every URL in a store error and in Store.URL is redacted.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "<unparseable store URL>"
	}
	if u.User != nil {
		u.User = url.User(Redacted)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			for i, v := range vs {
				switch {
				case secretParam(k):
					vs[i] = Redacted
				case strings.Contains(v, "@"):
					if nu, err := url.Parse(v); err == nil && nu.User != nil {
						nu.User = url.User(Redacted)
						vs[i] = nu.String()
					}
				}
			}
		}
		u.RawQuery = readableQuery(q)
	}
	return u.String()
}

// readableQuery is url.Values.Encode (keys sorted) leaving ":", "/" and "@" unescaped, which a
// query may hold as they are (RFC 3986, section 3.4): a redacted URL shows
// endpoint=http://127.0.0.1:9000 as it was typed, not endpoint=http%3A%2F%2F127.0.0.1%3A9000.
func readableQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	unescape := strings.NewReplacer("%3A", ":", "%2F", "/", "%40", "@")
	var b strings.Builder
	for _, k := range keys {
		for _, v := range q[k] {
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(unescape.Replace(url.QueryEscape(k)))
			b.WriteByte('=')
			b.WriteString(unescape.Replace(url.QueryEscape(v)))
		}
	}
	return b.String()
}

// secretParam reports whether a query parameter's value is to be hidden.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"secret", "token", "key", "password", "passwd", "credential", "signature", "auth"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// redactor removes a store URL's credentials from messages that libraries wrote (gocloud
// and the SDKs quote the URL or endpoint they were given in some errors).
type redactor struct{ pairs []string } // old, new, old, new, … for strings.NewReplacer

// newRedactor collects the secrets of rawURL: its user info, the values of secret-looking
// query parameters and the user info of URLs nested in query values. It works on URLs
// that do not parse, too.
func newRedactor(rawURL string) redactor {
	var r redactor
	add := func(secret, repl string) {
		if secret == "" {
			return
		}
		r.pairs = append(r.pairs, secret, repl)
		if un, err := url.PathUnescape(secret); err == nil && un != secret {
			r.pairs = append(r.pairs, un, repl)
		}
		if es := url.QueryEscape(secret); es != secret {
			r.pairs = append(r.pairs, es, repl)
		}
	}
	var userinfo func(s string)
	userinfo = func(s string) {
		_, rest, ok := strings.Cut(s, "://")
		if !ok {
			return
		}
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			rest = rest[:i]
		}
		at := strings.LastIndex(rest, "@")
		if at < 0 {
			return
		}
		info := rest[:at]
		add(info+"@", Redacted+"@")
		if _, pw, ok := strings.Cut(info, ":"); ok && len(pw) >= 4 {
			add(pw, Redacted)
		}
	}
	userinfo(rawURL)
	if _, query, ok := strings.Cut(rawURL, "?"); ok {
		query, _, _ = strings.Cut(query, "#")
		for _, kv := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(kv, "=")
			uk, _ := url.QueryUnescape(k)
			uv, err := url.QueryUnescape(v)
			if err != nil {
				uv = v
			}
			switch {
			case secretParam(uk) && v != "":
				add(k+"="+v, k+"="+Redacted)
				if len(uv) >= 4 {
					add(uv, Redacted)
				}
			case strings.Contains(uv, "@"):
				userinfo(uv)
			}
		}
	}
	// Longer secrets first, so a secret that contains another is replaced whole.
	type pair struct{ old, repl string }
	ps := make([]pair, 0, len(r.pairs)/2)
	for i := 0; i < len(r.pairs); i += 2 {
		ps = append(ps, pair{r.pairs[i], r.pairs[i+1]})
	}
	sort.SliceStable(ps, func(i, j int) bool { return len(ps[i].old) > len(ps[j].old) })
	r.pairs = r.pairs[:0]
	for _, p := range ps {
		r.pairs = append(r.pairs, p.old, p.repl)
	}
	return r
}

func (r redactor) scrub(s string) string {
	if len(r.pairs) == 0 {
		return s
	}
	return strings.NewReplacer(r.pairs...).Replace(s)
}

// wrap returns err with the secrets removed from its message; errors.Is and errors.As
// still see the original chain.
func (r redactor) wrap(err error) error {
	if err == nil || len(r.pairs) == 0 {
		return err
	}
	var e *Error
	if errors.As(err, &e) && e == err {
		c := *e
		c.Store = r.scrub(c.Store)
		if c.Err != nil {
			c.Err = r.wrap(c.Err)
		}
		return &c
	}
	msg := err.Error()
	clean := r.scrub(msg)
	if clean == msg {
		return err
	}
	return &scrubbedError{msg: clean, err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// ParseURL checks a store URL without any I/O and returns it parsed. A bare path, a
// relative file URL (file://dir/sub names the host "dir"), an unknown scheme or a missing
// bucket is an *Error of class ErrInvalidURL whose message says what the URL probably
// meant ("did you mean file:///data/x?"). Open calls it first.
func ParseURL(rawURL string) (*url.URL, error) {
	bad := func(format string, args ...any) error {
		return &Error{Op: OpOpen, Store: Redact(rawURL), Class: ErrInvalidURL, Err: fmt.Errorf(format, args...)}
	}
	if strings.TrimSpace(rawURL) == "" {
		return nil, bad("empty store URL (want file:///dir, mem://name, s3://bucket/prefix or gs://bucket/prefix)")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message quotes the whole URL, credentials and all
		}
		if !strings.Contains(rawURL, "://") && !strings.HasPrefix(rawURL, "mem:") {
			if s, ok := fileSuggestion(rawURL); ok {
				return nil, bad("not a store URL (%v): did you mean %s?", err, s)
			}
		}
		return nil, bad("not a valid URL: %v", err)
	}
	switch u.Scheme {
	case "":
		s, _ := fileSuggestion(rawURL)
		return nil, bad("a path is not a store URL: did you mean %s?", s)
	case "file":
		if u.Opaque != "" { // file:dir/sub
			s, _ := fileSuggestion(u.Opaque)
			return nil, bad("a file URL is file:// and an absolute path: did you mean %s?", s)
		}
		if (u.Host != "" && u.Host != "localhost") || u.User != nil {
			// file://dir/sub: "dir" is the host. Most likely a relative path was meant.
			rel := strings.TrimPrefix(rawURL, "file://")
			if at := strings.LastIndex(rel, "@"); u.User != nil && at >= 0 {
				rel = rel[at+1:]
			}
			s, _ := fileSuggestion(rel)
			abs := (&url.URL{Scheme: "file", Path: "/" + rel}).String()
			return nil, bad("a file URL is file:// and an absolute path, but this one names the host %q: did you mean %s (relative to the current directory) or %s?", u.Host, s, abs)
		}
		if u.Path == "" {
			return nil, bad("file URL has no path (want file:///dir)")
		}
	case "mem":
	case "s3", "gs":
		if u.Host == "" {
			return nil, bad("%s URL names no bucket (want %s://bucket/prefix)", u.Scheme, u.Scheme)
		}
		if u.User != nil {
			if u.Scheme == "gs" {
				return nil, bad("gs:// URLs carry no credentials (GCS credentials come from GOOGLE_APPLICATION_CREDENTIALS or the application default credentials)")
			}
			if _, ok := u.User.Password(); !ok || u.User.Username() == "" {
				return nil, bad("credentials in an s3:// URL are ACCESS_KEY_ID:SECRET_ACCESS_KEY@bucket (better: the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables)")
			}
			if strings.EqualFold(u.Query().Get("anonymous"), "true") {
				return nil, bad("s3:// URL has both credentials and anonymous=true")
			}
		}
	case "http", "https":
		return nil, bad("unsupported store scheme %q (want file, mem, s3 or gs; for an S3-compatible server at %s://%s use s3://BUCKET?endpoint=%s://%s&use_path_style=true&region=REGION)",
			u.Scheme, u.Scheme, u.Host, u.Scheme, u.Host)
	default:
		return nil, bad("unsupported store scheme %q (want file, mem, s3 or gs)", u.Scheme)
	}
	return u, nil
}

// fileSuggestion turns a path into the file:// URL of its absolute form (no I/O).
func fileSuggestion(p string) (string, bool) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "file:///" + strings.TrimPrefix(p, "/"), false
	}
	return (&url.URL{Scheme: "file", Path: abs}).String(), true
}
