// Package admin serves the operator's HTTP endpoint: /metrics in the
// Prometheus formats, /healthz (liveness: the process runs), /readyz
// (readiness: send this proxy new clients) and, only when asked,
// /debug/pprof/. It is an http.Server of its own with its own mux and
// bounded timeouts; nothing is mounted on http.DefaultServeMux.
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
)

// Options configure the admin endpoint. The zero value of each field is
// described beside it.
type Options struct {
	// Listen is the HOST:PORT to serve on; port 0 picks a free port.
	Listen string
	// Pprof mounts net/http/pprof under /debug/pprof/. False leaves it out.
	Pprof bool
	// Metrics is served at /metrics. Nil answers 404 there.
	Metrics *metrics.Metrics
	// Ready reports whether the proxy should be sent new clients: nil
	// when ready, otherwise the reason, written in the 503 body. Nil means
	// always ready.
	Ready func() error
	// Log receives the server's own errors. Nil discards them.
	Log *slog.Logger
}

// Server is a running admin endpoint.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Listen opens the admin listener; Serve then answers on it.
func Listen(o Options) (*Server, error) {
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, config.ListenError("--admin-listen", o.Listen, err, "")
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{ln: ln, srv: &http.Server{
		Handler:           newMux(o),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		// A CPU profile runs 30 seconds by default.
		WriteTimeout:   60 * time.Second,
		IdleTimeout:    60 * time.Second,
		MaxHeaderBytes: 16 << 10,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}}, nil
}

// Addr returns the address the endpoint listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve answers until Shutdown or Close, and then returns nil.
func (s *Server) Serve() error {
	if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting and waits for requests in progress until ctx
// ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Close closes the listener and every connection at once.
func (s *Server) Close() error { return s.srv.Close() }

func newMux(o Options) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", o.Metrics.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if o.Ready != nil {
			if err := o.Ready(); err != nil {
				writeText(w, http.StatusServiceUnavailable, err.Error())
				return
			}
		}
		writeText(w, http.StatusOK, "ready")
	})
	if o.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintln(w, body)
}
