package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/shale-db/shale/serve/plan"
)

// ErrNotFound is what a Source's Table returns, wrapped and naming the table, for a table
// the sidecar does not know (no such table, or dropped and gone): /v1/tables/{name}
// answers 404 with error kind "not_found". plan.ErrUnknownTable (from plan.Why) is
// treated the same.
var ErrNotFound = errors.New("admin: table not found")

// Source is what the admin endpoint reports: the runtime implements it (package serve),
// reading etcd at request time. Its methods are called concurrently, one call per
// request, with the request's context (cancelled when the client goes away or the server
// closes); they must honour it.
type Source interface {
	// Status is this process's view of the sidecar, for GET /v1/status.
	Status(ctx context.Context) (Status, error)
	// Table reports one table, for GET /v1/tables/{name}; an error wrapping ErrNotFound
	// (or plan.ErrUnknownTable) for a table it does not know.
	Table(ctx context.Context, name string) (TableReport, error)
	// Healthy is nil when the process works (GET /healthz answers 200 "ok"), else why
	// not (503 with the error).
	Healthy(ctx context.Context) error
}

// Error kinds of the admin endpoint's JSON error object (as the CLI's, docs/json.md).
const (
	KindNotFound    = "not_found"   // 404: no such table (ErrNotFound), or no such route
	KindUsage       = "usage"       // 405: a method other than GET or HEAD
	KindUnavailable = "unavailable" // 503: unhealthy, or the source timed out (context.DeadlineExceeded)
	KindInterrupted = "interrupted" // 503: the request was cancelled (client gone, server closing)
	KindError       = "error"       // 500: anything else
	KindInternal    = "internal"    // 500: a bug: the Source panicked (the panic is logged)
)

// errorBody is the JSON error object: {"error":{"kind":…,"message":…}}.
type errorBody struct {
	Error struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
}

// Server is a running admin endpoint: an HTTP server on its own listener serving
//
//	GET /metrics             the Metrics (Prometheus text or OpenMetrics)
//	GET /healthz             200 "ok" when Source.Healthy is nil, else 503 with the error
//	GET /v1/status           Source.Status as JSON (Status)
//	GET /v1/tables/{name}    Source.Table as JSON (TableReport); 404 for ErrNotFound
//
// JSON responses are one indented object ending in a newline, Content-Type
// application/json. Every error is the JSON object {"error":{"kind":…,"message":…}} with
// the status its kind names (the Kind constants): 404 for an unknown table or path, 405
// for another method, 503 when unhealthy or the source timed out or was cancelled, 500
// for any other source error or a panic in the Source. Its methods are safe for concurrent use.
type Server struct {
	ln  net.Listener
	srv *http.Server
	log *slog.Logger

	done      chan struct{} // closed when Serve returns
	serveErr  error         // Serve's result, set before done is closed
	closeOnce sync.Once
	closeErr  error // the first Close's result
}

// NewServer listens on addr (host:port; ":0" or "127.0.0.1:0" picks a free port, see
// Addr) and serves src and m there in a goroutine until Close. log receives a line per
// failed request and the server's errors (nil: slog.Default()). Errors: src or m nil, or
// the listen failing (the address in use, a bad address).
func NewServer(addr string, src Source, m *Metrics, log *slog.Logger) (*Server, error) {
	if src == nil || m == nil {
		return nil, errors.New("admin: NewServer needs a Source and Metrics")
	}
	if log == nil {
		log = slog.Default()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin: listen on %q: %w", addr, err)
	}
	s := &Server{ln: ln, log: log, done: make(chan struct{})}
	s.srv = &http.Server{
		Handler:           recoverPanics(handler(src, m, log), log),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		s.serveErr = s.srv.Serve(ln)
		close(s.done)
	}()
	return s, nil
}

// Addr is the address the server listens on (host:port, the port chosen when addr's was
// 0).
func (s *Server) Addr() string {
	return s.ln.Addr().String()
}

// Close stops the server: it stops accepting connections and waits for requests in
// flight until ctx is done, then closes what remains and returns ctx's error. Later calls
// return the first call's result.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		err := s.srv.Shutdown(ctx)
		if err != nil {
			_ = s.srv.Close()
		}
		<-s.done
		if s.serveErr != nil && !errors.Is(s.serveErr, http.ErrServerClosed) {
			s.log.Warn("admin: serve", "addr", s.Addr(), "err", s.serveErr)
		}
		s.closeErr = err
	})
	return s.closeErr
}

// handler is the admin endpoint's routes.
func handler(src Source, m *Metrics, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := src.Healthy(r.Context()); err != nil {
			writeError(w, r, log, http.StatusServiceUnavailable, KindUnavailable, err)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		st, err := src.Status(r.Context())
		if err != nil {
			writeSourceError(w, r, log, err)
			return
		}
		writeJSON(w, r, log, st)
	})
	mux.HandleFunc("GET /v1/tables/{name}", func(w http.ResponseWriter, r *http.Request) {
		rep, err := src.Table(r.Context(), r.PathValue("name"))
		if err != nil {
			writeSourceError(w, r, log, err)
			return
		}
		writeJSON(w, r, log, rep)
	})
	// Anything else: 405 on a known route, 404 elsewhere, both as JSON errors.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "/metrics" || p == "/healthz" || p == "/v1/status" ||
			(strings.HasPrefix(p, "/v1/tables/") && len(p) > len("/v1/tables/") && !strings.Contains(p[len("/v1/tables/"):], "/")) {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, r, log, http.StatusMethodNotAllowed, KindUsage,
				fmt.Errorf("method %s not allowed on %s (GET or HEAD)", r.Method, p))
			return
		}
		writeError(w, r, log, http.StatusNotFound, KindNotFound,
			fmt.Errorf("no such path %q (the admin endpoint serves /metrics, /healthz, /v1/status, /v1/tables/{name})", p))
	})
	return mux
}

// recoverPanics answers a request whose handler panicked with a 500 JSON error of kind
// KindInternal, and logs the panic, instead of dropping the connection.
// http.ErrAbortHandler is re-panicked (it is how a handler aborts on purpose).
func recoverPanics(h http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			log.Error("admin: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v,
				"stack", string(debug.Stack()))
			writeError(w, r, log, http.StatusInternalServerError, KindInternal, fmt.Errorf("internal error: %v", v))
		}()
		h.ServeHTTP(w, r)
	})
}

// writeSourceError answers a Source error with the status and kind it names.
func writeSourceError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, plan.ErrUnknownTable):
		writeError(w, r, log, http.StatusNotFound, KindNotFound, err)
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, r, log, http.StatusServiceUnavailable, KindUnavailable, err)
	case errors.Is(err, context.Canceled):
		writeError(w, r, log, http.StatusServiceUnavailable, KindInterrupted, err)
	default:
		writeError(w, r, log, http.StatusInternalServerError, KindError, err)
	}
}

// writeError writes the JSON error object with status code.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, code int, kind string, err error) {
	var b errorBody
	b.Error.Kind, b.Error.Message = kind, err.Error()
	level := slog.LevelDebug // a 4xx is the client's business; /healthz failing is what it is for
	if code >= 500 && r.URL.Path != "/healthz" {
		level = slog.LevelWarn
	}
	log.Log(r.Context(), level, "admin: request failed", "method", r.Method, "path", r.URL.Path,
		"status", code, "kind", kind, "err", err)
	writeBody(w, r, log, code, b)
}

// writeJSON writes v as a 200 JSON response.
func writeJSON(w http.ResponseWriter, r *http.Request, log *slog.Logger, v any) {
	writeBody(w, r, log, http.StatusOK, v)
}

// writeBody writes v as one indented JSON object and a newline, with status code.
func writeBody(w http.ResponseWriter, r *http.Request, log *slog.Logger, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil { // a Source returned something JSON cannot encode: a bug
		log.Error("admin: encode response", "path", r.URL.Path, "err", err)
		code = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		}{KindError, "encode response: " + err.Error()}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
