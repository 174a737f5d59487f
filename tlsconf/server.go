package tlsconf

import (
	"crypto/tls"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// PollInterval is how often a Server looks at its certificate files.
const PollInterval = time.Second

// Server is the TLS configuration of the proxy's listeners. Its
// certificate is read through an atomic pointer that Reload swaps, so a
// new pair applies to the next handshake and connections already open keep
// theirs. Watch re-reads the pair when either file changes.
type Server struct {
	certFile, keyFile string
	log               *slog.Logger
	cfg               *tls.Config

	cert atomic.Pointer[tls.Certificate]

	mu   sync.Mutex // one reload at a time; guards seen
	seen [2]fileStamp

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewServer loads the pair and, if clientCA is not empty, requires client
// certificates that verify against it. log receives reload outcomes; nil
// discards them.
func NewServer(certFile, keyFile, clientCA string, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{certFile: certFile, keyFile: keyFile, log: log}
	if err := s.reload(); err != nil {
		return nil, err
	}
	s.cfg = &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.cert.Load(), nil
		},
	}
	if clientCA != "" {
		pool, err := loadPool("--tls-client-ca", clientCA)
		if err != nil {
			return nil, err
		}
		s.cfg.ClientCAs = pool
		s.cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return s, nil
}

// Config returns the listeners' configuration.
func (s *Server) Config() *tls.Config { return s.cfg }

// ConfigFor returns the listeners' configuration with admit deciding, at
// every handshake, whether the ClientHello (its server name) is one to
// serve. It decides in GetConfigForClient, which crypto/tls calls for
// every ClientHello, resumed sessions included: a certificate lookup alone
// would be skipped when a client resumes a session, and the name it asks
// for then would go unseen. A refused ClientHello gets a configuration
// without session tickets (so no resumption skips its lookup) and without
// a certificate, and crypto/tls ends the handshake with the
// unrecognized_name alert (RFC 6066, section 3) before any key exchange,
// where an error from either callback would send internal_error. The
// certificate, its reload and client certificate checks are those of
// Config.
func (s *Server) ConfigFor(admit func(*tls.ClientHelloInfo) bool) *tls.Config {
	refuse := s.cfg.Clone()
	refuse.SessionTicketsDisabled = true
	refuse.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }
	cfg := s.cfg.Clone()
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if admit(hello) {
			return nil, nil // cfg itself
		}
		return refuse, nil
	}
	return cfg
}

// Certificate returns the pair in use.
func (s *Server) Certificate() *tls.Certificate { return s.cert.Load() }

// Reload re-reads the pair now, as on SIGHUP. A pair that does not load
// keeps the current one; the error says why.
func (s *Server) Reload() error {
	if err := s.reload(); err != nil {
		s.log.Warn("tls certificate not reloaded; keeping the current one", "cert", s.certFile, "key", s.keyFile, "err", err)
		return err
	}
	s.log.Info("tls certificate reloaded", "cert", s.certFile)
	return nil
}

func (s *Server) reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Stamps are taken before reading, so a write that lands during the
	// read is seen as a change by the next poll.
	stamps := [2]fileStamp{stampOf(s.certFile), stampOf(s.keyFile)}
	s.seen = stamps
	pair, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return pairError("--tls-cert", s.certFile, "--tls-key", s.keyFile, err)
	}
	s.cert.Store(&pair)
	return nil
}

// Watch polls the two files every interval until Close, reloading when
// either changed. Stat follows symbolic links, so the swap of a
// Kubernetes secret mount's ..data link, a rename into place and an
// in-place write are all seen.
func (s *Server) Watch(interval time.Duration) {
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.watch(interval)
}

func (s *Server) watch(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if s.changed() {
			_ = s.Reload()
		}
	}
}

func (s *Server) changed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.seen[0].same(stampOf(s.certFile)) || !s.seen[1].same(stampOf(s.keyFile))
}

// Close stops Watch and waits for it.
func (s *Server) Close() {
	s.once.Do(func() {
		if s.stop != nil {
			close(s.stop)
			<-s.done
		}
	})
}

// fileStamp identifies one version of a file: another file (renamed into
// place), size or modification time means new contents. A missing file has
// the zero stamp.
type fileStamp struct{ fi os.FileInfo }

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi}
}

func (a fileStamp) same(b fileStamp) bool {
	if a.fi == nil || b.fi == nil {
		return a.fi == b.fi
	}
	return os.SameFile(a.fi, b.fi) && a.fi.Size() == b.fi.Size() && a.fi.ModTime().Equal(b.fi.ModTime())
}
