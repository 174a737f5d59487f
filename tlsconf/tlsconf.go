// Package tlsconf builds the proxy's TLS configurations: the one its
// listeners present to clients, whose certificate is re-read while the
// proxy runs, and the one it dials the upstream with.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrNoCertificates is returned for a CA file that holds no PEM certificate.
var ErrNoCertificates = errors.New("no PEM certificate found")

// loadPool reads a PEM file of CA certificates.
func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %w", path, ErrNoCertificates)
	}
	return pool, nil
}

// UpstreamOptions say how the proxy verifies the upstream and presents
// itself to it. The zero value verifies with the system roots and presents
// no certificate.
type UpstreamOptions struct {
	// CA is a PEM file of CAs replacing the system roots. Empty: system roots.
	CA string
	// Cert and Key are a PEM client certificate and key. Empty: none.
	Cert, Key string
	// InsecureSkipVerify accepts any certificate.
	InsecureSkipVerify bool
}

// Upstream returns the configuration for upstream connections. Its
// ServerName is empty: each dial sets the host it verifies (see ForHost).
func Upstream(o UpstreamOptions) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.InsecureSkipVerify}
	if o.CA != "" {
		pool, err := loadPool(o.CA)
		if err != nil {
			return nil, fmt.Errorf("upstream-tls-ca: %w", err)
		}
		cfg.RootCAs = pool
	}
	if o.Cert != "" {
		pair, err := tls.LoadX509KeyPair(o.Cert, o.Key)
		if err != nil {
			return nil, fmt.Errorf("upstream-tls-cert %s: %w", o.Cert, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// ForHost returns base for one dial, verifying and sending name as SNI.
func ForHost(base *tls.Config, name string) *tls.Config {
	cfg := base.Clone()
	cfg.ServerName = name
	return cfg
}
