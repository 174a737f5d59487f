package cmd

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/inorder-proxy/inorder/proxy"
)

// reloadOnHangup re-reads the listeners' certificate on each SIGHUP until
// ctx ends. A bad new pair keeps the old one; the proxy logs why.
func reloadOnHangup(ctx context.Context, p *proxy.Proxy, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: reloading the tls certificate")
				_ = p.ReloadCertificates()
			}
		}
	}()
}
