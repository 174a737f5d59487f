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

	"github.com/inorder-proxy/inorder/config"
)

// ErrNoCertificates is returned for a CA file that holds no PEM certificate.
var ErrNoCertificates = errors.New("no PEM certificate found")

// loadPool reads a PEM file of CA certificates; flag names the setting
// that gave path, for the error.
func loadPool(flag, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fileError(flag, path, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %q holds no certificate: %w (it needs -----BEGIN CERTIFICATE----- blocks)", flag, path, ErrNoCertificates)
	}
	return pool, nil
}

// fileError says that the file path, given by flag, could not be read.
func fileError(flag, path string, err error) error {
	return config.Explain(err, fmt.Sprintf("%s: %q cannot be read: %s", flag, path, config.FileReason(err)))
}

// pairError says that the certificate and key given by certFlag and
// keyFlag do not make a pair.
func pairError(certFlag, cert, keyFlag, key string, err error) error {
	return fmt.Errorf("%s %q and %s %q do not load: %w", certFlag, cert, keyFlag, key, err)
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
	// CAFlag names the setting CA came from, in errors. Empty means the
	// proxy's --upstream-tls-ca.
	CAFlag string
}

// Upstream returns the configuration for upstream connections. Its
// ServerName is empty: each dial sets the host it verifies (see ForHost).
func Upstream(o UpstreamOptions) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.InsecureSkipVerify}
	if o.CA != "" {
		flag := o.CAFlag
		if flag == "" {
			flag = "--upstream-tls-ca"
		}
		pool, err := loadPool(flag, o.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if o.Cert != "" {
		pair, err := tls.LoadX509KeyPair(o.Cert, o.Key)
		if err != nil {
			return nil, pairError("--upstream-tls-cert", o.Cert, "--upstream-tls-key", o.Key, err)
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
